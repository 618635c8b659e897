"""The memory estimate in the words of a report: one line for the terminal and the formats
(``report_line``) and the summary block of the JSON document (``report_summary``), from the
``memory.*`` facts memory/facts.py wrote."""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts
from vllm_doctor.memory.facts import MEMORY_PATHS

# a weights figure resting on an assumption: why the verdicts are undecided, and the way out
# -- the one line every report shows -----------------------------------------------------------

# every figure but the verdict on room and the line itself, in MEMORY_PATHS' order
SUMMARY_PATHS = tuple(
    path for path in MEMORY_PATHS if path not in ("memory.kv_room", "memory.estimate_line")
)


def report_line(facts: Facts) -> str | None:
    """ "KV cache ≈ 51 GiB ≈ 420k tokens ≈ 12.8 concurrent requests of 32k (…)", or None;
    with a start-up log, what vLLM printed beside it."""
    line = facts.value("memory.estimate_line")
    figures = facts.value("log.memory_figures")
    if not line:
        if isinstance(figures, dict):
            from vllm_doctor.memory.readback import describe

            return f"vLLM printed: {describe(figures)} (no estimate: {_why_no_estimate(facts)})"
        return _partial_line(facts)
    weights, usable = facts.value("memory.weights_gib"), facts.value("memory.usable_gib")
    margin = facts.value("memory.margin_gib")
    total = facts.get("gpu.memory_total_mib")
    sizes = ""
    if total is not None and total.inferred and isinstance(total.possible, list):
        sizes = (
            " (the smallest of "
            + " or ".join(f"{int(s) // 1024}" for s in total.possible)
            + " GiB)"
        )
    line = (
        f"{line} (per GPU: weights {weights} GiB of {usable} GiB usable{sizes}; "
        f"± {margin} GiB margin)"
    )
    if isinstance(figures, dict):
        from vllm_doctor.memory.readback import compare

        rows = compare(figures, facts)
        shown = ", ".join(
            f"{r['figure']} {r['printed']} ({r['error']:+.1%})"
            for r in rows
            if r["error"] is not None
        )
        if shown:
            line += f"; vLLM printed {shown}"
    return line


def _partial_line(facts: Facts) -> str | None:
    """What _partial_figures found where the whole estimate could not be made: "weights
    15.26 GiB per GPU; KV 144.00 KiB per token (36 full layers); the KV cache needs …"."""
    weights, per_token = facts.value("memory.weights_gib"), facts.value("memory.kv_bytes_per_token")
    if weights is None and per_token is None:
        return None
    from vllm_doctor.report.facts_view import format_bytes

    known = []
    if weights is not None:
        fact = facts.get("memory.weights_gib")
        detail = (fact.detail if fact is not None else None) or ""
        assumed = " (rests on an assumed value)" if detail.startswith("assuming ") else ""
        known.append(f"weights {weights} GiB per GPU{assumed}")
    if per_token is not None:
        layers = str(facts.value("memory.kv_layers") or "").split(" (")[0]
        known.append(f"KV {format_bytes(int(per_token))} per token ({layers} layers)")
    reason = _why_no_estimate(facts)
    if not reason.startswith("needs gpu.memory_total_mib"):
        need = f"the KV cache {reason}"
    elif facts.value("gpu.names"):  # a GPU whose size the name does not tell: say why
        reason = reason.removeprefix("needs gpu.memory_total_mib: ")
        need = f"the KV cache needs the GPU's memory size ({reason})"
    else:
        need = "the KV cache needs the GPU's memory size: --gpu NAME or --report collect-env.txt"
    return "; ".join([*known, need])


def _why_no_estimate(facts: Facts) -> str:
    reason = facts.why_missing("memory.kv_cache_gib") or "not collected"
    return reason if len(reason) <= 160 else reason[:159] + "…"


def report_summary(facts: Facts) -> dict[str, Any] | None:
    """The estimate for the JSON document: the line, its figures and, with a start-up log,
    vLLM's printed figures compared with them; None when there is neither."""
    line = report_line(facts)
    if line is None:
        return None
    figures = facts.value("log.memory_figures")
    data: dict[str, Any] = {
        "estimate": line,
        "figures": {path.split(".", 1)[1]: facts.value(path) for path in SUMMARY_PATHS},
    }
    if isinstance(figures, dict):
        from vllm_doctor.memory.readback import compare

        data["printed"] = figures
        data["comparison"] = compare(figures, facts)
    return data
