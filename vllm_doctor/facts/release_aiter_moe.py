"""Whether the judged release refuses an explicit AITER MoE request on this GPU
(``release.aiter_moe_refused``).

The knowledge table ``aiter_moe_request`` (tools/extractors/aiter_moe_request.py, from the MoE
oracles) says which quantizations' oracles answer ``VLLM_ROCM_USE_AITER`` /
``VLLM_ROCM_USE_AITER_MOE`` set on by taking AITER's experts or raising ``ValueError: FP8 MoE
backend AITER does not support the deployment configuration``. AITER's experts are usable where
``rocm_aiter_ops.is_fused_moe_enabled()`` holds (``release.aiter.fused_moe``, table
``aiter_gates``): not on a GPU AITER does not support (gfx1151, gfx1201).

Fact written, on an AMD GPU serving an MoE model:
  ``release.aiter_moe_refused``  true: the engine stops at start-up; false: AITER's experts
                                 are taken, the request is not made, or the release falls back
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATH = "release.aiter_moe_refused"
# the schemes of model.quant_scheme whose MoE layers the FP8 oracle picks kernels for
_FP8_SCHEMES = {"fp8", "fp8-dynamic", "w8a8-fp8"}


def amd_moe_known(facts: Facts, path: str) -> bool:
    """Whether the GPU's gfx target and the model's experts are known, as the AITER MoE facts
    need; where one is missing, ``path`` is missing for that fact's own reason (so a report
    gives it once for every fact it holds up), and absent on an NVIDIA GPU or a dense model."""
    for needed in ("gpu.gfx_targets", "model.num_experts"):
        if facts.value(needed) is None:
            reason = facts.why_missing(needed)
            if reason:
                facts.mark_missing(path, reason)
            return False
    return True


def collect_release_aiter_moe(facts: Facts) -> None:
    from vllm_doctor import knowledge

    if not amd_moe_known(facts, PATH):
        return
    targets = facts.value("gpu.gfx_targets")
    release = facts.value("release.judged")
    if release is None:
        facts.mark_missing(PATH, facts.why_missing("release.judged") or "no release is judged")
        return
    kind, why = _oracle(facts)
    if kind is None:
        facts.mark_missing(PATH, why)
        return
    entry: dict[str, Any] | None = knowledge.load("aiter_moe_request").at(str(release)).get(kind)
    where = f"vLLM {release} fused_moe/oracle/{kind}.py"
    if entry is None:
        facts.set(PATH, False, SOURCE, f"{where} takes no explicit AITER request ({why})")
        return
    decided = _request(facts, entry)
    if isinstance(decided, str):
        facts.mark_missing(PATH, decided)
        return
    if decided is not None:
        facts.set(PATH, False, SOURCE, f"{where}: {decided[1]}")
        return
    fused_moe = facts.value("release.aiter.fused_moe")
    if fused_moe is None:
        facts.mark_missing(
            PATH, f"release.aiter.fused_moe: {facts.why_missing('release.aiter.fused_moe')}"
        )
        return
    if fused_moe:
        facts.set(PATH, False, SOURCE, f"{where}: AITER's experts run on {'/'.join(targets)}")
        return
    facts.set(
        PATH,
        bool(entry["raises"]),
        SOURCE,
        f"{where}: {' and '.join(entry['switches'])} on ({why}) take the AITER backend, and "
        f"rocm_aiter_ops.is_fused_moe_enabled() is off on {'/'.join(targets)}: "
        + (
            f"'{entry['label']} AITER does not support the deployment configuration'"
            if entry["raises"]
            else "the release falls back to the other MoE backends"
        ),
    )


def _oracle(facts: Facts) -> tuple[str | None, str]:
    """The oracle that picks this model's MoE kernels (fp8 / unquantized), or why not known."""
    method = facts.value("serve.quantization") or facts.value("model.quant_method")
    if method is None:
        for path in ("serve.quantization", "model.quant_method"):
            reason = facts.why_missing(path)
            if reason:
                return None, f"the model's quantization is not known: {reason}"
        return "unquantized", "an unquantized model"
    scheme = facts.value("model.quant_scheme")
    if str(method).lower() == "fp8" or str(scheme or "").lower() in _FP8_SCHEMES:
        return "fp8", f"an FP8 model ({method})"
    return "other", f"a {method} model"


def _request(facts: Facts, entry: dict[str, Any]) -> str | tuple[bool, str] | None:
    """None: the release takes the AITER backend; (False, why): the request is not made or is
    turned down; a string: why that is not known."""
    for name in entry["switches"]:
        path = f"release.env.{name}"
        value = facts.value(path)
        if value is None:
            reason = facts.why_missing(path)
            if reason:
                return f"{path}: {reason}"
            return False, f"{name} is not set"
        if not value:
            return False, f"{name} is off"
    for feature in entry.get("skipped_when") or []:
        path = f"release.aiter.{feature}"
        value = facts.value(path)
        if value is None and facts.why_missing(path):
            return f"{path}: {facts.why_missing(path)}"
        if value:
            return False, f"rocm_aiter_ops.is_{feature}_enabled() turns the request down"
    return None
