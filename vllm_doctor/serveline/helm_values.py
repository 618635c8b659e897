"""Helm values files of the charts people deploy vLLM with, read by what each chart does.

A values file is not a manifest: the chart's templates make one from it. For the charts
known here, the Deployment the chart renders for each engine is built from the values the
way its template builds it (the same image, command, GPUs and /dev/shm), so the file gives
the same targets and serve lines as ``helm template release-name CHART -f FILE``:

- vLLM production-stack (``helm/templates/deployment-vllm-multi.yaml`` of
  vllm-project/production-stack): one Deployment per ``servingEngineSpec.modelSpec[]``;
- the vLLM chart (``examples/online_serving/chart-helm`` of vllm-project/vllm): one
  Deployment from ``image.command`` and ``resources``;
- llm-d's modelservice chart (``charts/llm-d-modelservice`` of llm-d-incubation/
  llm-d-modelservice): a Deployment per role (``decode``, ``prefill``) whose containers run
  ``modelCommand: vllmServe`` with the model of ``modelArtifacts.uri``, ``parallelism`` and
  the GPUs it implies (tensor × data-local), or their own ``command``.

Any other chart is read through its rendered output (``helm template ... | vllm-doctor
check --manifest -``); a values file of one says so (``UNKNOWN_VALUES``).
"""

from __future__ import annotations

import re
from typing import Any

from vllm_doctor.yaml_io import LineDict, LineList, mapping_at

# `helm template CHART` names the release "release-name" when none is given
RELEASE = "release-name"
UNKNOWN_VALUES = (
    "neither a vLLM serve config, nor a Kubernetes manifest (apiVersion/kind), nor a "
    "docker-compose file (services:), nor the Helm values of a chart the doctor reads "
    "(production-stack's, the vLLM chart's, llm-d's modelservice); for another chart's values, check what it "
    "renders: `helm template NAME CHART -f {file} | vllm-doctor check --manifest -`"
)


def _node(line: int, **items: Any) -> LineDict:
    """A mapping for the rendered object whose keys point at the values' line ``line``."""
    node = LineDict((k, v) for k, v in items.items() if v is not None)
    node.line, node.lines = line, dict.fromkeys(node, line)
    return node


def _seq(line: int, items: list) -> LineList:
    seq = LineList(items)
    seq.line, seq.lines = line, [line] * len(items)
    return seq


def _line(node: Any, key: str, default: int) -> int:
    return getattr(node, "lines", {}).get(key, default)


def is_values(doc: Any) -> bool:
    """A mapping with none of a manifest's keys: a values file (of some chart)."""
    return isinstance(doc, dict) and not ({"apiVersion", "kind", "services"} & set(doc))


def render(doc: dict, release: str = RELEASE) -> list[dict] | None:
    """The Deployments the chart renders from these values (release ``release``); None for
    an unknown chart."""
    engine = doc.get("servingEngineSpec")
    if isinstance(engine, dict) and isinstance(engine.get("modelSpec"), list):
        if engine.get("enableEngine") is False:
            return []
        return [
            _production_stack(engine, spec, release)
            for spec in engine["modelSpec"]
            if isinstance(spec, dict) and spec.get("enabled", True) is not False
        ]
    image = doc.get("image")
    if isinstance(image, dict) and isinstance(image.get("command"), list) and "gpuModels" in doc:
        return [_vllm_chart(doc, release)]
    if isinstance(doc.get("modelArtifacts"), dict) and any(
        isinstance(doc.get(role), dict) for role in LLM_D_ROLES
    ):
        return _llm_d(doc, release)
    return None


# -- production-stack --------------------------------------------------------------------------

# vllmConfig key -> the option the chart writes (its template's order)
_VLLM_CONFIG = (
    ("maxModelLen", "--max-model-len"),
    ("dtype", "--dtype"),
    ("tensorParallelSize", "--tensor-parallel-size"),
    ("maxNumSeqs", "--max-num-seqs"),
    ("gpuMemoryUtilization", "--gpu_memory_utilization"),
    ("maxLoras", "--max_loras"),
    ("runner", "--runner"),
    ("convert", "--convert"),
)


def _production_stack(engine: dict, spec: dict, release: str) -> dict:
    at = spec.line if hasattr(spec, "line") else 0
    port = str(engine.get("containerPort") or 8000)
    binary = "/opt/venv/bin/vllm" if spec.get("repository") == "lmcache/vllm-openai" else "vllm"
    command = [binary, "serve", str(spec.get("modelURL")), "--host", "0.0.0.0", "--port", port]
    if spec.get("enableLoRA"):
        command.append("--enable-lora")
    if spec.get("enableTool"):
        command.append("--enable-auto-tool-choice")
    if spec.get("toolCallParser"):
        command += ["--tool-call-parser", str(spec["toolCallParser"])]
    config = spec.get("vllmConfig")
    if isinstance(config, dict):
        if "enableChunkedPrefill" in config:
            command.append(
                "--enable-chunked-prefill"
                if config["enableChunkedPrefill"]
                else "--no-enable-chunked-prefill"
            )
        command.append(
            "--enable-prefix-caching"
            if config.get("enablePrefixCaching")
            else "--no-enable-prefix-caching"
        )
        for key, option in _VLLM_CONFIG:
            if key in config:
                command += [option, str(config[key])]
        command += [str(a) for a in config.get("extraArgs") or ()]
    if spec.get("modelRevision"):
        command += ["--revision", str(spec["modelRevision"])]
    lmcache = spec.get("lmcacheConfig")
    if isinstance(lmcache, dict) and lmcache.get("enabled"):
        role = lmcache.get("kvRole") or "kv_both"
        if "enablePD" in lmcache:
            extra = (
                '"kv_connector_extra_config":{"discard_partial_chunks": false, '
                f'"lmcache_rpc_port": "{lmcache.get("nixlRole")}"}}'
            )
            transfer = f'{{"kv_connector":"LMCacheConnectorV1","kv_role":"{role}",{extra}}}'
        elif isinstance(config, dict) and str(config.get("v0")) == "1":
            transfer = f'{{"kv_connector":"LMCacheConnector","kv_role":"{role}"}}'
        else:
            transfer = f'{{"kv_connector":"LMCacheConnectorV1","kv_role":"{role}"}}'
        command += ["--kv-transfer-config", transfer]
    if spec.get("chatTemplate"):
        command += ["--chat-template", f"/templates/{spec['chatTemplate']}"]
    env = [e for e in (engine.get("env") or []) + (spec.get("env") or []) if isinstance(e, dict)]
    if isinstance(lmcache, dict) and "cudaVisibleDevices" in lmcache:
        env.append({"name": "CUDA_VISIBLE_DEVICES", "value": str(lmcache["cudaVisibleDevices"])})
    gpus = spec.get("requestGPU") or 0
    resources = spec.get("resources")
    if not isinstance(resources, dict):
        kind = spec.get("requestGPUType") or "nvidia.com/gpu"
        line = _line(spec, "requestGPU", at)
        block = _node(line, **({kind: gpus} if int(gpus) > 0 else {}))
        resources = _node(line, requests=block, limits=block)
    container = _node(
        _line(spec, "name", at),
        name="vllm",
        image=f"{spec.get('repository')}:{spec.get('tag')}",
        command=_seq(_line(spec, "modelURL", at), command),
        env=_seq(_line(spec, "env", at), env),
        resources=resources,
    )
    container.lines["image"] = _line(spec, "repository", at)
    pod = _node(at, containers=_seq(at, [container]))
    if isinstance(config, dict) and "tensorParallelSize" in config:
        size_line = _line(spec, "shmSize", _line(config, "tensorParallelSize", at))
        container["volumeMounts"] = _seq(
            size_line, [_node(size_line, name="shm", mountPath="/dev/shm")]
        )
        empty = _node(size_line, medium="Memory", sizeLimit=str(spec.get("shmSize") or "20Gi"))
        pod["volumes"] = _seq(size_line, [_node(size_line, name="shm", emptyDir=empty)])
    if isinstance(lmcache, dict) and lmcache.get("enablePD"):
        pod["hostIPC"] = True
        pod.lines["hostIPC"] = _line(lmcache, "enablePD", at)
    if isinstance(spec.get("nodeSelectorTerms"), list):
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": spec["nodeSelectorTerms"]
                }
            }
        }
    name = f"{release}-{spec.get('name')}-deployment-vllm"
    return _deployment(name, pod, at)


# -- the vLLM chart ---------------------------------------------------------------------------


def _vllm_chart(doc: dict, release: str) -> dict:
    image = doc["image"]
    at = image.line if hasattr(image, "line") else 0
    resources = mapping_at(doc, "resources")
    container = _node(
        at,
        name="vllm",
        image=f"{image.get('repository')}:{image.get('tag')}",
        command=image["command"],
        env=image.get("env") or [],
        resources=resources,
    )
    container.lines.update(
        image=_line(image, "repository", at),
        command=_line(image, "command", at),
        resources=_line(doc, "resources", at),
    )
    pod = _node(at, containers=_seq(at, [container]))
    shm = doc.get("shm")
    if isinstance(shm, dict) and shm.get("enabled"):
        line = _line(shm, "enabled", at)
        container["volumeMounts"] = _seq(line, [_node(line, name="shm", mountPath="/dev/shm")])
        empty = _node(
            line, medium="Memory", sizeLimit=str(shm["size"]) if shm.get("size") else None
        )
        pod["volumes"] = _seq(line, [_node(line, name="shm", emptyDir=empty)])
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    gpu_models = doc.get("gpuModels")
    if int(requests.get("nvidia.com/gpu") or 0) > 0 and int(limits.get("nvidia.com/gpu") or 0) > 0:
        line = _line(doc, "gpuModels", at)
        expression = _node(line, key="nvidia.com/gpu.product", operator="In", values=gpu_models)
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }
    return _deployment(f"{release}-deployment-vllm", pod, at)


def _deployment(name: str, pod: dict, line: int) -> dict:
    template = _node(line, spec=pod)
    return _node(
        line,
        apiVersion="apps/v1",
        kind="Deployment",
        metadata=_node(line, name=name),
        spec=_node(line, template=template),
    )


# -- llm-d's modelservice chart ---------------------------------------------------------------

LLM_D_ROLES = ("decode", "prefill")
# the chart's values.yaml defaults the files rarely repeat
_LLM_D_DEFAULTS = {"servicePort": 8000, "targetPort": 8200, "mountPath": "/model-cache"}


def _llm_d_model(doc: dict) -> str | None:
    """The model argument the chart derives from ``modelArtifacts.uri`` (hf://, pvc://)."""
    artifacts = doc["modelArtifacts"]
    uri = str(artifacts.get("uri") or "")
    uri = re.sub(r"\{\{\s*\.Values\.modelArtifacts\.name\s*\}\}", str(artifacts.get("name")), uri)
    protocol, _, rest = uri.partition("://")
    rest = rest.strip('"')
    if protocol == "hf":
        return rest
    if protocol == "pvc":
        mount = artifacts.get("mountPath") or _LLM_D_DEFAULTS["mountPath"]
        return f"{mount}/{rest.split('/', 1)[1]}" if "/" in rest else None
    if protocol == "pvc+hf":
        return "/".join(rest.split("/")[-2:])
    return None


def _llm_d(doc: dict, release: str) -> list[dict]:
    routing = mapping_at(doc, "routing")
    proxy = mapping_at(routing, "proxy")
    accelerator = mapping_at(doc, "accelerator")
    kind = str(accelerator.get("type") or "nvidia")
    resource = (
        None if kind == "cpu" else (accelerator.get("resources") or {}).get(kind, "nvidia.com/gpu")
    )
    out = []
    for role in LLM_D_ROLES:
        spec = doc.get(role)
        if not isinstance(spec, dict) or spec.get("create") is False:
            continue
        at = getattr(spec, "line", 0)
        parallelism = mapping_at(spec, "parallelism")
        tensor = int(parallelism.get("tensor") or 1)
        local = int(parallelism.get("dataLocal") or parallelism.get("data") or 1)
        data = int(parallelism.get("data") or 1)
        if role == "prefill" or proxy.get("enabled") is False:
            port = routing.get("servicePort", _LLM_D_DEFAULTS["servicePort"])
        else:
            port = proxy.get("targetPort", _LLM_D_DEFAULTS["targetPort"])
        containers = []
        for container in spec.get("containers") or ():
            if not isinstance(container, dict):
                continue
            line = getattr(container, "line", at)
            how = container.get("modelCommand") or "custom"
            node = _node(line, name=container.get("name") or "vllm", image=container.get("image"))
            node.lines.update(getattr(container, "lines", {}))
            if how in ("vllmServe", "imageDefault"):
                model = _llm_d_model(doc)
                args = (["--model"] if how == "imageDefault" else []) + [str(model)]
                args += ["--port", str(port)]
                for size, option in (
                    (tensor, "--tensor-parallel-size"),
                    (data, "--data-parallel-size"),
                    (local, "--data-parallel-size-local"),
                ):
                    if size > 1:
                        args += [option, str(size)]
                args += ["--served-model-name", str(doc["modelArtifacts"].get("name"))]
                args += [str(a) for a in container.get("args") or ()]
                node["args"] = _seq(_line(container, "args", line), args)
                node.lines["args"] = _line(container, "modelCommand", line)
                if how == "vllmServe":
                    node["command"] = _seq(node.lines["args"], ["vllm", "serve"])
                    node.lines["command"] = node.lines["args"]
            else:
                for key in ("command", "args"):
                    if container.get(key) is not None:
                        node[key] = container[key]
            if container.get("env"):
                node["env"] = container["env"]
            resources = mapping_at(container, "resources")
            gpus = tensor * local
            limits = dict(resources.get("limits") or {})
            if resource and gpus >= 1 and resource not in limits:
                limits[resource] = str(gpus)
            block = _node(_line(container, "resources", line), **limits)
            node["resources"] = _node(block.line, limits=block, requests=block)
            containers.append(node)
        pod = _node(at, containers=_seq(at, containers))
        out.append(_deployment(f"{release}-llm-d-modelservice-{role}", pod, at))
    return out
