"""A KServe InferenceService with the ServingRuntime it runs on, as KServe joins them.

An InferenceService's ``predictor.model`` names a runtime (``runtime:``, or a model format
that a runtime selects automatically); KServe runs the runtime's container with the model's
``args`` after the runtime's, the model's ``env`` after the runtime's and the model's
``resources`` in place of the runtime's, ``{{.Name}}`` replaced by the service's name. When
the runtime is in the same input (one file, ``helm template`` or ``kustomize build`` output),
the pair is one target; the runtime alone is then not checked on its own (it is read alone,
its line left open to the args an InferenceService adds, only when no service names it).
Read from a directory (``--manifest DIR``), the two may be in different files: the joined pod
keeps the file of each part (``LineDict.file``/``files``), so the runtime's args are shown at
the runtime's file and line, the service's resources at the service's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.serveline.target import _file
from vllm_doctor.yaml_io import LineDict, LineList, mapping_at

RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")


def _name(obj: dict) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("name")) if isinstance(metadata, dict) else "?"


def _formats(runtime: dict) -> list[str]:
    spec = mapping_at(runtime, "spec")
    return [
        str(f.get("name")).lower()
        for f in spec.get("supportedModelFormats") or ()
        if isinstance(f, dict) and f.get("autoSelect")
    ]


def runtime_for(model: dict, runtimes: list[dict]) -> dict | None:
    """The runtime ``model`` runs on among ``runtimes``: the one it names, else the one that
    selects its model format automatically (KServe's choice when exactly one does)."""
    if model.get("runtime"):
        return next((r for r in runtimes if _name(r) == str(model["runtime"])), None)
    fmt = model.get("modelFormat")
    wanted = str(fmt.get("name")).lower() if isinstance(fmt, dict) else None
    matches = [r for r in runtimes if wanted and wanted in _formats(r)]
    return matches[0] if len(matches) == 1 else None


@dataclass
class Joined:
    """An InferenceService's predictor as KServe runs it on its runtime."""

    label: str  # "InferenceService/NAME predictor (ServingRuntime/RUNTIME)"
    pod: dict  # the runtime's pod spec, its first container joined with the model
    line: int  # the service's ``predictor.model``: where the target is
    # where the joined command's words are: (file or None, first line) of the runtime's
    # command and of the model's args
    word_starts: list[tuple[str | None, int]] = field(default_factory=list)


def _with_lines(like: Any, value: Any) -> Any:
    """``value`` as a mapping or list that keeps ``like``'s lines (and file) where it has them."""
    if isinstance(value, dict):
        out = LineDict(value)
        out.line = getattr(like, "line", getattr(value, "line", 0))
        out.lines = {**getattr(value, "lines", {}), **getattr(like, "lines", {})}
        out.file = getattr(like, "file", None)
        out.files = dict(getattr(like, "files", None) or {})
        return out
    return value


def _concat(first: Any, second: Any) -> Any:
    items = list(first or []) + list(second or [])
    out = LineList(items)
    out.line = getattr(first, "line", 0) or getattr(second, "line", 0)
    out.lines = list(getattr(first, "lines", [0] * len(first or []))) + list(
        getattr(second, "lines", [0] * len(second or []))
    )
    out.files = [_file(first, i) for i in range(len(first or []))] + [
        _file(second, i) for i in range(len(second or []))
    ]
    return out


def joined_pod(service: dict, runtime: dict) -> dict:
    """The runtime's pod spec with its first container joined with the service's model."""
    name = _name(service)
    model = service["spec"]["predictor"]["model"]
    pod = _with_lines(runtime.get("spec"), dict(runtime.get("spec") or {}))
    containers = list(pod.get("containers") or [])
    main = _with_lines(containers[0], dict(containers[0]))
    args = _concat(main.get("args"), model.get("args"))
    for i, word in enumerate(args):
        if isinstance(word, str):
            args[i] = word.replace("{{.Name}}", name)
    main["args"] = args
    if model.get("env"):
        main["env"] = _concat(main.get("env"), model["env"])
    if isinstance(model.get("resources"), dict):
        main["resources"] = model["resources"]
    if model.get("image"):
        main["image"] = model["image"]
        main.lines["image"] = getattr(model, "lines", {}).get("image", 0)
        main.files["image"] = _file(model, "image")
    pod["containers"] = [main, *containers[1:]]
    predictor = service["spec"]["predictor"]
    for key in ("nodeSelector", "affinity", "volumes", "hostIPC"):
        if key in predictor:
            pod[key] = predictor[key]
            pod.lines[key] = getattr(predictor, "lines", {}).get(key, 0)
            pod.files[key] = _file(predictor, key)
    return pod


def _word_starts(runtime_container: dict, model: dict) -> list[tuple[str | None, int]]:
    lines = getattr(runtime_container, "lines", {})
    own = [lines.get(k, 0) for k in ("command", "args") if k in runtime_container]
    starts = [(_file(runtime_container), min(own or [getattr(runtime_container, "line", 0)]))]
    if model.get("args"):
        starts.append((_file(model, "args"), getattr(model, "lines", {}).get("args", 0)))
    return starts


def join(objects: list[dict]) -> tuple[dict[int, Joined], set[int], list[str]]:
    """For each InferenceService whose runtime is among ``objects`` (of one file, or of every
    file of a directory): id -> its ``Joined`` pod; the ids of the runtimes so used; what
    could not be joined, in words."""
    runtimes = [o for o in objects if str(o.get("kind")) in RUNTIME_KINDS]
    pods: dict[int, Joined] = {}
    used: set[int] = set()
    unjoined: list[str] = []
    for service in objects:
        if str(service.get("kind")) != "InferenceService":
            continue
        spec = service.get("spec")
        predictor = spec.get("predictor") if isinstance(spec, dict) else None
        model = predictor.get("model") if isinstance(predictor, dict) else None
        if not isinstance(model, dict):
            continue
        runtime = runtime_for(model, runtimes)
        containers = (runtime or {}).get("spec", {}).get("containers") if runtime else None
        if runtime is None or not containers or not isinstance(containers[0], dict):
            wanted = model.get("runtime") or f"a runtime for {model.get('modelFormat')}"
            unjoined.append(
                f"InferenceService/{_name(service)}: its runtime ({wanted}) is not in the input; "
                "give both (`--manifest DIR` with both files, or "
                "`cat runtime.yaml isvc.yaml | vllm-doctor check --manifest -`)"
            )
            continue
        label = f"InferenceService/{_name(service)} predictor ({runtime['kind']}/{_name(runtime)})"
        pods[id(service)] = Joined(
            label,
            joined_pod(service, runtime),
            getattr(predictor, "lines", {}).get("model", 0),
            _word_starts(containers[0], model),
        )
        used.add(id(runtime))
    return pods, used, unjoined
