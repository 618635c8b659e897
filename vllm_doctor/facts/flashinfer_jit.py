"""Whether vLLM's start-up JIT-compiles FlashInfer's sampler (``release.flashinfer_sampler_jit``).

vLLM samples top-k/top-p with FlashInfer where ``VLLM_USE_FLASHINFER_SAMPLER`` is true (the
value the judged release takes: release.env, from the envs table; its default is True from the
release that made it so, None before, which those releases only truth-test: off) and flashinfer-python is installed; the dummy
sampler run at start-up then loads ``flashinfer.sampling``'s module, which FlashInfer builds
with nvcc unless flashinfer-jit-cache ships it prebuilt (flashinfer-cubin carries only the
TensorRT-LLM cubins, not the JIT modules). vLLM issue 44305: the sampler's JIT build stops
start-up; VLLM_USE_FLASHINFER_SAMPLER=0 starts it.
"""

from __future__ import annotations

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATH = "release.flashinfer_sampler_jit"


def _open(facts: Facts, source: str, reason: str) -> None:
    """Missing because ``source`` is; unknowable where that one cannot be known from this
    kind of input (collect-env does not list flashinfer-jit-cache)."""
    if facts.is_unknowable(source):
        facts.mark_unknowable(PATH, reason)
    else:
        facts.mark_missing(PATH, reason)


def collect_flashinfer_jit(facts: Facts) -> None:
    from vllm_doctor.facts.release_stack import _installed

    sampler = facts.get("release.env.VLLM_USE_FLASHINFER_SAMPLER")
    if sampler is None:
        why = facts.why_missing("release.env.VLLM_USE_FLASHINFER_SAMPLER")
        _open(
            facts,
            "release.env.VLLM_USE_FLASHINFER_SAMPLER",
            f"release.env.VLLM_USE_FLASHINFER_SAMPLER: {why or 'not known'}",
        )
        return
    said = f"VLLM_USE_FLASHINFER_SAMPLER={sampler.value} ({sampler.detail})"
    if sampler.value is not True:
        facts.set(PATH, False, SOURCE, f"{said}: vLLM samples with PyTorch")
        return
    python, why = _installed(facts, "flashinfer-python", inferred=False)
    if python is None:
        if why:
            _open(facts, "packages.flashinfer-python", f"flashinfer-python: {why}")
        else:
            facts.set(PATH, False, SOURCE, f"{said}; flashinfer-python is not installed")
        return
    cache, why = _installed(facts, "flashinfer-jit-cache", inferred=False)
    if cache is not None:
        facts.set(PATH, False, SOURCE, f"{said}; flashinfer-jit-cache {cache} ships the module")
    elif why:
        _open(facts, "packages.flashinfer-jit-cache", f"flashinfer-jit-cache: {why}")
    else:
        facts.set(
            PATH,
            True,
            SOURCE,
            f"{said}; flashinfer-python {python} without flashinfer-jit-cache: the sampling "
            "module is built with nvcc at start-up",
        )
