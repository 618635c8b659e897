"""vLLM's own printed reasons for refusing an attention backend.

``No valid attention backend found for cuda with AttentionSelectorConfig(...). Reasons:
{BACKEND: [reason, ...], ...}`` lists, per backend, why it refused the model. When the model
uses sparse MLA (``use_sparse=True``, DeepSeek-V3.2's sparse attention) and the sparse
backends refused the GPU's compute capability, the cause is the GPU: the knowledge
``attention`` (from the wheels) says which compute capabilities each release's sparse MLA
backends run on. A message that carries vLLM's own remedy (``Set VLLM_ATTENTION_BACKEND=X``)
is read for it.
"""

from __future__ import annotations

import re

from vllm_doctor.logreaders import LogReading, judged_release

_NO_BACKEND = re.compile(
    r"No valid attention backend found for (\w{1,20}) with "
    r"AttentionSelectorConfig\(([^)\n]{0,1000})\)\. Reasons: \{([^}\n]{1,4000})\}"
)
_REASON = re.compile(r"(\w{2,60}): \[([^\]\n]{0,800})\]")
_SET_BACKEND = re.compile(
    r"([^\n]{0,400}?)\s*Set (VLLM_ATTENTION_BACKEND=\w{2,40}) to ([^\n.]{0,200})"
)


def read(text: str, version: str | None) -> LogReading | None:
    release = judged_release(version)
    found = _NO_BACKEND.search(text)
    if found and "use_sparse=True" in found.group(2):
        return _sparse(found, release)
    suggested = _SET_BACKEND.search(text)
    if suggested:
        refused = suggested.group(1).strip().split("] ")[-1]
        refused = re.sub(r"^(?:\w+Error: )", "", refused)
        return LogReading(
            f"vLLM refused the attention backend it picked: {refused}",
            [
                f"{suggested.group(2)} vllm serve ...   # vLLM's own suggestion: {suggested.group(3).strip()}"
            ],
            [f"vLLM printed: {suggested.group(0).strip()[:300]}"],
        )
    return None


def _sparse(found: re.Match, release: str | None) -> LogReading | None:
    reasons = {
        name: [r.strip() for r in listed.split(",")]
        for name, listed in _REASON.findall(found.group(3))
    }
    refused_gpu = [
        name
        for name, why in reasons.items()
        if "SPARSE" in name and any("compute capability" in r for r in why)
    ]
    if not refused_gpu:
        return None
    runs_on, at = _sparse_capabilities(release, refused_gpu)
    where = f"vLLM {at}" if at else "vLLM"
    listed = "; ".join(
        f"{name}: {', '.join(sorted(caps))}" for name, caps in sorted(runs_on.items())
    )
    read_lines = [
        "the model uses sparse MLA (use_sparse=True); vLLM's reasons: "
        + "; ".join(f"{n}: {', '.join(r)}" for n, r in reasons.items())[:600],
        f"{where}'s sparse MLA backends run on compute capability {listed} "
        "(knowledge: attention, from the wheels)",
    ]
    every = sorted({c for caps in runs_on.values() for c in caps}, key=float)
    return LogReading(
        "the model uses sparse MLA attention (DeepSeek-V3.2-style), and no sparse MLA backend of "
        f"{where} runs on this GPU's compute capability ({', '.join(refused_gpu)} refused it); "
        "the head size, dtype and KV-cache dtype are not the cause",
        [
            f"serve it on a GPU of compute capability {', '.join(every)} (e.g. H100/H200: 9.0, "
            "B200: 10.0)"
            if every
            else "serve it on a GPU a sparse MLA backend supports"
        ],
        read_lines,
    )


def _sparse_capabilities(
    release: str | None, backends: list[str]
) -> tuple[dict[str, set[str]], str | None]:
    """Each of these sparse MLA backends -> the compute capabilities it runs on, in a release
    (else the newest)."""
    from vllm_doctor.knowledge import load

    table = load("attention")
    at = release if release in table.releases else table.newest
    out: dict[str, set[str]] = {}
    for name in backends:
        key = f"backend:{name}"
        span = table.get(key, at) if key in table else None
        if span is None:
            continue
        caps = (span.value.get("capabilities") or {}).get("yes") or []
        if caps:
            out[name] = {f"{c // 10}.{c % 10}" for c in caps}
    return out, at
