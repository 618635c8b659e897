"""A KServe InferenceService with the ServingRuntime it runs on, as KServe joins them.

An InferenceService's ``predictor.model`` names a runtime (``runtime:``, or a model format
that a runtime selects automatically); KServe runs the runtime's container with the model's
``args`` after the runtime's, the model's ``env`` after the runtime's and the model's
``resources`` in place of the runtime's, ``{{.Name}}`` replaced by the service's name. When
the runtime is in the same input (one file, ``helm template`` or ``kustomize build`` output),
the pair is one target; the runtime alone is then not checked on its own (it is read alone,
its line left open to the args an InferenceService adds, only when no service names it).
"""

from __future__ import annotations

from typing import Any

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


def _with_lines(like: Any, value: Any) -> Any:
    """``value`` as a mapping or list that keeps ``like``'s lines where it has them."""
    if isinstance(value, dict):
        out = LineDict(value)
        out.line = getattr(like, "line", getattr(value, "line", 0))
        out.lines = {**getattr(value, "lines", {}), **getattr(like, "lines", {})}
        return out
    return value


def _concat(first: Any, second: Any) -> Any:
    items = list(first or []) + list(second or [])
    out = LineList(items)
    out.line = getattr(first, "line", 0) or getattr(second, "line", 0)
    out.lines = list(getattr(first, "lines", [0] * len(first or []))) + list(
        getattr(second, "lines", [0] * len(second or []))
    )
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
    pod["containers"] = [main, *containers[1:]]
    predictor = service["spec"]["predictor"]
    for key in ("nodeSelector", "affinity", "volumes", "hostIPC"):
        if key in predictor:
            pod[key] = predictor[key]
            pod.lines[key] = getattr(predictor, "lines", {}).get(key, 0)
    return pod


def join(objects: list[dict]) -> tuple[dict[int, tuple[str, dict]], set[int], list[str]]:
    """For each InferenceService whose runtime is among ``objects``: id -> (label, pod spec);
    the ids of the runtimes so used; what could not be joined, in words."""
    runtimes = [o for o in objects if str(o.get("kind")) in RUNTIME_KINDS]
    pods: dict[int, tuple[str, dict]] = {}
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
                "give both (`cat runtime.yaml isvc.yaml | vllm-doctor check --manifest -`)"
            )
            continue
        label = f"InferenceService/{_name(service)} predictor ({runtime['kind']}/{_name(runtime)})"
        pods[id(service)] = (label, joined_pod(service, runtime))
        used.add(id(runtime))
    return pods, used, unjoined
