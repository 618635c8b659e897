"""vLLM's printed start-up memory figures beside the doctor's estimate.

A start-up log (``check --log`` / ``explain --log``) is read with
``vllm_doctor.logreaders.memory_figures``; its figures become the fact ``log.memory_figures``
and each one the estimate also gives is compared: printed, estimated, and the relative error.
"""

from __future__ import annotations

import re
from typing import Any

from vllm_doctor.facts.model import Facts, Source

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


# the serve arguments that change the figures: (argument, serve fact, the figures it moves)
_SIZED = ("kv_cache_gib", "kv_cache_tokens", "max_concurrency")
_PROFILED = ("activation_peak_gib", "cuda_graph_estimate_gib", *_SIZED)
_EVERY = ("weights_gib", "non_torch_gib", *_PROFILED)
RUN_INPUTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("tensor_parallel_size", "serve.tensor_parallel_size", _EVERY),
    ("pipeline_parallel_size", "serve.pipeline_parallel_size", _EVERY),
    ("gpu_memory_utilization", "serve.gpu_memory_utilization", _SIZED),
    ("quantization", "serve.quantization", _EVERY),
    ("dtype", "serve.dtype", _EVERY),
    ("kv_cache_dtype", "serve.kv_cache_dtype", ("kv_cache_tokens", "max_concurrency")),
    ("max_num_seqs", "serve.max_num_seqs", _PROFILED),
    ("max_num_batched_tokens", "serve.max_num_batched_tokens", _PROFILED),
    ("enforce_eager", "serve.enforce_eager", ("cuda_graph_estimate_gib", *_SIZED)),
)
# what a run whose whole "non-default args" line leaves an argument out ran with (the batch
# sizes' defaults depend on the GPU: not inferred); RELEASE_DEFAULT: the release's default
RELEASE_DEFAULT = "the release's default"
_LOG_DEFAULTS: dict[str, object] = {
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "gpu_memory_utilization": RELEASE_DEFAULT,
    "quantization": None,
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "enforce_eager": False,
}
# vLLM's "non-default args: {...}" line (vllm/entrypoints/utils.py, 0.10.0 on; its end seen
# when the log kept the whole line) and the engine's "with config: ... tensor_parallel_size=2"
_NON_DEFAULT = re.compile(r"non-default args: \{([^\n]{0,4000})")
_ARG = re.compile(r"'(\w{1,40})': ('[^']{0,100}'|[\w.\-]{1,40})")
# each starts with its literal name, which the regex engine finds fast (a pattern that starts
# with \b or a group steps through every character of a 60 MB log: seconds)
_CONFIG_ARGS = {
    name: re.compile(name + r"=(\d{1,4})\b")
    for name in ("tensor_parallel_size", "pipeline_parallel_size")
}


def _literal(raw: str) -> object:
    if raw.startswith("'"):
        return raw.strip("'")
    if raw in ("True", "False"):
        return raw == "True"
    if raw == "None":
        return None
    try:
        return int(raw) if raw.lstrip("-").isdigit() else float(raw)
    except ValueError:
        return raw


def run_args(text: str) -> dict[str, object]:
    """The serve arguments the log's run shows for the inputs of the figures (RUN_INPUTS): its
    "non-default args" (those it leaves out at their defaults), the engine's config line, and
    ``world_size_at_least`` from the ranks that print figures."""
    from vllm_doctor.logreaders.memory_figures import rank_of, read_memory_figures_by_rank

    found: dict[str, object] = {}
    match = _NON_DEFAULT.search(text)
    if match:
        listed = {k: _literal(v) for k, v in _ARG.findall(match.group(1))}
        whole = match.group(1).rstrip().endswith("}")
        for name, _fact, _figures in RUN_INPUTS:
            if name in listed:
                found[name] = listed[name]
            elif whole and name in _LOG_DEFAULTS:
                found[name] = _LOG_DEFAULTS[name]
    for name, pattern in _CONFIG_ARGS.items():
        for match in pattern.finditer(text):
            before = text[match.start() - 1 : match.start()]
            if not (before.isalnum() or before == "_"):  # the whole word, as \b said
                found.setdefault(name, int(match.group(1)))
                break
    ranks = [rank_of(label) for label in read_memory_figures_by_rank(text)]
    known = [r for r in ranks if r is not None]
    if known and max(known) > 0:
        found["world_size_at_least"] = max(known) + 1
    return found


def printed(text: str) -> dict[str, Any] | None:
    """The memory figures a log prints, or None when it prints none; ``run_args`` holds the
    serve arguments its run shows (run_args)."""
    from vllm_doctor.logreaders.memory_figures import read_memory_figures

    figures = read_memory_figures(text)
    if figures.empty():
        return None
    out: dict[str, Any] = figures.to_dict()
    args = run_args(text)
    if args:
        out["run_args"] = args
    return out


def formula_release(version: str | None) -> tuple[str, str | None]:
    """The covered release whose formula the estimate applies to ``version`` (its thresholds
    are covered releases: the newest one at or before it, the oldest for an older version) and
    why, where that is not the version itself."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.knowledge import covered_releases

    releases = covered_releases()
    oldest, newest = releases[0], releases[-1]
    if not version:
        return newest, "version unknown: the newest release's formula"
    try:
        v = Version(str(version))
    except InvalidVersion:
        return newest, f"{version!r} is not a version: the newest release's formula"
    below = [r for r in releases if Version(r) <= v]
    if not below:
        return oldest, f"the oldest the knowledge covers; {version} is before it"
    base = below[-1]
    if Version(base) == Version(v.public):
        return base, None
    if base == newest:
        return base, f"the newest the knowledge covers; {version} is past it"
    after = releases[releases.index(base) + 1]
    return base, f"{version} is between {base} and {after}: the formula of {base}"


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


def _same(logged: object, used: object) -> bool:
    if isinstance(logged, bool) or isinstance(used, bool):
        return bool(logged) == bool(used)
    try:
        return abs(float(logged) - float(used)) < 1e-6  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(logged or "auto").lower() == str(used or "auto").lower()


def _estimate_input(facts: Facts, name: str, path: str) -> object:
    """The value of a serve argument the estimate used (memory/estimate.py's defaults)."""
    fact = facts.get(path)
    if name in ("tensor_parallel_size", "pipeline_parallel_size"):
        return _parallel(facts, path)
    if name == "gpu_memory_utilization":
        if fact is not None and fact.value and fact.source != Source.DEFAULT:
            return float(fact.value)
        return _release_utilization(facts)
    return None if fact is None else fact.value


def _parallel(facts: Facts, path: str) -> int:
    value = facts.value(path)
    return int(value) if value else 1


def _release_utilization(facts: Facts) -> float:
    """The judged release's default --gpu-memory-utilization."""
    from vllm_doctor.memory.profile import default_utilization

    version = facts.value("release.judged") or facts.value("vllm.version")
    return default_utilization(str(version) if version else None)


def run_differences(figures: dict[str, Any], facts: Facts) -> dict[str, list[str]]:
    """Figure → why the estimate is for another run than the log's: an input of it that the
    log's own run shows with another value than the serve line the estimate read."""
    logged = dict(figures.get("run_args") or {})
    if figures.get("utilization") is not None:  # what the profile printed
        logged["gpu_memory_utilization"] = figures["utilization"]
    out: dict[str, list[str]] = {}
    for name, path, moved in RUN_INPUTS:
        if name not in logged:
            continue
        used = _estimate_input(facts, name, path)
        if logged[name] == RELEASE_DEFAULT:
            logged[name] = _release_utilization(facts)
        if used is None and name in ("max_num_seqs", "max_num_batched_tokens"):
            continue  # the GPU's default, which the log does not show
        if _same(logged[name], used):
            continue
        why = f"the log ran with {name} {logged[name]}, the estimate with {used}"
        for key in moved:
            out.setdefault(key, []).append(why)
    world = figures.get("run_args", {}).get("world_size_at_least")
    if world and "tensor_parallel_size" not in logged:
        size = _parallel(facts, "serve.tensor_parallel_size") * _parallel(
            facts, "serve.pipeline_parallel_size"
        )
        if size < int(world):
            why = f"the log shows {world} ranks or more, the estimate is for {size}"
            for key in _EVERY:
                out.setdefault(key, []).append(why)
    return out


def compare(figures: dict[str, Any], facts: Facts) -> list[dict[str, Any]]:
    """Each figure both vLLM and the estimate give: printed, estimated, relative error (none,
    with a note, where the two are not for the same thing: concurrencies for different
    request lengths, or a serve argument the figure depends on that the log's run shows with
    another value than the serve line)."""
    rows = []
    differences = run_differences(figures, facts)
    for key, path, words in PAIRS:
        seen, estimated = figures.get(key), facts.value(path)
        if seen is None or estimated is None:
            continue
        error = (float(estimated) - float(seen)) / float(seen) if seen else None
        notes = []
        if key in differences:
            error = None
            notes.append(
                "; ".join(differences[key]) + ": pass the log's own serve line to compare them"
            )
        logged_len = figures.get("max_concurrency_tokens")
        if key == "max_concurrency" and logged_len:
            length = _estimated_max_len(facts)
            if length and length != int(logged_len):
                error = None
                notes.append(
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
        if notes:
            row["note"] = "; ".join(notes)
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
