"""What the judged release makes of the model: whether it registers the architecture (and its
Transformers fallback), the class it would load (LoRA, the modalities its processor takes,
pooling), the speculative method and the target model it accepts, and the dtype it computes in
for this serve line. Each fact is the judged release's (facts/release.py judges it; the
tables are knowledge/data/registry.json and speculative.json)."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_options import SOURCE, _given_words


def _registry(facts: Facts, release: str) -> None:
    from vllm_doctor import knowledge

    archs = facts.value("model.architectures")
    if not archs:
        reason = "model.architectures is not known: " + (
            facts.why_missing("model.architectures") or "config.json has none"
        )
        for path in (
            "release.architecture_registered",
            "release.unregistered_architectures",
            "release.architecture_first_release",
            "release.transformers_fallback",
        ):
            facts.mark_missing(path, reason)
        return
    table = knowledge.load("registry")
    info = table.get("@release", release)
    suffixes = list((info.value if info else {}).get("convert_suffixes", ()))

    def known(arch: str) -> bool:
        if table.get(arch, release) is not None:
            return True
        # XForSequenceClassification served by a registered XForCausalLM through an adapter
        for suffix in suffixes:
            if arch.endswith(suffix):
                base = arch[: -len(suffix)]
                return any(table.get(base + other, release) is not None for other in suffixes)
        return False

    registered = [a for a in archs if known(a)]
    facts.set(
        "release.architecture_registered",
        bool(registered),
        SOURCE,
        f"model_executor/models/registry.py of vLLM {release}",
    )
    facts.set(
        "release.unregistered_architectures",
        [a for a in archs if a not in registered],
        SOURCE,
        f"vLLM {release}",
    )
    firsts = [first for a in archs if (first := table.first_release(a))]
    if firsts:
        first = min(firsts, key=Version)
        facts.set(
            "release.architecture_first_release",
            first,
            SOURCE,
            "first covered release that registers one of the architectures",
        )
    fallback = bool(info and info.value.get("transformers_fallback"))
    impl = None
    line, _ = _given_words(facts)
    if line is not None:
        impl = line.options.get("model-impl")
    detail = f"vLLM {release} " + (
        "tries its Transformers backend for an unregistered architecture"
        if fallback
        else "has no Transformers fallback"
    )
    if impl is not None and str(impl) == "vllm":
        fallback = False
        detail = "--model-impl vllm turns the Transformers fallback off"
    facts.set("release.transformers_fallback", fallback, SOURCE, detail)


def _loaded_class(facts: Facts, release: str) -> tuple[str, dict[str, Any]] | str:
    """(architecture, registry entry) of the class the judged release would load — the first
    of ``model.architectures`` its registry has — or why it is not known."""
    archs = facts.value("model.architectures")
    if not archs:
        return "model.architectures is not known: " + (
            facts.why_missing("model.architectures") or "config.json has none"
        )
    line, _ = _given_words(facts)
    impl = line.options.get("model-impl") if line is not None else None
    if impl is not None and str(impl) not in ("auto", "vllm"):
        return f"--model-impl {impl}: the class vLLM loads is not the registry's"
    from vllm_doctor import knowledge

    table = knowledge.load("registry")
    found = next(((a, span) for a in archs if (span := table.get(a, release)) is not None), None)
    if found is None:
        return (
            f"vLLM {release} registers none of {', '.join(archs)} (MODEL100/MODEL101 speak "
            "about that)"
        )
    arch, span = found
    return arch, span.value


_CLASS_PATHS = (
    "release.lora_architecture",
    "release.lora_supported",
    "release.model_modalities",
    "release.pooling_model",
)


def _lora(facts: Facts, release: str) -> None:
    """The architecture the judged release would load: whether it implements LoRA, the
    modalities its processor takes, whether ``--runner auto`` makes it a pooling model."""
    loaded = _loaded_class(facts, release)
    if isinstance(loaded, str):
        for path in _CLASS_PATHS:
            facts.mark_missing(path, loaded)
        return
    arch, entry = loaded
    where = f"{entry['class']} in model_executor/models/{entry['module']}.py of vLLM {release}"
    facts.set(
        "release.lora_architecture",
        arch,
        SOURCE,
        f"first of model.architectures registered in vLLM {release}",
    )
    unfollowed = f"{where} could not be followed statically in the release source"
    if entry.get("lora") is None:
        facts.mark_missing("release.lora_supported", unfollowed)
    else:
        facts.set(
            "release.lora_supported",
            bool(entry["lora"]),
            SOURCE,
            where + (" implements" if entry["lora"] else " does not implement") + " SupportsLoRA",
        )
    if not entry.get("multimodal"):
        facts.set("release.model_modalities", [], SOURCE, f"{where}: not multimodal")
    elif entry.get("modalities") is None:
        facts.mark_missing(
            "release.model_modalities",
            f"{where}: its processing info's get_supported_mm_limits could not be read statically",
        )
    else:
        facts.set(
            "release.model_modalities",
            entry["modalities"],
            SOURCE,
            f"{where}: get_supported_mm_limits of its processing info",
        )
    if entry.get("pooling") is None:
        facts.mark_missing("release.pooling_model", unfollowed)
    else:
        facts.set(
            "release.pooling_model",
            bool(entry["pooling"]),
            SOURCE,
            where
            + (" is" if entry["pooling"] else " is not")
            + " a pooling model (VllmModelForPooling):"
            " --runner auto "
            + (
                "serves it as pooling"
                if entry["pooling"]
                else "generates unless the architecture's suffix converts it"
            ),
        )


_SPEC_PATHS = ("release.unknown_spec_methods", "release.spec_target_refused")


def _speculative(facts: Facts, release: str) -> None:
    """``release.unknown_spec_methods`` and ``release.spec_target_refused`` (knowledge table
    ``speculative``), for the ``speculative_config.method`` on the serve line."""
    method = facts.value("serve.speculative_method")
    if not isinstance(method, str):
        reason = facts.why_missing("serve.speculative_method")
        for path in _SPEC_PATHS:
            if reason:
                facts.mark_missing(path, "serve.speculative_method is not known: " + reason)
            else:  # no method given (none, or detected from the draft model): nothing refused
                facts.set(path, [], SOURCE, "no speculative_config.method on the serve line")
        return
    from vllm_doctor import knowledge

    table = knowledge.load("speculative")
    entries = table.at(release)
    info = entries.get("@release", {})
    methods = sorted(k.split(":", 1)[1] for k in entries if k.startswith("method:"))
    if not info.get("validated") or not methods:
        facts.mark_missing(
            "release.unknown_spec_methods",
            f"vLLM {release} does not validate "
            "speculative_config.method against a list (no pydantic Literal)",
        )
    elif method in methods:
        facts.set(
            "release.unknown_spec_methods",
            [],
            SOURCE,
            f"SpeculativeMethod of vLLM {release} ({info['file']})",
        )
    else:
        first = table.first_release(f"method:{method}")
        facts.set(
            "release.unknown_spec_methods",
            [
                f"speculative_config.method '{method}': vLLM {release} refuses it (SpeculativeMethod "
                f"in {info['file']}); it accepts: {', '.join(methods)}; "
                + (
                    f"first release with '{method}': {first}"
                    if first
                    else f"no release {table.releases[0]}–{table.newest} has '{method}'"
                )
            ],
            SOURCE,
            f"SpeculativeMethod of vLLM {release} ({info['file']})",
        )
    check = entries.get(f"target:{method}")
    if check is None:
        if f"target:{method}" in table:
            facts.mark_missing(
                "release.spec_target_refused",
                f"vLLM {release} does not check the "
                f"target of '{method}' in its config (it checks the model class "
                "when loading, which the knowledge does not carry)",
            )
        else:
            facts.set(
                "release.spec_target_refused",
                [],
                SOURCE,
                f"vLLM {release} checks no target model for '{method}'",
            )
        return
    model_type = _text_model_type(facts)
    if model_type is None:
        facts.mark_missing(
            "release.spec_target_refused",
            "the model's text model_type is not "
            "known: "
            + (facts.why_missing("model.model_type") or "its nested text config has none"),
        )
        return
    accepted = [m for m in check["model_types"] if m in model_type]
    facts.set(
        "release.spec_target_refused",
        []
        if accepted
        else [
            f"speculative_config.method '{method}' on a {model_type} model: vLLM {release} accepts "
            f"only targets whose hf_text_config.model_type contains one of "
            f"{', '.join(check['model_types'])} ({check['function']} in {check['file']})"
        ],
        SOURCE,
        f"the target check of vLLM {release}",
    )


def _text_model_type(facts: Facts) -> str | None:
    """The model_type vLLM's ``hf_text_config`` has: the nested text config's, else the
    top-level one's (None: not known)."""
    nested = facts.get("model.text_model_type")
    if nested is not None:
        return str(nested.value) if nested.value else None
    if "model.text_model_type" in facts.missing:
        return None
    value = facts.value("model.model_type")
    return str(value) if value else None


# How `--dtype auto` resolves, by release (config.py / config/model.py, platforms/cuda.py):
# * before 0.9.0: the checkpoint's dtype as it is (float32 → float16; Gemma 2/3 → bfloat16),
#   and the worker refuses bfloat16 below capability 8.0 (_check_if_gpu_supports_dtype);
# * 0.9.0 (PR 17265): float32 → float16 (PLaMo2 → bfloat16), then a dtype the platform lacks
#   (CudaPlatform.supported_dtypes: bfloat16 from 8.0) falls back to its first supported one;
# * 0.9.1 on (_resolve_auto_dtype): the platform's supported dtypes the model allows (no
#   float16 for _FLOAT16_NOT_SUPPORTED_MODELS); float32 → the first of them; the checkpoint's
#   dtype if supported, else the first.
_FALLBACK_FROM, _RESOLVE_FROM = Version("0.9.0"), Version("0.9.1")
_NO_FLOAT16 = ("gemma2", "gemma3", "gemma3_text", "plamo2", "glm4")
# a --dtype or config.json dtype as written -> the torch dtype it names (also read by
# facts/release_kernels.py)
DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float": "float32",
    "float32": "float32",
    "fp32": "float32",
}


def _supported_dtypes(capability: int, model_type: str) -> list[str]:
    dtypes = (
        ["bfloat16", "float16", "float32"]
        if capability >= 80
        else ["float16", "float32"]
        if capability >= 60
        else ["float32"]
    )
    return [d for d in dtypes if not (d == "float16" and model_type in _NO_FLOAT16)]


def _effective_dtype(facts: Facts, release: str) -> None:
    """release.effective_dtype: the dtype vLLM ``release`` computes in for this serve line."""
    path = "release.effective_dtype"
    ours = Version(release)
    facts.set(
        "release.auto_dtype_fallback",
        ours >= _FALLBACK_FROM,
        SOURCE,
        f"vLLM {release}: --dtype auto "
        + (
            "falls back from a dtype the GPU lacks (PR 17265, 0.9.0)"
            if ours >= _FALLBACK_FROM
            else "keeps the checkpoint's dtype"
        ),
    )
    given = str(facts.value("serve.dtype") or "auto").lower()
    if given != "auto":
        if given in DTYPE_NAMES:
            facts.set(path, DTYPE_NAMES[given], SOURCE, f"--dtype {given}")
        return
    checkpoint = facts.value("model.dtype")
    config = DTYPE_NAMES.get(str(checkpoint).lower()) if checkpoint is not None else None
    if config is None:
        facts.mark_missing(
            path,
            "--dtype auto takes the checkpoint's dtype: "
            + (facts.why_missing("model.dtype") or f"model.dtype {checkpoint!r} is not known"),
        )
        return
    model_type = str(facts.value("model.text_model_type") or facts.value("model.model_type") or "")
    if ours < _FALLBACK_FROM:
        gemma = model_type in ("gemma2", "gemma3", "gemma3_text")
        value = ("bfloat16" if gemma else "float16") if config == "float32" else config
        facts.set(
            path,
            value,
            SOURCE,
            f"--dtype auto in vLLM {release}: the checkpoint's {checkpoint}, whatever the GPU",
        )
        return
    capability = facts.value("gpu.min_capability")
    if capability is None:
        facts.mark_missing(
            path,
            f"--dtype auto in vLLM {release} depends on the GPU: "
            + (facts.why_missing("gpu.min_capability") or "gpu.min_capability is not known"),
        )
        return
    if ours < _RESOLVE_FROM:
        supported = _supported_dtypes(int(capability), "")
        wanted = (
            "bfloat16" if model_type == "plamo2" else ("float16" if config == "float32" else config)
        )
    else:
        supported = _supported_dtypes(int(capability), model_type)
        wanted = supported[0] if config == "float32" else config
    value = wanted if wanted in supported else supported[0]
    facts.set(
        path,
        value,
        SOURCE,
        f"--dtype auto in vLLM {release}: checkpoint {checkpoint} "
        f"on compute capability {capability} (supported: {', '.join(supported)})",
    )
