"""Serve lines where they are deployed: Kubernetes manifests, docker-compose files, Dockerfiles.

Each container (compose service, Dockerfile) that runs vLLM is one ``Target``: its serve
line, and the facts the file states about where that line runs, each with the line it was
read from — the image's vLLM release, the GPUs a pod asks for and which product the node
selector names, the pods of a LeaderWorkerSet group, the container's variables and its
``/dev/shm``.

``$(VAR)`` (Kubernetes), ``$VAR``/``${VAR}`` (a ``sh -c`` script, compose interpolation) are
resolved from the variables the file itself sets. A reference it cannot settle (a variable
from a Secret, the host's environment, an unset name) is never guessed: the option it
belongs to is left out of the line and the fact it would give is undecided.

Kinds read: Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, LeaderWorkerSet
(leader and worker templates), KServe InferenceService (predictor containers) and
ServingRuntime / ClusterServingRuntime, a ``List`` of them; compose ``services``; a
Dockerfile's final stage (``FROM``, ``ENV``, ``ENTRYPOINT``, ``CMD``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import helm_values, kserve, workloads
from vllm_doctor.serveline.images import (  # noqa: F401 (image_vllm_version: tests, callers)
    image_vllm_version,
    is_vllm_image,
    pip_vllm_version,
)
from vllm_doctor.serveline.target import (  # noqa: F401 (the readers' shared pieces, re-exported)
    _GPU_LABEL_ENDINGS,
    _K8S_REF,
    _MARK,
    _MARKED,
    _SH_REF,
    _SHELLS,
    _VLLM_WORDS,
    DEFAULT_SHM_MIB,
    GPU_LABELS,
    GPU_RESOURCES,
    IMAGE_ENTRYPOINT,
    MANIFEST,
    MORE_ARGUMENTS,
    VGPU_RESOURCES,
    Placed,
    Target,
    _file,
    _get,
    _gpu_count,
    _is_serve_start,
    _known,
    _line,
    _new_target,
    _Refs,
    _runs_vllm,
    _single_quoted,
    drop_unresolved,
    entrypoint,
    expand_kubernetes,
    expand_shell,
    is_gpu_label,
    quantity_mib,
    resolve_command,
)

# -- reading a file ----------------------------------------------------------------------------


def read_text(name: str) -> str:
    """The manifest's text: a file, or standard input for ``-``; bounded."""
    if name == "-":
        from vllm_doctor.bounds import read_stdin

        # a manifest is read whole, bounded like a report (4 MiB: `helm template` of a large
        # chart stays well under it)
        data = read_stdin("manifest", "report", "--manifest -")
    else:
        from vllm_doctor.bounds import read_bytes

        data = read_bytes(name, "manifest", "report", "--manifest")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(name, "the manifest is not UTF-8 text") from None
    if "\x00" in text:
        raise InputError(name, "the manifest contains NUL bytes")
    return text


def is_dockerfile(name: str, text: str) -> bool:
    base = os.path.basename(name).lower()
    if base.startswith(("dockerfile", "containerfile")) or base.endswith(".dockerfile"):
        return True
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return bool(re.match(r"(?i)(FROM|ARG)\s", stripped))
    return False


def read_targets(name: str, text: str | None = None) -> list[Target]:
    """Every container in the file that runs vLLM; InputError for a file that is no manifest,
    or one with no vLLM container (a directory: ``directory.read_input``)."""
    text = read_text(name) if text is None else text
    read = read_file(name, text)
    services, used_runtimes, unjoined = kserve.join(read.objects)
    targets, looked, refused = file_targets(read, services, used_runtimes)
    if refused:
        raise InputError(name, refused)
    return checked_count(name, targets, looked, unjoined)


@dataclass
class ReadFile:
    """One file of the input: its lines, and its YAML documents (None for a Dockerfile)."""

    name: str
    text: str
    docs: list[Any] | None

    @property
    def objects(self) -> list[dict]:
        """The Kubernetes objects in it, wrapped ones opened (what KServe's join looks at)."""
        return [
            o for doc in self.docs or () if isinstance(doc, dict) for o in workloads.objects(doc)
        ]


def read_file(name: str, text: str) -> ReadFile:
    """The file parsed: a Dockerfile (by its name or first instruction) or YAML documents;
    InputError for YAML that is not valid."""
    if is_dockerfile(name, text):
        return ReadFile(name, text, None)
    return ReadFile(name, text, load_documents(name, text))


def file_targets(
    read: ReadFile, services: dict[int, kserve.Joined], used_runtimes: set[int]
) -> tuple[list[Target], list[str], str | None]:
    """The targets of one file (InferenceServices joined with their runtimes as ``services``
    says), what kinds were looked at, and why the file is no manifest (None when it is one)."""
    name, docs = read.name, read.docs
    targets: list[Target] = []
    looked_at: list[str] = []
    if docs is None:
        from vllm_doctor.serveline.dockerfile import dockerfile_targets

        targets = list(dockerfile_targets(name, read.text))
        looked_at.append("the Dockerfile's final stage")
    for doc in docs or ():
        if is_compose(doc):
            from vllm_doctor.serveline.compose import compose_targets

            looked_at.append("compose services")
            targets += list(compose_targets(name, doc))
        elif isinstance(doc, dict) and doc.get("kind"):
            looked_at.append(str(doc.get("kind")))
            targets += list(_kubernetes(name, doc, services, used_runtimes, read.objects))
        elif helm_values.is_values(doc) and not is_serve_config(doc) and len(docs or ()) == 1:
            rendered = helm_values.render(doc)
            if rendered is None:
                return [], [], helm_values.UNKNOWN_VALUES.format(file=name)
            looked_at.append("Helm values")
            for deployment in rendered:
                targets += list(_kubernetes(name, deployment))
    if not looked_at:
        return [], [], NOT_A_MANIFEST
    lines = read.text.splitlines()
    for target in targets:
        target.text_lines = lines
    return targets, looked_at, None


NOT_A_MANIFEST = (
    "neither a vLLM serve config, nor a Kubernetes manifest "
    "(apiVersion/kind), nor a docker-compose file (services:)"
)


def checked_count(
    name: str, targets: list[Target], looked_at: list[str], unjoined: list[str], extra: str = ""
) -> list[Target]:
    """``targets`` when there are some and not more than one run checks; else InputError
    naming what was looked at and what could not be joined."""
    if not targets:
        looked = ", ".join(dict.fromkeys(looked_at))
        why = "".join(f"; {note}" for note in unjoined)
        raise InputError(name, f"no container runs vLLM (looked at: {looked}{extra}){why}")
    from vllm_doctor.bounds import MAX_TARGETS

    if len(targets) > MAX_TARGETS:
        raise InputError(
            name,
            f"{len(targets):,} containers run vLLM; one run checks at most {MAX_TARGETS} "
            "(each is a whole check): split the input",
        )
    return targets


def load_documents(name: str, text: str) -> list[Any]:
    from vllm_doctor import yaml_io

    try:
        return [d for d in yaml_io.safe_load_all_with_lines(text) if d is not None]
    except yaml_io.YAMLError as err:
        problem = str(err).replace("\n", " ")
        raise InputError(name, f"not valid YAML: {problem}") from None


def is_compose(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("services"), dict) and "kind" not in doc


def is_manifest(doc: Any) -> bool:
    """A document that is a Kubernetes object or a compose file (not a serve config)."""
    return is_compose(doc) or (isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc)


# a vLLM server command or image, for the pre-commit hook's first look at a file
_MENTIONS_VLLM = re.compile(r"vllm(\s+serve\b|\.entrypoints)|vllm-openai|rocm/vllm")
_MANIFEST_KEYS = re.compile(r"(?m)^(apiVersion|kind|services)\s*:")
# a serve config by its name: `serve` as a word of it (serve.yaml, vllm-serve.yml,
# serve.prod.yaml, serve_tp2.yaml), not inside another word (server.yaml, observer.yml)
SERVE_CONFIG_NAME = re.compile(r"(^|/)([^/]*[-_.])?serve([-_.][^/]*)?\.ya?ml$")


def hook_option(path: str) -> str | None:
    """How the pre-commit hook checks a file: ``--manifest`` for a manifest, compose file or
    Dockerfile that runs vLLM, ``--serve-config`` for a serve config, None for a file with no
    vLLM in it (a README, another service's manifest)."""
    from vllm_doctor.bounds import FILE_LIMITS  # a manifest is bounded like a report

    try:
        with open(path, "rb") as handle:
            text = handle.read(FILE_LIMITS["report"]).decode("utf-8", "replace")
    except OSError:
        return "--manifest"  # `check` names what is wrong with it
    if is_dockerfile(path, text) or _MANIFEST_KEYS.search(text):
        return "--manifest" if _MENTIONS_VLLM.search(text) else None
    if SERVE_CONFIG_NAME.search(path.replace(os.sep, "/")):
        return "--serve-config"
    # a file the hook's own pattern does not select was chosen by the repository's `files:`
    return None if path.endswith((".yaml", ".yml")) else "--serve-config"


def is_serve_config(data: Any) -> bool:
    """A YAML mapping with a vLLM option (or ``model``) among its keys: a serve config, whatever
    the file is called."""
    from vllm_doctor.serveline.options import option_spec

    return isinstance(data, dict) and any(
        key == "model" or option_spec("--" + str(key)) for key in data
    )


def serve_config_is_manifest(path: Path) -> bool:
    """Whether a --serve-config file is a manifest (then each of its vLLM containers is
    checked); InputError when it is neither a manifest nor a serve config (a YAML mapping
    with no key that is a vLLM option)."""
    name = str(path)
    if is_dockerfile(name, "") and os.path.basename(name).lower().startswith(
        ("dockerfile", "containerfile")
    ):
        return True
    from vllm_doctor.bounds import read_text as read_bounded

    docs = load_documents(name, read_bounded(path, "file", "yaml", source="--serve-config"))
    if len(docs) > 1 or any(is_manifest(doc) for doc in docs):
        return True
    doc = docs[0] if docs else None
    if isinstance(doc, dict) and not is_serve_config(doc) and helm_values.render(doc) is not None:
        return True  # a chart's values file the doctor reads as the manifest it renders
    if isinstance(doc, dict) and doc and not is_serve_config(doc):
        raise InputError(
            name,
            "neither a vLLM serve config (none of its keys is a vLLM "
            "option) nor a manifest (no apiVersion/kind, no services)",
        )
    return False


# -- references ----------------------------------------------------------------------------------


# -- Kubernetes ----------------------------------------------------------------------------------


def _pod_specs(doc: dict) -> Iterator[tuple[str, Any, Placed | None]]:
    """(label, pod spec, pods per group) of each pod template in a Kubernetes object (the
    paths of ``workloads.POD_TEMPLATES``; a LeaderWorkerSet's group size as its pods)."""
    kind = str(doc.get("kind"))
    name = _get(doc, "metadata", "name") or "?"
    label = f"{kind}/{name}"
    spec = doc.get("spec")
    if kind == "LeaderWorkerSet":
        group = _get(spec, "leaderWorkerTemplate")
        size = _get(group, "size")
        nodes = (
            Placed(size, _line(group, "size"), "leaderWorkerTemplate.size")
            if isinstance(size, int) and not isinstance(size, bool)
            else None
        )
        from vllm_doctor.bounds import MAX_NODES

        if nodes is not None and not 1 <= size <= MAX_NODES:
            raise InputError(
                f"leaderWorkerTemplate.size (line {nodes.line})",
                f"{str(size)[:40]} pods: a group has between 1 and {MAX_NODES}",
            )
        for part in ("leaderTemplate", "workerTemplate"):
            template = _get(group, part, "spec")
            if template is not None:
                yield f"{label} {part.replace('Template', '')}", template, nodes
        return
    for part, path in workloads.POD_TEMPLATES.get(kind, ()):
        for names, pod in workloads.walk(doc, path):
            if isinstance(_get(pod, "containers"), list):
                yield " ".join(x for x in (label, part + names) if x).strip(), pod, None


def _kubernetes(
    name: str,
    doc: dict,
    services: dict[int, kserve.Joined] | None = None,
    used_runtimes: set[int] | None = None,
    neighbours: list[dict] | None = None,
) -> Iterator[Target]:
    """The targets of an object (and those it wraps); an InferenceService joined with its
    runtime (``kserve.join``) is one, the runtime it uses none of its own. ``neighbours``:
    the file's other objects, whose Services Kubernetes links into the pods' environment."""
    for obj in workloads.objects(doc):
        if used_runtimes and id(obj) in used_runtimes:
            continue
        joined = services.get(id(obj)) if services else None
        try:  # a bound passed (a group of 10^8 pods) names the file
            pods = [(joined.label, joined.pod, None)] if joined else list(_pod_specs(obj))
        except InputError as err:
            raise InputError(f"{name}: {err.source}", err.problem) from None
        for label, pod, nodes in pods:
            for container in pod.get("containers") or ():
                if isinstance(container, dict):
                    target = _container(name, label, pod, container, nodes, obj)
                    if target is not None:
                        _k8s_service_links(target, pod, obj, neighbours or ())
                        if joined is not None and container is pod["containers"][0]:
                            # the service is the target; the runtime's words are in its file
                            target.line = joined.line or target.line
                            target.word_starts = list(joined.word_starts)
                        yield target


def _env_list(items: Any) -> dict[str, Placed]:
    env: dict[str, Placed] = {}
    for i, item in enumerate(items or ()):
        if not isinstance(item, dict) or not item.get("name"):
            continue
        line = items.lines[i] if hasattr(items, "lines") else 0
        value = item.get("value")
        env[str(item["name"])] = Placed(
            None if "valueFrom" in item else ("" if value is None else str(value)),
            line,
            f"env {item['name']}",
            _file(items, i),
        )
    return env


def _words(node: Any) -> list[str] | None:
    if node is None:
        return None
    if isinstance(node, str):
        return [node]
    return ["" if w is None else (str(w).lower() if isinstance(w, bool) else str(w)) for w in node]


def _container(
    name: str, label: str, pod: dict, container: dict, nodes: Placed | None, obj: dict
) -> Target | None:
    command, args = _words(container.get("command")), _words(container.get("args"))
    image = container.get("image")
    env = _env_list(container.get("env"))
    kind = str(obj.get("kind"))
    if kind == "LLMInferenceService" and command is None:
        command, args = workloads.llmisvc_words(obj, container), None
    command = entrypoint(command, image, args)
    if command is None:
        return None
    refs = _Refs()
    words = [expand_kubernetes(w, env, refs) for w in command + (args or [])]
    target = _new_target(
        name,
        str(label.split("/")[0]),
        f"{label} container {container.get('name') or '?'}",
        container,
        _line(container),
        ("command", "args"),
        words,
        env,
        refs,
    )
    if target is None:
        return None
    if kind in ("ServingRuntime", "ClusterServingRuntime"):
        target.unresolved.setdefault(
            MORE_ARGUMENTS, "the InferenceService's args (KServe appends them to the runtime's)"
        )
    elif kind == "LLMInferenceService" and container.get("command") is None:
        target.words_from = workloads.LLMISVC_CONFIG
        if target.image is None:
            target.image_unknown = f"the image comes from {workloads.LLMISVC_CONFIG}"
    if container.get("envFrom"):
        target.env_elsewhere = (
            "the container also takes variables from envFrom (a "
            "ConfigMap or Secret) the manifest does not show"
        )
    _k8s_gpus(target, container)
    _k8s_interposer(target, container)
    target.nodes = nodes
    # what a chart's values leave to the chart's version (helm_values: llm-d's parallelism)
    undecided = getattr(obj, "undecided", None) or {}
    target.nodes_unknown = undecided.get("nodes")
    if target.nodes is None and target.nodes_unknown is None:
        target.nodes = getattr(obj, "nodes", None)
    if target.gpus is None and undecided.get("gpus"):
        target.gpus_unknown = undecided["gpus"]
    _k8s_product(target, pod)
    _k8s_shm(target, pod, container)
    return target


# The variable a Service named "vllm" makes Kubernetes inject into every pod of its namespace
# (service links, on unless the pod sets enableServiceLinks: false): VLLM_PORT=tcp://IP:PORT,
# which vLLM reads as its internal port (ENV064). A headless Service (clusterIP: None) injects
# nothing. Only the Services of the same file are seen.
LINKED_SERVICE, LINKED_VARIABLE = "vllm", "VLLM_PORT"


def _k8s_service_links(target: Target, pod: dict, obj: dict, neighbours: Any) -> None:
    if pod.get("enableServiceLinks") is False or LINKED_VARIABLE in target.env:
        return
    namespace = _get(obj, "metadata", "namespace")
    for svc in neighbours:
        spec = svc.get("spec") if isinstance(svc.get("spec"), dict) else {}
        ports = spec.get("ports") if isinstance(spec.get("ports"), list) else []
        if (
            svc.get("kind") != "Service"
            or _get(svc, "metadata", "name") != LINKED_SERVICE
            or _get(svc, "metadata", "namespace") != namespace
            or spec.get("clusterIP") == "None"
            or not ports
            or not isinstance(ports[0], dict)
        ):
            continue
        address = spec.get("clusterIP") or "<cluster IP>"
        protocol = str(ports[0].get("protocol") or "TCP").lower()
        target.service_links[LINKED_VARIABLE] = Placed(
            f"{protocol}://{address}:{ports[0].get('port')}",
            _line(svc),
            f'Service "{LINKED_SERVICE}" (Kubernetes injects {LINKED_VARIABLE} into the '
            "pods of its namespace)",
        )
        return


def _k8s_gpus(target: Target, container: dict) -> None:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        block = resources.get(section) if isinstance(resources, dict) else None
        for resource in GPU_RESOURCES:
            if isinstance(block, dict) and resource in block:
                raw = block[resource]
                at = f"{_file(block, resource) or target.file}:{_line(block, resource)}"
                try:
                    count = _gpu_count(raw, f"{at} {resource}")
                except ValueError:
                    target.gpus_unknown = f"{at}: {resource} is {raw!r}, not a count"
                    return
                target.gpus = Placed(
                    count,
                    _line(block, resource),
                    f"resources.{section}.{resource}",
                    _file(block, resource),
                )
                return


# what HAMi's device plugin reads as true (Go's strconv.ParseBool) in CUDA_DISABLE_CONTROL
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")


def _k8s_interposer(target: Target, container: dict) -> None:
    """A container asking for a vGPU device plugin's resources gets HAMi-core preloaded,
    unless its env sets CUDA_DISABLE_CONTROL to true (the plugin then mounts no
    /etc/ld.so.preload: HAMi's plugin/server.go)."""
    resources = container.get("resources")
    for section in ("limits", "requests"):
        block = resources.get(section) if isinstance(resources, dict) else None
        asked = [r for r in VGPU_RESOURCES if isinstance(block, dict) and r in block]
        if not asked:
            continue
        off = target.env.get("CUDA_DISABLE_CONTROL")
        if off is not None and off.value in _GO_TRUE:
            target.interposer_off = off
            return
        target.interposer = Placed(
            "hami-core",
            _line(block, asked[0]),
            f"resources.{section}.{asked[0]} (a vGPU device plugin preloads HAMi-core's "
            "libvgpu.so)",
            _file(block, asked[0]),
        )
        return


def _k8s_product(target: Target, pod: dict) -> None:
    selector = pod.get("nodeSelector")
    if isinstance(selector, dict):
        for label in [k for k in selector if is_gpu_label(k)]:
            if selector.get(label):
                target.gpu_product = Placed(
                    str(selector[label]),
                    _line(selector, label),
                    f"nodeSelector {label}",
                    _file(selector, label),
                )
                return
    terms = _get(
        pod,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    values: list[Placed] = []
    for term in terms or ():
        for expr in _get(term, "matchExpressions") or ():
            if is_gpu_label(_get(expr, "key")) and _get(expr, "operator") == "In":
                for value in _get(expr, "values") or ():
                    values.append(
                        Placed(
                            str(value),
                            _line(expr, "values"),
                            f"nodeAffinity {expr['key']}",
                            _file(expr, "values"),
                        )
                    )
    if len({v.value for v in values}) == 1:
        target.gpu_product = values[0]
    elif values:
        target.gpu_product_unknown = (
            f"{target.at(values[0])}: the node affinity allows "
            f"several GPU products ({', '.join(v.value for v in values)})"
        )


def _k8s_shm(target: Target, pod: dict, container: dict) -> None:
    mounts = container.get("volumeMounts") or ()
    for i, mount in enumerate(mounts):
        if not isinstance(mount, dict) or str(mount.get("mountPath", "")).rstrip("/") != "/dev/shm":
            continue
        line = mounts.lines[i] if hasattr(mounts, "lines") else target.line
        file = _file(mounts, i)
        volume = next(
            (
                v
                for v in pod.get("volumes") or ()
                if isinstance(v, dict) and v.get("name") == mount.get("name")
            ),
            None,
        )
        empty = _get(volume, "emptyDir")
        if isinstance(empty, dict) and empty.get("medium") == "Memory":
            size = (
                quantity_mib(
                    empty["sizeLimit"],
                    where=f"{_file(empty) or target.file}:{_line(empty, 'sizeLimit')} sizeLimit",
                )
                if empty.get("sizeLimit")
                else None
            )
            target.shm = Placed(
                size if size is not None else "Memory emptyDir",
                line,
                "/dev/shm: emptyDir medium Memory"
                + (f" sizeLimit {empty['sizeLimit']}" if size is not None else ""),
                file,
            )
        elif _get(volume, "hostPath"):
            target.shm = Placed(
                "hostPath", line, f"/dev/shm: hostPath {_get(volume, 'hostPath', 'path')}", file
            )
        else:
            target.shm = Placed("volume", line, "/dev/shm: a volume not in memory", file)
        return
    if pod.get("hostIPC") is True:
        target.shm = Placed(
            "hostIPC",
            _line(pod, "hostIPC"),
            "hostIPC: true (the node's /dev/shm)",
            _file(pod, "hostIPC"),
        )
