"""Whether the ``--moe-backend`` forced can run on this GPU in the judged release
(``release.moe_backend.refused_on_gpu``, ``release.moe_backend.devices``).

The knowledge table ``moe_backends`` (tools/extractors/moe_backends.py, from the MoE oracles of
every release from 0.17.0) gives, per quantization and ``--moe-backend`` choice, the experts
classes the choice selects and each class's ``_supports_current_device()`` test as a small
program over the GPU's capability. A forced backend none of whose classes passes the test
makes vLLM raise at start-up ("NvFp4 MoE backend 'FLASHINFER_TRTLLM' does not support the
deployment configuration since kernel does not support current device"): FlashInfer's
TRT-LLM-gen experts accept the 10.x family only, so on an RTX 50, a GB10 or an H100 they are
refused. A package check in the test (``has_flashinfer_trtllm_fused_moe()``) is not the
device's question and counts as passed; a test the table could not read leaves it open.
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = ("release.moe_backend.refused_on_gpu", "release.moe_backend.devices")
_FP8_SCHEMES = {"fp8", "fp8-dynamic", "w8a8-fp8"}


def collect_release_moe_backend(facts: Facts) -> None:
    from vllm_doctor import knowledge

    choice = facts.value("serve.moe_backend")
    if choice is None:
        reason = facts.why_missing("serve.moe_backend")
        for path in PATHS:
            if reason:
                facts.mark_missing(path, reason)
        return
    if str(choice) == "auto":
        return
    if facts.value("gpu.capabilities") is None:
        reason = facts.why_missing("gpu.capabilities")
        if reason:
            for path in PATHS:
                facts.mark_missing(path, f"gpu.capabilities: {reason}")
        return  # absent: no NVIDIA GPU (not judged here)
    release = facts.value("release.judged")
    if release is None:
        for path in PATHS:
            facts.mark_missing(path, facts.why_missing("release.judged") or "no release judged")
        return
    quant, why = _quant(facts)
    if quant is None:
        for path in PATHS:
            facts.mark_missing(path, why)
        return
    table = knowledge.load("moe_backends")
    if str(release) not in table.releases:
        for path in PATHS:
            facts.mark_missing(path, f"the MoE oracles of vLLM {release} were not read")
        return
    entry: dict[str, Any] | None = table.at(str(release)).get(f"{quant}:{choice}")
    if entry is None:
        for path in PATHS:
            facts.mark_missing(
                path,
                f"vLLM {release}'s {quant} MoE oracle maps no --moe-backend {choice} "
                f"({why}) that the table read",
            )
        return
    capabilities = [int(c) for c in facts.value("gpu.capabilities")]
    verdicts = {
        name: _all_gpus(program, capabilities) for name, program in entry["classes"].items()
    }
    devices = "; ".join(
        f"{name}: {_describe(program)}" for name, program in entry["classes"].items()
    )
    detail = (
        f"vLLM {release} fused_moe/oracle/{quant}.py: --moe-backend {choice} -> "
        f"{entry['backend']} ({why}); {devices}"
    )
    facts.set(PATHS[1], devices, SOURCE, detail)
    if any(v is True for v in verdicts.values()):
        facts.set(PATHS[0], False, SOURCE, detail)
    elif not all(v is False for v in verdicts.values()):
        facts.mark_missing(PATHS[0], f"a device test the table could not read decides: {detail}")
    elif facts.value("model.num_experts"):
        facts.set(
            PATHS[0],
            True,
            SOURCE,
            f"{detail}; an MoE model ({facts.value('model.num_experts')} experts)",
        )
    elif facts.why_missing("model.num_experts"):
        # the backend refuses the GPU; whether the model has MoE layers that ask for it decides
        facts.mark_missing(
            PATHS[0], f"model.num_experts: {facts.why_missing('model.num_experts')} ({detail})"
        )
    else:
        facts.set(PATHS[0], False, SOURCE, f"{detail}; a dense model: no MoE layer asks for it")


def _quant(facts: Facts) -> tuple[str | None, str]:
    """The oracle that picks this model's MoE kernels, or why it is not known."""
    method = facts.value("serve.quantization") or facts.value("model.quant_method")
    scheme = str(facts.value("model.quant_scheme") or "").lower()
    if method is None:
        for path in ("serve.quantization", "model.quant_method"):
            reason = facts.why_missing(path)
            if reason and not scheme:
                return None, f"the model's quantization is not known: {reason}"
    if str(method or "").lower() == "fp8" or scheme in _FP8_SCHEMES:
        return "fp8", f"an FP8 model ({method or scheme})"
    if scheme == "nvfp4":
        return "nvfp4", f"an NVFP4 model ({method or scheme})"
    if scheme == "mxfp4" or str(method or "").lower() == "mxfp4":
        return "mxfp4", f"an MXFP4 model ({method or scheme})"
    if method is None and not scheme:
        return "unquantized", "an unquantized model"
    return None, f"a {method or scheme} model: its MoE oracle is not judged here"


def _all_gpus(program: list[Any], capabilities: list[int]) -> bool | None:
    answers = {_eval(program, c) for c in capabilities}
    if answers == {True}:
        return True
    if False in answers:
        return False
    return None


def _eval(program: list[Any], capability: int) -> bool | None:
    """Three-valued: None where the table could not read the test."""
    op, *args = program
    if op == "cuda" or op == "package":
        return True
    if op == "false":
        return False
    if op == "family":
        return capability // 10 == int(args[0]) // 10
    if op == "exact":
        return capability == int(args[0])
    if op == "at_least":
        return capability >= int(args[0])
    if op == "not":
        inner = _eval(args[0], capability)
        return None if inner is None else not inner
    if op in ("and", "or"):
        values = [_eval(a, capability) for a in args]
        if op == "and":
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    return None


def _describe(program: list[Any]) -> str:
    op, *args = program
    if op == "family":
        return f"the {int(args[0]) // 10}.x family"
    if op == "exact":
        return f"compute capability {int(args[0]) // 10}.{int(args[0]) % 10}"
    if op == "at_least":
        return f"compute capability {int(args[0]) // 10}.{int(args[0]) % 10}+"
    if op == "cuda":
        return "any NVIDIA GPU"
    if op == "false":
        return "no NVIDIA GPU"
    if op == "package":
        return f"{args[0]}()"
    if op == "not":
        return f"not ({_describe(args[0])})"
    if op in ("and", "or"):
        return f" {op} ".join(_describe(a) for a in args if a[0] != "cuda") or "any NVIDIA GPU"
    return f"unread ({args[0] if args else op})"
