"""`fleet --k8s-job NAMESPACE/WORKLOAD --manifest FILE`: a Kubernetes Job (or DaemonSet) that runs
`vllm-doctor facts --format json` once on every pod of a Deployment, StatefulSet or
LeaderWorkerSet, in the workload's own image and pod shape.

The Job copies what decides where and how the workload's pods run: the pod template's node
selector, tolerations, affinity, volumes, host network, runtime class, image pull secrets and
service account, and the vLLM container's image, environment, volume mounts and GPU requests, so
each of its pods lands where a workload pod would and sees what it would see. Its pods are as
many as the workload's (replicas, times the group size of a LeaderWorkerSet), run together
(``parallelism`` = ``completions``), one per node when the workload spans nodes (a required
pod anti-affinity on the host name), and each prints one facts document; ``kubectl logs
--prefix`` collects them and ``vllm-doctor fleet --facts -`` judges them. Run it before the
workload is scheduled (or scaled to zero): it asks for the same GPUs.

A DaemonSet (``--k8s-kind daemonset``) runs on every node the workload's selector, affinity and
tolerations admit, asks for no GPU (``NVIDIA_VISIBLE_DEVICES=all`` shows the node's GPUs to the
container toolkit) and sleeps after printing, so it can run beside the workload.

The image must hold the doctor: the repository's Dockerfile builds the vLLM image with it
(``--image`` names that image; default the workload's own).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.serveline.target import GPU_RESOURCES, VGPU_RESOURCES

WORKLOADS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
POD_FIELDS = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "volumes",
    "hostNetwork",
    "hostIPC",
    "runtimeClassName",
    "imagePullSecrets",
    "serviceAccountName",
    "priorityClassName",
    "schedulerName",
)
CONTAINER_FIELDS = ("env", "envFrom", "volumeMounts", "securityContext")
# the GPU resources a facts pod asks for as the workload's pod does: whole GPUs, and a vGPU
# device plugin's shares (HAMi's and volcano's give their pods HAMi-core's libvgpu.so, which
# the facts then show, and volcano.sh/vgpu-number is how such a pod gets a GPU at all)
GPU_KEYS = tuple(dict.fromkeys((*GPU_RESOURCES, *VGPU_RESOURCES)))
HOST_KEY = "kubernetes.io/hostname"
NAME_LIMIT = 63


def _workload(documents: list[Any], wanted: str) -> dict[str, Any]:
    kind_wanted, _, name_wanted = wanted.rpartition("/")
    found = []
    for doc in documents:
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for item in items or []:
            if not isinstance(item, dict) or item.get("kind") not in WORKLOADS:
                continue
            name = (item.get("metadata") or {}).get("name")
            if name == name_wanted and kind_wanted in ("", item["kind"]):
                found.append(item)
    if not found:
        raise InputError(
            "--k8s-job", f"no {' or '.join(WORKLOADS)} named {wanted!r} in the manifest"
        )
    return found[0]


def _templates(workload: dict[str, Any]) -> tuple[list[dict[str, Any]], int, bool]:
    """The pod templates, how many pods the workload runs, and whether a group spans nodes."""
    spec = workload.get("spec") or {}
    replicas = spec.get("replicas", 1)
    replicas = replicas if isinstance(replicas, int) and replicas > 0 else 1
    if workload["kind"] == "LeaderWorkerSet":
        lws = spec.get("leaderWorkerTemplate") or {}
        size = lws.get("size", 1)
        size = size if isinstance(size, int) and size > 0 else 1
        worker = lws.get("workerTemplate") or {}
        leader = lws.get("leaderTemplate") or worker
        return [leader, worker], replicas * size, size > 1
    return [spec.get("template") or {}], replicas, replicas > 1


def _vllm_container(pod: dict[str, Any], name: str | None) -> dict[str, Any]:
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    for container in containers:
        if name is None or container.get("name") == name:
            return container
    if not containers:
        raise InputError("--manifest", "the workload's pod template has no container")
    return containers[0]


def _job_name(workload: str) -> str:
    base = re.sub(r"[^a-z0-9-]", "-", f"vllm-doctor-facts-{workload.lower()}")
    return base[:NAME_LIMIT].rstrip("-")


def build_manifest(
    namespace: str,
    workload: dict[str, Any],
    serve_words: list[str],
    container_name: str | None,
    kind: str = "job",
    image: str | None = None,
) -> dict[str, Any]:
    templates, pods, spans = _templates(workload)
    pod = (templates[0].get("spec") or {}) if templates else {}
    container = _vllm_container(pod, container_name)
    name = _job_name(workload["metadata"]["name"])
    labels = {"app.kubernetes.io/name": "vllm-doctor-facts", "vllm-doctor/workload": name}
    spec: dict[str, Any] = {k: pod[k] for k in POD_FIELDS if k in pod}
    if spans or kind == "daemonset":
        anti = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": HOST_KEY}
            ]
        }
        affinity = dict(spec.get("affinity") or {})
        if kind == "job":
            affinity["podAntiAffinity"] = anti
        spec["affinity"] = affinity
    env = list(container.get("env") or [])
    env += [
        {
            "name": "VLLM_DOCTOR_NODE_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        },
        {"name": "VLLM_DOCTOR_NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        # a DaemonSet's pod asks for no GPU and sees the node's: its count is not the pod's
        {"name": "VLLM_DOCTOR_COLLECTED_BY", "value": kind},
    ]
    command = ["vllm-doctor", "facts", "--format", "json"]
    if serve_words:
        command += ["--", *serve_words]
    facts_container: dict[str, Any] = {
        "name": "vllm-doctor-facts",
        "image": image or container.get("image"),
        **{k: container[k] for k in CONTAINER_FIELDS if k in container},
        "env": env,
    }
    # a StatefulSet's per-pod claims (volumeClaimTemplates) are no volume of the pod template:
    # the Job's pods cannot name them, so their mounts stay out (the API server would refuse)
    volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict)}
    mounts = [m for m in facts_container.get("volumeMounts") or [] if isinstance(m, dict)]
    left_out = [str(m.get("name")) for m in mounts if m.get("name") not in volumes]
    if "volumeMounts" in facts_container:
        facts_container["volumeMounts"] = [m for m in mounts if m.get("name") in volumes]
        if not facts_container["volumeMounts"]:
            del facts_container["volumeMounts"]
    resources = container.get("resources") or {}
    if kind == "job":
        gpu = {k: v for k, v in (resources.get("limits") or {}).items() if k in GPU_KEYS}
        if gpu:
            facts_container["resources"] = {"limits": gpu}
        facts_container["command"] = command
        spec["restartPolicy"] = "Never"
    else:
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
        facts_container["command"] = [
            "sh",
            "-c",
            " ".join(_shell_quote(w) for w in command) + "; exec sleep infinity",
        ]
        spec["restartPolicy"] = "Always"
    spec["containers"] = [facts_container]
    template = {"metadata": {"labels": dict(labels)}, "spec": spec}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if left_out:
        meta["annotations"] = {
            "vllm-doctor/mounts-left-out": ", ".join(left_out)
            + " (the workload's per-pod volume claims: no volume of its pod template)"
        }
    if kind == "daemonset":
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta,
            "spec": {"selector": {"matchLabels": dict(labels)}, "template": template},
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "completions": pods,
            "parallelism": pods,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "activeDeadlineSeconds": 900,
            "ttlSecondsAfterFinished": 3600,
            "template": template,
        },
    }


def _shell_quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


def print_manifest(
    wanted: str, manifest: str | None, kind: str, image: str | None, output: Path | None
) -> int:
    from vllm_doctor import yaml_io
    from vllm_doctor.report.output import write_report
    from vllm_doctor.serveline.manifest import read_targets
    from vllm_doctor.serveline.manifest import read_text as read_manifest

    if kind not in ("job", "daemonset"):
        raise InputError("--k8s-kind", f"{kind!r} is not job or daemonset")
    namespace, _, workload_name = wanted.partition("/")
    if not namespace or not workload_name:
        raise InputError("--k8s-job", f"{wanted!r} is not NAMESPACE/WORKLOAD")
    if not manifest:
        raise InputError(
            "--k8s-job",
            "needs the workload's manifest (--manifest FILE, or - with `kubectl get "
            f"deployment {workload_name} -n {namespace} -o yaml | vllm-doctor fleet "
            f"--k8s-job {wanted} --manifest -`): the Job runs in its image, on its nodes, "
            "with its volumes and environment",
        )
    text = read_manifest(manifest)
    documents = yaml_io.safe_load_all_with_lines(text)
    workload = _workload(documents, workload_name)
    words: list[str] = []
    container_name = None
    for target in read_targets(manifest, text):
        if workload["metadata"]["name"] in target.name and target.kind == workload["kind"]:
            words = [w for w in target.words if w]
            container_name = target.name.rsplit(" ", 1)[-1]
            break
    job = build_manifest(namespace, workload, words, container_name, kind, image)
    name = job["metadata"]["name"]
    selector = f"vllm-doctor/workload={name}"
    head = [
        f"# vllm-doctor: facts of every pod of {workload['kind']} {namespace}/{workload_name}",
        "# kubectl apply -f THIS_FILE",
        (
            f"# kubectl wait -n {namespace} --for=condition=complete job/{name} --timeout=900s"
            if kind == "job"
            else f"# kubectl rollout status -n {namespace} daemonset/{name}"
        ),
        f"# kubectl logs -n {namespace} -l {selector} --prefix --tail=-1 "
        f"| vllm-doctor fleet --facts - --manifest {manifest if manifest != '-' else 'WORKLOAD.yaml'}",
        f"# kubectl delete -n {namespace} {kind}/{name}",
    ]
    import json

    import yaml

    plain = json.loads(json.dumps(job))  # the manifest's line-carrying mappings as plain data
    body = yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)
    write_report("\n".join(head) + "\n" + body, output)
    return 0
