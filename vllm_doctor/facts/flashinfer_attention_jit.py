"""Whether vLLM's start-up JIT-compiles FlashInfer's attention modules
(``release.flashinfer_attention_jit``).

The attention backend vLLM runs is the one forced (``--attention-backend``,
``attention_config.backend``, ``VLLM_ATTENTION_BACKEND``: serve.attention_backend) or else the
first of the release's priority list for the GPU that accepts the model, every earlier one
refusing it (release.attention.candidates / .supporting / .rejections, read from the
release's own backends). Which backends call FlashInfer is generated, not listed here: the
FlashInfer names the backend's file uses in that release (``data/companion_uses.json``) and the
JIT modules each name loads in the installed flashinfer-python (``jit:`` keys of
``stack/flashinfer-python.json``, tools/flashinfer_aot.py). flashinfer-python and
flashinfer-cubin ship no compiled JIT module (the cubins are the TensorRT-LLM kernels, whose
launchers are JIT modules too), so without flashinfer-jit-cache every one of them is built with
nvcc on the first plan/run — during start-up's warm-up and CUDA-graph capture. With
flashinfer-jit-cache the AOT build prebuilds the attention modules for a grid of head sizes and
dtypes that is not evaluated here: whether the model's are among them is not decided.

Issues: flashinfer-ai/flashinfer 2252 (DGX Spark, FLASHINFER decode plan building
``batch_prefill`` at start-up), vllm-project/vllm 36077 (the same build in a conda env).
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATH = "release.flashinfer_attention_jit"
MODULES = "release.flashinfer_attention_modules"
OTHERS = "release.flashinfer_attention_alternatives"
PATHS = (PATH, MODULES, OTHERS)


def _missing(facts: Facts, reason: str) -> None:
    for path in PATHS:
        facts.mark_missing(path, reason)


def _chosen(facts: Facts) -> tuple[str | None, str]:
    """The backend vLLM runs and how that is known; (None, why) when not decided."""
    forced = facts.value("serve.attention_backend")
    if forced:
        how = facts.value("serve.attention_backend_source") or "the serve line"
        return str(forced).upper().removesuffix("_VLLM_V1"), f"forced by {how}"
    absent = facts.why_missing("serve.attention_backend")
    if absent:  # no serve line: whether a backend is forced is not known
        return None, f"serve.attention_backend: {absent}"
    candidates = facts.value("release.attention.candidates")
    supporting = facts.value("release.attention.supporting")
    if candidates is None or supporting is None:
        why = facts.why_missing("release.attention.supporting") or "not known"
        return None, f"release.attention.supporting: {why}"
    refused = {str(r).split(" ", 1)[0] for r in facts.value("release.attention.rejections") or ()}
    for name in candidates:
        if name in supporting:
            return name, "the release's first backend for this GPU that accepts the model"
        if name not in refused:
            return None, f"whether {name}, ahead in the release's priority list, accepts the model"
    return None, "no candidate backend accepts the model"


def _flashinfer_names(release: str, file: str) -> list[str]:
    """The FlashInfer names the release's ``file`` uses (companion_uses)."""
    from vllm_doctor import knowledge

    try:
        uses = knowledge.load("companion_uses").at(release)
    except knowledge.KnowledgeError:
        return []
    return sorted(
        key
        for key, use in uses.items()
        if isinstance(use, dict)
        and use.get("package") == "flashinfer-python"
        and any(str(f).endswith(file) for f in use.get("files") or ())
    )


def _modules(version: str, names: list[str]) -> tuple[list[str] | None, str]:
    """The JIT modules ``names`` load in flashinfer-python ``version`` (generator names
    without ``gen_`` and ``_module``); None and why when that version was not read."""
    from vllm_doctor.knowledge.stack import covered_version

    table, covered = covered_version("flashinfer-python", version)
    if table is None:
        return None, covered
    values: dict[str, Any] = table.at(covered)
    found: set[str] = set()
    for name in names:
        entry = values.get(f"jit:{name}")
        if isinstance(entry, dict):
            found.update(m.removeprefix("gen_").removesuffix("_module") for m in entry["modules"])
    return sorted(found), covered


def collect_flashinfer_attention_jit(facts: Facts) -> None:
    from vllm_doctor.facts.release_stack import _installed, _judged

    release, why = _judged(facts)
    if release is None:
        _missing(facts, why)
        return
    backend, how = _chosen(facts)
    if backend is None:
        _missing(facts, how)
        return
    from vllm_doctor import knowledge

    record = knowledge.load("attention").at(release).get(f"backend:{backend}")
    if not isinstance(record, dict) or not record.get("file"):
        _missing(facts, f"{backend} is not an attention backend vLLM {release} knows")
        return
    file = str(record["file"])
    names = _flashinfer_names(release, file)
    said = f"attention backend {backend} ({how}; vLLM {release} {file})"
    if not names:
        facts.set(PATH, False, SOURCE, f"{said} calls no FlashInfer entry point")
        return
    python, unknown = _installed(facts, "flashinfer-python", inferred=False)
    if python is None:
        if unknown:
            _missing(facts, f"flashinfer-python: {unknown}")
        else:
            facts.set(PATH, False, SOURCE, f"{said}; flashinfer-python is not installed")
        return
    modules, covered = _modules(python, names)
    if modules is None:
        _missing(facts, f"flashinfer-python {python}: {covered}")
        return
    if not modules:
        facts.set(
            PATH, False, SOURCE, f"{said}: its FlashInfer names load no JIT module in {covered}"
        )
        return
    supporting = facts.value("release.attention.supporting") or []
    others = [b for b in supporting if b != backend and not _names_flashinfer(release, b)]
    facts.set(MODULES, modules, SOURCE, f"{said}: flashinfer-python {covered}'s JIT modules")
    facts.set(
        OTHERS,
        ", ".join(others) or "none known for this GPU and model",
        SOURCE,
        "the release's backends that accept the model here and call no FlashInfer",
    )
    cache, unknown = _installed(facts, "flashinfer-jit-cache", inferred=False)
    if cache is not None:
        facts.mark_missing(
            PATH,
            f"flashinfer-jit-cache {cache} prebuilds FlashInfer's attention modules for the "
            "head sizes and dtypes of its ahead-of-time grid; whether this model's are among "
            "them is not read",
        )
    elif unknown:
        facts.mark_missing(PATH, f"flashinfer-jit-cache: {unknown}")
    else:
        facts.set(
            PATH,
            True,
            SOURCE,
            f"{said}; flashinfer-python {python} without flashinfer-jit-cache: the modules "
            f"its calls load (among {', '.join(modules)}: which ones, the GPU and the model "
            "decide) are built with nvcc at start-up",
        )


def _names_flashinfer(release: str, backend: str) -> bool:
    from vllm_doctor import knowledge

    record = knowledge.load("attention").at(release).get(f"backend:{backend}")
    if not isinstance(record, dict) or not record.get("file"):
        return True  # not known: not offered as the way around FlashInfer
    return bool(_flashinfer_names(release, str(record["file"])))
