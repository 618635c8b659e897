"""Helm values files of the charts people deploy vLLM with, read by what each chart does.

A values file is not a manifest: the chart's templates make one from it. For the charts
known here, the Deployment the chart renders for each engine is built from the values the
way its template builds it (the same image, command, GPUs and /dev/shm), so the file gives
the same targets and serve lines as ``helm template release-name CHART -f FILE``:

- vLLM production-stack (``helm/templates/deployment-vllm-multi.yaml`` of
  vllm-project/production-stack): one Deployment per ``servingEngineSpec.modelSpec[]``, or
  for one with ``raySpec.enabled`` the KubeRay RayCluster of ``ray-cluster.yaml``: a head
  that runs the serve line of the chart's ``vllm-entrypoint.sh`` (``--distributed-executor-
  backend ray``) and ``replicaCount`` workers, the group's pods (head and workers) the
  nodes its world size spans;
- the vLLM chart (``examples/online_serving/chart-helm`` of vllm-project/vllm): one
  Deployment from ``image.command`` and ``resources``;
- llm-d's modelservice chart (``charts/llm-d-modelservice`` of llm-d-incubation/
  llm-d-modelservice, v0.4.12 at 3051935): a Deployment per role (``decode``, ``prefill``), or
  with ``multinode: true`` a LeaderWorkerSet whose group is ``parallelism.workers`` pods (the
  chart's ``numWorkers``); its containers run ``modelCommand: vllmServe`` with the model of
  ``modelArtifacts.uri`` and ``parallelism``, or their own ``command``, with the GPUs it
  implies (tensor × data-local per pod), the variables the chart adds (``DP_SIZE``,
  ``TP_SIZE``, ``DP_SIZE_LOCAL``: a script's ``$TP_SIZE`` is settled) and the role's
  ``volumes``. The parallelism helpers are the chart's since v0.3.6 (#159); before it a
  group was ``parallelism.data`` pods of ``tensor`` GPUs each — a values file written for
  those charts is read as the current chart renders it.

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
            _production_stack_ray(engine, spec, release)
            if isinstance(spec.get("raySpec"), dict) and spec["raySpec"].get("enabled")
            else _production_stack(engine, spec, release)
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


# vllmConfig key -> the option of ray-cluster.yaml's vllm-entrypoint.sh (its order)
_RAY_VLLM_CONFIG = (
    ("maxModelLen", "--max-model-len"),
    ("dtype", "--dtype"),
    ("tensorParallelSize", "--tensor-parallel-size"),
    ("pipelineParallelSize", "--pipeline-parallel-size"),
    ("maxNumSeqs", "--max-num-seqs"),
    ("gpuMemoryUtilization", "--gpu-memory-utilization"),
    ("maxLoras", "--max-loras"),
)


def _production_stack_ray(engine: dict, spec: dict, release: str) -> dict:
    """A modelSpec with ``raySpec.enabled``: the RayCluster of ray-cluster.yaml (no Deployment:
    deployment-vllm-multi.yaml skips it). The head's container starts the ConfigMap's
    ``vllm-entrypoint.sh``, whose serve line is the target's command here."""
    from vllm_doctor.serveline.target import Placed

    at = spec.line if hasattr(spec, "line") else 0
    ray = spec["raySpec"]
    head = mapping_at(ray, "headNode")
    port = str(engine.get("containerPort") or 8000)
    command = ["vllm", "serve", str(spec.get("modelURL")), "--host", "0.0.0.0", "--port", port]
    command += ["--distributed-executor-backend", "ray"]
    if spec.get("enableLoRA"):
        command.append("--enable-lora")
    if spec.get("enableTool"):
        command.append("--enable-auto-tool-choice")
    if spec.get("toolCallParser"):
        command += ["--tool-call-parser", str(spec["toolCallParser"])]
    config = mapping_at(spec, "vllmConfig")
    if "enableChunkedPrefill" in config:
        on = config["enableChunkedPrefill"]
        command.append("--enable-chunked-prefill" if on else "--no-enable-chunked-prefill")
    if config.get("enablePrefixCaching"):
        command.append("--enable-prefix-caching")
    for key, option in _RAY_VLLM_CONFIG:
        if key in config:
            command += [option, str(config[key])]
    command += [str(a) for a in config.get("extraArgs") or ()]
    if spec.get("modelRevision"):
        command += ["--revision", str(spec["modelRevision"])]
    lmcache = mapping_at(spec, "lmcacheConfig")
    if lmcache.get("enabled"):
        connector = "LMCacheConnectorV1" if str(config.get("v1")) == "1" else "LMCacheConnector"
        command += ["--kv-transfer-config", f'{{"kv_connector":"{connector}","kv_role":"kv_both"}}']
    if spec.get("chatTemplate"):
        command += ["--chat-template", str(spec["chatTemplate"])]
    workers = spec.get("replicaCount", 1)
    workers = workers if isinstance(workers, int) and not isinstance(workers, bool) else None
    env_line = _line(spec, "env", at)
    env: list[dict] = [_node(env_line, name="VLLM_HOST_IP", valueFrom="status.podIP")]
    if workers is not None:
        env.append(
            _node(_line(spec, "replicaCount", at), name="EXPECTED_NODES", value=str(workers + 1))
        )
    env.append(_node(at, name="HF_HOME", value="/data" if "pvcStorage" in spec else "/tmp"))
    if config:
        env.append(_node(at, name="VLLM_USE_V1", value=str(config.get("v1", "0"))))
    env += [e for e in spec.get("env") or () if isinstance(e, dict)]

    def resources_of(node: dict) -> dict:
        if isinstance(node.get("resources"), dict):
            return node["resources"]
        line = _line(node, "requestGPU", getattr(node, "line", at))
        kind = spec.get("requestGPUType") or "nvidia.com/gpu"
        gpus = node.get("requestGPU") or 0
        block = _node(line, **({kind: gpus} if int(gpus) > 0 else {}))
        return _node(line, requests=block, limits=block)

    container = _node(
        _line(spec, "name", at),
        name="vllm-ray-head",
        image=f"{spec.get('repository')}:{spec.get('tag')}",
        command=_seq(_line(spec, "modelURL", at), command),
        env=_seq(env_line, env),
        resources=resources_of(head),
    )
    container.lines["image"] = _line(spec, "repository", at)
    pod = _node(at, containers=_seq(at, [container]))
    if "tensorParallelSize" in config:
        size_line = _line(spec, "shmSize", _line(config, "tensorParallelSize", at))
        container["volumeMounts"] = _seq(
            size_line, [_node(size_line, name="shm", mountPath="/dev/shm")]
        )
        empty = _node(size_line, medium="Memory", sizeLimit=str(spec.get("shmSize") or "20Gi"))
        pod["volumes"] = _seq(size_line, [_node(size_line, name="shm", emptyDir=empty)])
    worker = _node(
        at,
        name="vllm-ray-worker",
        image=container["image"],
        command=_seq(at, ["/bin/bash", "-c", "ray start --block"]),
        resources=resources_of(spec),
    )
    group = _node(
        _line(spec, "replicaCount", at),
        groupName="ray",
        replicas=workers,
        template=_node(at, spec=_node(at, containers=_seq(at, [worker]))),
    )
    cluster = Rendered.of(
        _node(
            at,
            apiVersion="ray.io/v1",
            kind="RayCluster",
            metadata=_node(at, name=f"{release}-{spec.get('name')}-raycluster"),
            spec=_node(
                at,
                headGroupSpec=_node(at, template=_node(at, spec=pod)),
                workerGroupSpecs=_seq(at, [group]),
            ),
        )
    )
    # the head and its workers are the nodes vLLM's Ray executor spans; a GPU count per node
    # holds for the group only when the head asks for as many as each worker
    head_gpus = _gpu_limit(container["resources"])
    worker_gpus = _gpu_limit(worker["resources"])
    if workers is None:
        cluster.undecided["nodes"] = f"line {at}: replicaCount is not a number of workers"
    elif head_gpus != worker_gpus:
        cluster.undecided["nodes"] = (
            f"line {_line(head, 'requestGPU', at)}: the Ray head asks for {head_gpus} GPU(s), "
            f"each of the {workers} worker(s) for {worker_gpus}: not one count per node"
        )
    else:
        cluster.nodes = Placed(
            workers + 1,
            _line(spec, "replicaCount", at),
            "raySpec: the Ray head and replicaCount workers",
        )
    return cluster


def _gpu_limit(resources: Any) -> Any:
    limits = mapping_at(resources, "limits")
    return next((v for k, v in limits.items() if str(k).endswith("/gpu")), 0)


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


def _llm_d_parallelism(spec: dict) -> dict[str, int]:
    """The chart's parallelism helpers (``_helpers.tpl``: tensorParallelism, dataParallelism,
    dataLocalParallelism, numWorkers) on a role's ``parallelism``; InputError where the chart
    itself fails to render."""
    from vllm_doctor.errors import InputError

    parallelism = mapping_at(spec, "parallelism")
    where = f"parallelism (line {_line(spec, 'parallelism', getattr(spec, 'line', 0))})"

    def size(key: str) -> int:
        value = parallelism.get(key)
        if value in (None, "", 0):
            return 0
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InputError(where, f"{key} is {str(value)[:40]!r}, not a number") from None
        from vllm_doctor.bounds import MAX_GPUS, MAX_NODES

        if not 0 <= number <= max(MAX_GPUS, MAX_NODES):
            raise InputError(where, f"{key} is {number}: no deployment has that many")
        return number

    tensor, data, local, workers = (size(k) for k in ("tensor", "data", "dataLocal", "workers"))
    if local:
        data_local = local
    elif data and workers:
        if data % workers:
            raise InputError(where, "data must be a multiple of workers (the chart fails)")
        data_local = data // workers
    else:
        data_local = data or 1
    if workers:
        group = workers
    elif data and local:
        if data % local:
            raise InputError(where, "data must be a multiple of dataLocal (the chart fails)")
        group = data // local
    else:
        group = 1
    return {
        "tensor": tensor or 1,
        "data": data or (local * workers if local and workers else local) or 1,
        "data_local": data_local,
        "workers": group,
        # before v0.3.6 (#159) the chart made `data` the pods of a group, each with `tensor`
        # GPUs; since, `data` alone is the ranks of one pod: the values do not say which
        "older_reading": data > 1 and not local and not workers,
    }


def _llm_d(doc: dict, release: str) -> list[dict]:
    routing = mapping_at(doc, "routing")
    proxy = mapping_at(routing, "proxy")
    accelerator = mapping_at(doc, "accelerator")
    kind = str(accelerator.get("type") or "nvidia")
    resource = (
        None if kind == "cpu" else (accelerator.get("resources") or {}).get(kind, "nvidia.com/gpu")
    )
    multinode = doc.get("multinode") is True
    out: list[dict] = []
    for role in LLM_D_ROLES:
        spec = doc.get(role)
        if not isinstance(spec, dict) or spec.get("create") is False:
            continue
        at = getattr(spec, "line", 0)
        sizes = _llm_d_parallelism(spec)
        tensor, data, local = sizes["tensor"], sizes["data"], sizes["data_local"]
        par_line = _line(spec, "parallelism", at)
        undecided = (
            f"line {par_line}: parallelism.data {data} without workers or dataLocal is "
            f"{data} pods of {tensor} GPU(s) for llm-d-modelservice charts before v0.3.6 "
            f"and one pod of {data * tensor} for later ones; the values do not name the "
            "chart's version — set parallelism.workers and dataLocal, or check what it "
            "renders (`helm template ... | vllm-doctor check --manifest -`)"
            if sizes["older_reading"]
            else None
        )
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
            # the user's variables, then the chart's parallelism ones (the last of a name wins)
            env = list(container.get("env") or ())
            own_local = [
                e.get("value")
                for e in env
                if isinstance(e, dict) and e.get("name") == "DP_SIZE_LOCAL"
            ]
            # older charts set no DP_SIZE_LOCAL: the container's own holds there, the chart's
            # (after it) since v0.3.6; a script's $DP_SIZE_LOCAL is then the chart version's
            local_depends = undecided or (own_local and str(own_local[-1]) != str(local))
            env_lines = list(getattr(container.get("env"), "lines", [line] * len(env)))
            for name, value in (("DP_SIZE", data), ("TP_SIZE", tensor), ("DP_SIZE_LOCAL", local)):
                if name == "DP_SIZE_LOCAL" and local_depends:
                    env.append(_node(par_line, name=name, valueFrom="the chart's version"))
                else:
                    env.append(_node(par_line, name=name, value=str(value)))
                env_lines.append(par_line)
            node["env"] = _seq(line, env)
            node["env"].lines = env_lines
            for key in ("volumeMounts",):
                if container.get(key) is not None:
                    node[key] = container[key]
            resources = mapping_at(container, "resources")
            gpus = tensor * local
            limits = dict(resources.get("limits") or {})
            if resource and gpus >= 1 and resource not in limits and not undecided:
                limits[resource] = str(gpus)
            block = _node(_line(container, "resources", line), **limits)
            block.lines.update(getattr(resources.get("limits"), "lines", {}))
            node["resources"] = _node(block.line, limits=block, requests=block)
            containers.append(node)
        pod = _node(at, containers=_seq(at, containers))
        if isinstance(spec.get("volumes"), list):
            pod["volumes"] = spec["volumes"]
            pod.lines["volumes"] = _line(spec, "volumes", at)
        name = f"{release}-llm-d-modelservice-{role}"
        if multinode:
            rendered = Rendered.of(_leader_worker_set(name, pod, at, sizes["workers"], par_line))
            if undecided:  # the reader leaves these open (manifest._container)
                rendered.undecided = {"nodes": undecided, "gpus": undecided}
                del rendered["spec"]["leaderWorkerTemplate"]["size"]
        else:
            rendered = Rendered.of(_deployment(name, pod, at))
            if undecided:
                rendered.undecided = {"gpus": undecided}
        out.append(rendered)
    return out


class Rendered(LineDict):
    """An object a chart renders from values, with the facts those values leave to the chart's
    version (``undecided``: "nodes"/"gpus" -> why), which the reader leaves undecided."""

    undecided: dict[str, str]
    nodes: Any = None  # a Placed: the pods of the group, where the chart's values state them

    @classmethod
    def of(cls, obj: dict) -> Rendered:
        out = cls(obj)
        out.line, out.lines, out.undecided = getattr(obj, "line", 0), getattr(obj, "lines", {}), {}
        return out


def _leader_worker_set(name: str, pod: dict, line: int, size: int, size_line: int) -> dict:
    """The chart's ``decode-lws.yaml``/``prefill-lws.yaml``: every pod of the group from one
    template (``workerTemplate``; the leader is its first pod)."""
    group = _node(size_line, size=size, workerTemplate=_node(line, spec=pod))
    group.lines["workerTemplate"] = line
    return _node(
        line,
        apiVersion="leaderworkerset.x-k8s.io/v1",
        kind="LeaderWorkerSet",
        metadata=_node(line, name=name),
        spec=_node(line, leaderWorkerTemplate=group),
    )
