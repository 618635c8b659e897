"""vLLM's printed start-up memory figures beside the doctor's estimate.

A start-up log (``check --log`` / ``explain --log``) is read with
``vllm_doctor.logreaders.memory_figures``; its figures become the fact ``log.memory_figures``
and each one the estimate also gives is compared: printed, estimated, and the relative error.
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts

# (figure vLLM printed, the memory fact that estimates it, words)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("total_gpu_gib", "memory.usable_gib", "total GPU memory (GiB)"),
    ("weights_gib", "memory.weights_gib", "weights per GPU (GiB)"),
    ("activation_peak_gib", "memory.activation_peak_gib", "activation peak (GiB)"),
    ("non_torch_gib", "memory.non_torch_gib", "non-torch memory (GiB)"),
    ("cuda_graph_estimate_gib", "memory.cuda_graph_gib", "CUDA-graph estimate (GiB)"),
    ("kv_cache_gib", "memory.kv_cache_gib", "KV cache (GiB)"),
    ("kv_cache_tokens", "memory.kv_cache_tokens", "KV cache tokens"),
    ("max_concurrency", "memory.max_concurrency", "max concurrency"),
)
_WORDS = {
    "total_gpu_gib": "total {v} GiB",
    "utilization": "utilization {v}",
    "weights_gib": "weights {v} GiB",
    "non_torch_gib": "non-torch {v} GiB",
    "activation_peak_gib": "activation peak {v} GiB",
    "kv_cache_gib": "KV cache {v} GiB",
    "kv_cache_tokens": "{v:,} tokens",
    "cuda_graph_gib": "CUDA graphs took {v} GiB",
    "cuda_graph_estimate_gib": "CUDA-graph estimate {v} GiB",
    "gpu_blocks": "{v:,} GPU blocks",
}


def printed(text: str) -> dict[str, float | int | str] | None:
    """The memory figures a log prints, or None when it prints none."""
    from vllm_doctor.logreaders.memory_figures import read_memory_figures

    figures = read_memory_figures(text)
    return None if figures.empty() else figures.to_dict()


def describe(figures: dict[str, Any]) -> str:
    """vLLM's figures in one line."""
    parts = [_WORDS[k].format(v=v) for k, v in figures.items() if k in _WORDS]
    if figures.get("max_concurrency") is not None:
        tokens = figures.get("max_concurrency_tokens")
        parts.append(
            f"{figures['max_concurrency']}× requests" + (f" of {tokens:,} tokens" if tokens else "")
        )
    return "; ".join(parts)


def _estimated_max_len(facts: Facts) -> int | None:
    """The request length the estimate's concurrency is for where it is not the log's: the
    serve line's --max-model-len (without one the estimate takes the log's length)."""
    value = facts.value("serve.max_model_len")
    return int(value) if value else None


def compare(figures: dict[str, Any], facts: Facts) -> list[dict[str, Any]]:
    """Each figure both vLLM and the estimate give: printed, estimated, relative error (none,
    with a note, where the two are not for the same thing: concurrencies for different
    request lengths)."""
    rows = []
    for key, path, words in PAIRS:
        seen, estimated = figures.get(key), facts.value(path)
        if seen is None or estimated is None:
            continue
        error = (float(estimated) - float(seen)) / float(seen) if seen else None
        note = None
        logged_len = figures.get("max_concurrency_tokens")
        if key == "max_concurrency" and logged_len:
            length = _estimated_max_len(facts)
            if length and length != int(logged_len):
                error = None
                note = (
                    f"vLLM's is for {int(logged_len):,} tokens per request, the estimate's for "
                    f"{length:,}: pass the serve line's --max-model-len to compare them"
                )
        row = {
            "figure": words,
            "fact": path,
            "printed": seen,
            "estimate": estimated,
            "error": None if error is None else round(error, 4),
        }
        if note:
            row["note"] = note
        rows.append(row)
    return rows


def comparison_lines(figures: dict[str, Any], facts: Facts) -> list[str]:
    """The comparison as text, one figure a line."""
    lines = []
    for row in compare(figures, facts):
        lines.append(row_line(row))
    return lines


def row_line(row: dict[str, Any]) -> str:
    """One compared figure in words."""
    error = "" if row["error"] is None else f" ({row['error']:+.1%})"
    note = f" ({row['note']})" if row.get("note") else ""
    return f"{row['figure']}: vLLM {row['printed']}, estimate {row['estimate']}{error}{note}"
