"""Which attention backends could hold the serve line's KV-cache dtype on the GPU
(``release.attention.kv_cache_backends``, ``release.attention.kv_cache_triton_only``).

From the generated attention table alone (the release's ``_get_backend_priorities`` list for
the GPU's capability, each backend's capability and KV-cache dtype checks): no config.json is
needed, since head size and model dtype only remove more backends. When every backend that
remains compiles its kernels with Triton (TRITON_ATTN, TRITON_MLA, and FLEX_ATTENTION through
torch.compile's Inductor), an FP8 E4M3 cache meets Triton's own limit: it emits ``fp8e4nv`` only
for compute capability 8.9 and newer ("type fp8e4nv not supported in this architecture").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = ("release.attention.kv_cache_backends", "release.attention.kv_cache_triton_only")
# the backends whose kernels Triton compiles (vllm/v1/attention/backends/triton_attn.py,
# mla/triton_mla.py, flex_attention.py through torch.compile)
TRITON_BACKENDS = frozenset({"TRITON_ATTN", "TRITON_MLA", "FLEX_ATTENTION"})


def _mark(facts: Facts, reason: str) -> None:
    for path in PATHS:
        facts.mark_missing(path, reason)


def collect_kv_cache_backends(
    facts: Facts, judged_release: Callable[..., Any], judge_backend: Callable[..., Any]
) -> None:
    """``judged_release`` and ``judge_backend`` are release_kernels' (the release that judges
    and one backend record against the inputs)."""
    kv = facts.value("serve.kv_cache_dtype")
    if kv is None:
        _mark(facts, facts.why_missing("serve.kv_cache_dtype") or "no --kv-cache-dtype given")
        return
    capabilities = facts.value("gpu.capabilities")
    if not isinstance(capabilities, list) or not capabilities:
        _mark(facts, facts.why_missing("gpu.capabilities") or "the GPU's capability is not known")
        return
    judged = judged_release(facts, "attention", PATHS)
    if judged is None:
        return
    release, values, detail = judged
    # an MLA model picks from the MLA list; a model not known could use either
    if "model.kv_lora_rank" in facts:
        kinds = ["mla"]
    elif "model.head_dim" in facts:
        kinds = ["std"]
    else:
        kinds = ["std", "mla"]
    possible: list[str] = []
    for capability in sorted({int(c) for c in capabilities if isinstance(c, int)}):
        for kind in kinds:
            candidates = values.get(f"cuda_priority:{kind}:{capability}")
            if candidates is None:
                _mark(
                    facts,
                    f"vLLM {release} has no backend priority list for capability {capability}",
                )
                return
            for name in candidates:
                record = values.get(f"backend:{name}")
                verdict = (
                    judge_backend(record, None, None, str(kv), capability)[0] if record else None
                )
                if verdict is not False and name not in possible:
                    possible.append(name)
    described = (
        f"{detail}: of platforms/cuda.py's {'/'.join(kinds)} priority list for "
        f"{'/'.join(str(c) for c in capabilities)}, the backends whose capability and "
        f"kv_cache_dtype checks accept {kv}"
    )
    facts.set("release.attention.kv_cache_backends", possible, SOURCE, described)
    facts.set(
        "release.attention.kv_cache_triton_only",
        bool(possible) and all(name in TRITON_BACKENDS for name in possible),
        SOURCE,
        described + f": {', '.join(possible) or 'none'}",
    )
