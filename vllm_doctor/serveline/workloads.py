"""Where each kind of Kubernetes object keeps the pods that run vLLM: a table, not code.

``POD_TEMPLATES`` maps a kind to the paths of its pod specs (``roles[]`` walks a list, each
item named by its ``name``/``groupName``); the reader in ``manifest`` makes a target of every
container there. Objects that wrap others (``List`` items, an OpenShift ``Template``'s
``objects``) are opened first. KServe's ``LLMInferenceService`` runs the serve line of
KServe's well-known ``LLMInferenceServiceConfig`` when its container names no command:
``LLMISVC_COMMAND`` is that line, with ``spec.parallelism`` and ``VLLM_ADDITIONAL_ARGS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from vllm_doctor.yaml_io import mapping_at

# kind -> (label after "Kind/name", path to a pod spec); "[]" after a key walks its list
POD_TEMPLATES: dict[str, tuple[tuple[str, str], ...]] = {
    "Pod": (("", "spec"),),
    **dict.fromkeys(
        ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"),
        (("", "spec.template.spec"),),
    ),
    "CronJob": (("", "spec.jobTemplate.spec.template.spec"),),
    # KubeRay: the head and each worker group (AIBrix's RayClusterFleet wraps a RayCluster)
    "RayCluster": (
        ("head", "spec.headGroupSpec.template.spec"),
        ("worker", "spec.workerGroupSpecs[].template.spec"),
    ),
    "RayService": (
        ("head", "spec.rayClusterConfig.headGroupSpec.template.spec"),
        ("worker", "spec.rayClusterConfig.workerGroupSpecs[].template.spec"),
    ),
    "RayJob": (
        ("head", "spec.rayClusterSpec.headGroupSpec.template.spec"),
        ("worker", "spec.rayClusterSpec.workerGroupSpecs[].template.spec"),
    ),
    "RayClusterFleet": (
        ("head", "spec.template.spec.headGroupSpec.template.spec"),
        ("worker", "spec.template.spec.workerGroupSpecs[].template.spec"),
    ),
    # AIBrix's StormService: one pod template per role (prefill, decode, ...)
    "StormService": (("role", "spec.template.spec.roles[].template.spec"),),
    # KServe
    "InferenceService": (("predictor", "spec.predictor"),),
    "ServingRuntime": (("", "spec"), ("worker", "spec.workerSpec")),
    "ClusterServingRuntime": (("", "spec"), ("worker", "spec.workerSpec")),
    "LLMInferenceService": (
        ("template", "spec.template"),
        ("worker", "spec.worker"),
        ("prefill template", "spec.prefill.template"),
        ("prefill worker", "spec.prefill.worker"),
    ),
}

# objects that hold other objects: kind -> the key of their list
WRAPPERS = {"List": "items", "Template": "objects"}

# KServe's well-known LLMInferenceServiceConfig (config/llmisvcconfig of kserve/kserve):
# `vllm serve /mnt/models --served-model-name NAME --port 8001 [parallelism]
# ${VLLM_ADDITIONAL_ARGS} "$@"`; the data-parallel worker adds its data-parallel options
LLMISVC_CONFIG = "KServe's well-known LLMInferenceServiceConfig"
LLMISVC_COMMAND = ["vllm", "serve", "/mnt/models", "--port", "8001"]
LLMISVC_PARALLELISM = (  # spec.parallelism key, option, the config's default when unset
    ("tensor", "--tensor-parallel-size", None),
    ("pipeline", "--pipeline-parallel-size", None),
    ("data", "--data-parallel-size", None),
    ("dataLocal", "--data-parallel-size-local", None),
)


def walk(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(the names of the list items passed, the node) at ``path`` ("a.b[].c")."""
    parts = path.split(".")

    def go(node: Any, i: int, names: str) -> Iterator[tuple[str, Any]]:
        if i == len(parts):
            yield names, node
            return
        key = parts[i]
        many = key.endswith("[]")
        value = node.get(key.removesuffix("[]")) if isinstance(node, dict) else None
        if not many:
            yield from go(value, i + 1, names)
            return
        for item in value if isinstance(value, list) else ():
            name = item.get("name") or item.get("groupName") if isinstance(item, dict) else None
            yield from go(item, i + 1, f"{names} {name}" if name else names)

    yield from go(node, 0, "")


def objects(doc: Any) -> Iterator[dict]:
    """The object and those it wraps (a List's items, a Template's objects), in order."""
    if not isinstance(doc, dict):
        return
    kind = str(doc.get("kind"))
    if kind in WRAPPERS:
        if kind == "Template":
            _fill_parameters(doc)
        for item in doc.get(WRAPPERS[kind]) or ():
            yield from objects(item)
    else:
        yield doc


_PARAMETER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _fill_parameters(template: dict) -> None:
    """An OpenShift Template's ``${NAME}`` in its objects, replaced by the parameter's value
    where the template gives one (``oc process`` does the same; a parameter given at
    processing time, or generated, stays as written)."""
    values = {
        str(p["name"]): str(p["value"])
        for p in template.get("parameters") or ()
        if isinstance(p, dict) and p.get("name") and p.get("value") is not None
    }
    if not values:
        return

    def fill(node: Any) -> Any:
        if isinstance(node, str):
            return _PARAMETER.sub(lambda m: values.get(m.group(1), m.group(0)), node)
        if isinstance(node, dict):
            for key in list(node):
                node[key] = fill(node[key])
        elif isinstance(node, list):
            for i, item in enumerate(node):
                node[i] = fill(item)
        return node

    fill(template.get("objects"))


def llmisvc_words(doc: dict, container: dict) -> list[str]:
    """The serve line KServe's config runs for an LLMInferenceService container that names no
    command: its model's name, ``spec.parallelism``, ``VLLM_ADDITIONAL_ARGS`` and the
    container's own args."""
    import contextlib
    import shlex

    spec = mapping_at(doc, "spec")
    words = list(LLMISVC_COMMAND)
    model = mapping_at(spec, "model")
    if model.get("name"):
        words += ["--served-model-name", str(model["name"])]
    parallelism = mapping_at(spec, "parallelism")
    for key, option, default in LLMISVC_PARALLELISM:
        value = parallelism.get(key, default)
        if value is not None and not isinstance(value, bool):
            words += [option, str(value)]
    if parallelism.get("expert") is True:
        words.append("--enable-expert-parallel")
    for item in container.get("env") or ():
        if isinstance(item, dict) and item.get("name") == "VLLM_ADDITIONAL_ARGS":
            with contextlib.suppress(ValueError):  # unbalanced quotes: nothing added
                words += shlex.split(str(item.get("value") or ""))
    args = container.get("args")
    if isinstance(args, list):
        words += [str(a) for a in args]
    return words
