"""The fleet command without a Ray cluster, through the real command: without Ray, `fleet
--ray` and `probe --ray` are one line and exit 2; `--k8s-job` prints Kubernetes objects the API
server accepts (a Job, or a DaemonSet) for a Deployment, a StatefulSet and a LeaderWorkerSet;
every output format names the node of each finding; `--manifest` beside `--facts` compares the
declared GPUs per pod with what the nodes see (the LeaderWorkerSet of the corpus, and FLEET018
for a pod that sees more than it asks); `--facts -` reads `kubectl logs --prefix` as the printed
Job's header pipes it, each node named by its pod.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "tests" / "fixtures" / "manifests"
DOCTOR = [sys.executable, "-m", "vllm_doctor"]
# `import ray` fails as it does where Ray is not installed
WITHOUT_RAY = (
    "import runpy, sys; sys.modules['ray'] = None; sys.argv = ['vllm-doctor', *sys.argv[1:]]; "
    "runpy.run_module('vllm_doctor', run_name='__main__')"
)


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DOCTOR, *args], capture_output=True, text=True, timeout=120, input=stdin, cwd=ROOT
    )


@pytest.mark.parametrize("command", [["fleet", "--ray"], ["probe", "--ray", "auto"]])
def test_without_ray_the_ray_commands_are_one_line_and_exit_2(command):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, *command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert 'pip install "vllm-preflight[ray]"' in done.stderr
    assert "Traceback" not in done.stderr and not done.stdout


# -- Kubernetes --------------------------------------------------------------------------------

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?")
KINDS = {"Job": "batch/v1", "DaemonSet": "apps/v1"}


def api_problems(obj: dict[str, Any]) -> list[str]:
    """What the Kubernetes API server's validation refuses in a Job or DaemonSet (the rules of
    k8s.io/kubernetes pkg/apis/{batch,apps,core}/validation these objects can break)."""
    problems = []
    kind = obj.get("kind")
    if KINDS.get(kind) != obj.get("apiVersion"):
        return [f"{obj.get('apiVersion')}/{kind} is not a Job or DaemonSet"]
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if not DNS_LABEL.fullmatch(name) or len(name) > 63:  # the Job's name labels its pods
        problems.append(f"metadata.name {name!r} is not a DNS label")
    if not DNS_LABEL.fullmatch(meta.get("namespace", "")):
        problems.append("metadata.namespace is not a DNS label")
    for key, value in (meta.get("annotations") or {}).items():
        if not isinstance(value, str):
            problems.append(f"annotation {key} is not a string")
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    for key, value in {**labels, **(meta.get("labels") or {})}.items():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.fullmatch(value):
            problems.append(f"label {key}={value!r} is not a label value")
    pod = template.get("spec") or {}
    if kind == "DaemonSet":
        wanted = (spec.get("selector") or {}).get("matchLabels") or {}
        if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
            problems.append("spec.selector does not match the template's labels")
        if pod.get("restartPolicy", "Always") != "Always":
            problems.append("a DaemonSet's restartPolicy must be Always")
    else:
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            problems.append("a Job's restartPolicy must be Never or OnFailure")
        for field in ("completions", "parallelism", "backoffLimit", "activeDeadlineSeconds"):
            value = spec.get(field)
            if value is not None and (not isinstance(value, int) or value < 0):
                problems.append(f"spec.{field} {value!r} is not a count")
        if spec.get("completionMode") == "Indexed" and not spec.get("completions"):
            problems.append("an Indexed Job needs completions")
    volumes = {v.get("name") for v in pod.get("volumes") or []}
    containers = pod.get("containers") or []
    if not containers:
        problems.append("the pod has no container")
    for c in containers:
        if not DNS_LABEL.fullmatch(c.get("name", "")):
            problems.append(f"container name {c.get('name')!r} is not a DNS label")
        if not isinstance(c.get("image"), str) or not c["image"]:
            problems.append(f"container {c.get('name')} has no image")
        if not all(isinstance(w, str) for w in c.get("command") or []):
            problems.append(f"container {c.get('name')}'s command has a word that is no string")
        for mount in c.get("volumeMounts") or []:
            if mount.get("name") not in volumes:
                problems.append(f"volumeMount {mount.get('name')} names no volume of the pod")
        for env in c.get("env") or []:
            if not env.get("name") or ("value" in env) == ("valueFrom" in env):
                problems.append(f"env {env.get('name')} needs a name and one of value/valueFrom")
            if "value" in env and not isinstance(env["value"], str):
                problems.append(f"env {env['name']} has a value that is no string")
        for amount in ((c.get("resources") or {}).get("limits") or {}).values():
            if not QUANTITY.fullmatch(str(amount)):
                problems.append(f"resource quantity {amount!r} does not parse")
    return problems


WORKLOADS = [
    # (manifest, NAMESPACE/WORKLOAD, pods it runs, GPUs per pod, serve words it carries)
    ("corpus/vllm-docs-k8s-nvidia.yaml", "default/mistral-7b", 1, "1", "mistralai/Mistral-7B"),
    ("scenario/statefulset-from-vllm-docs.yaml", "default/mistral-7b", 2, "2", "mistralai/"),
    ("corpus/lws-gpu-vllm.yaml", "default/vllm", 4, "8", "meta-llama/Llama-3.1-405B-Instruct"),
]


@pytest.mark.parametrize(("manifest", "workload", "pods", "gpus", "model"), WORKLOADS)
@pytest.mark.parametrize("kind", ["job", "daemonset"])
def test_k8s_job_prints_an_object_the_api_server_accepts(
    manifest, workload, pods, gpus, model, kind
):
    done = _run(
        "fleet", "--k8s-job", workload, "--manifest", str(MANIFESTS / manifest), "--k8s-kind", kind
    )
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d is not None]
    assert len(docs) == 1
    obj = docs[0]
    assert api_problems(obj) == []
    assert obj["kind"] == {"job": "Job", "daemonset": "DaemonSet"}[kind]
    container = obj["spec"]["template"]["spec"]["containers"][0]
    words = container["command"] if kind == "job" else container["command"][-1].split()
    assert words[:4] == ["vllm-doctor", "facts", "--format", "json"]
    assert any(model in w for w in words)  # the workload's own serve line
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["VLLM_DOCTOR_COLLECTED_BY"] == kind
    if kind == "job":
        assert obj["spec"]["completions"] == obj["spec"]["parallelism"] == pods
        assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
    else:
        assert "resources" not in container and env["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_a_statefulsets_per_pod_claims_are_left_out_and_said():
    done = _run(
        "fleet",
        "--k8s-job",
        "default/mistral-7b",
        "--manifest",
        str(MANIFESTS / "scenario/statefulset-from-vllm-docs.yaml"),
    )
    obj = yaml.safe_load(done.stdout)
    mounts = obj["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert [m["name"] for m in mounts] == ["shm"]
    assert "cache-volume" in obj["metadata"]["annotations"]["vllm-doctor/mounts-left-out"]


def test_the_api_checks_catch_what_the_server_refuses():
    bad = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "Bad_Name", "namespace": "default"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Always",
                    "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v"}]}],
                }
            }
        },
    }
    found = api_problems(bad)
    assert len(found) == 3 and "restartPolicy" in found[1] and "volumeMount v" in found[2]


# -- every format names the node of each finding ------------------------------------------------

# three real `vllm-doctor facts --format json` runs (H200 hosts of 4, 2 and 1 GPUs)
FACTS = [
    ROOT / "bench/probes/h200x4-2026-11-28/facts-h200x4.json",
    ROOT / "bench/probes/facts-h200x2.json",
    ROOT / "bench/probes/h200x1-2026-11-29b/facts-h200x1.json",
]


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> Path:
    """Three real facts documents, the third edited to another driver branch and a
    VLLM_ATTENTION_BACKEND (ENV004 on that node alone)."""
    folder = tmp_path_factory.mktemp("docs")
    shutil.copy(FACTS[0], folder / "a.json")
    shutil.copy(FACTS[1], folder / "b.json")
    edited = json.loads(FACTS[2].read_text())
    edited["facts"]["driver.version"]["value"] = "570.195.03"
    edited["facts"]["env.VLLM_ATTENTION_BACKEND"] = {"value": "FLASHINFER", "source": "environment"}
    (folder / "c.json").write_text(json.dumps(edited))
    return folder


def _sarif(out: str) -> list[str]:
    return [r["message"]["text"] for run in json.loads(out)["runs"] for r in run["results"]]


def _gitlab(out: str) -> list[str]:
    return [issue["description"] for issue in json.loads(out)]


def _github(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("::")]


def _junit(out: str) -> list[str]:
    """Each target is a test suite named by its node; a finding is a test case with words."""
    return [
        f"{suite.get('name')}: {case.get('name')} "
        + " ".join(part.get("message", "") + (part.text or "") for part in case)
        for suite in ET.fromstring(out).iter("testsuite")
        for case in suite.iter("testcase")
        if len(case)
    ]


def _text(out: str) -> list[str]:
    """The fleet's part, then one part per node (its heading names it)."""
    return out.split("\nNode ")


def _markdown(out: str) -> list[str]:
    """One part per target, from its heading (`### NAME (WHERE)`; a finding's heading names its
    code in backticks) to the next target's."""
    return re.split(r"^### (?!`)", out, flags=re.MULTILINE)[1:]


# the two rules the documents draw (the others would only cost time)
ONLY = ("--select", "FLEET004,ENV004")


def test_every_format_names_the_node_of_each_finding(documents):
    done = _run("fleet", "--facts", str(documents), *ONLY, "--format", "json")
    doc = json.loads(done.stdout)
    found = {(t["target"]["subject"], f["code"]) for t in doc["targets"] for f in t["findings"]}
    assert found == {("fleet of 3 nodes", "FLEET004"), ("node c", "ENV004")}
    for target in doc["targets"]:
        for finding in target["findings"]:
            assert finding["node"] == target["target"]["subject"]
    fleet = next(t for t in doc["targets"] if t["target"]["kind"] == "fleet")
    branches = next(
        e["value"] for e in fleet["findings"][0]["evidence"] if e["fact"].endswith(".nodes")
    )
    assert sorted(branches) == ["570: c", "580: a, b"]
    for fmt, messages in {
        "sarif": _sarif,
        "gitlab": _gitlab,
        "github": _github,
        "junit": _junit,
        "text": _text,
        "markdown": _markdown,
    }.items():
        said = messages(_run("fleet", "--facts", str(documents), *ONLY, "--format", fmt).stdout)
        env004 = [m for m in said if "VLLM_ATTENTION_BACKEND" in m]
        assert env004, (fmt, said)
        by_part = fmt in ("text", "markdown")  # the node heads its part; other formats: each line
        assert all(m.startswith("c (") if by_part else "node c" in m for m in env004), (
            fmt,
            env004,
        )
        driver = [m for m in said if "driver" in m.lower() and "branch" in m.lower()]
        assert driver, (fmt, said)
        assert all("570: c" in m for m in driver), (fmt, driver)
        if fmt != "text":
            assert all("fleet of 3 nodes" in m for m in driver), (fmt, driver)


# -- the workload's manifest beside the documents -----------------------------------------------


def test_manifest_gpus_per_pod_against_what_the_nodes_see_on_the_lws_corpus(documents):
    done = _run(
        "fleet",
        "--facts",
        str(documents),
        "--manifest",
        str(MANIFESTS / "corpus/lws-gpu-vllm.yaml"),
        "--select",
        "FLEET",
        "--format",
        "json",
    )
    doc = json.loads(done.stdout)
    fleet = next(t for t in doc["targets"] if t["target"]["kind"] == "fleet")
    notes = fleet["notes"]
    # the LeaderWorkerSet asks 8 GPUs per pod (leader and workers) in groups of 2 pods
    assert "a sees 4 GPUs, the pod asks for 8" in notes
    assert "b sees 2 GPUs, the pod asks for 8" in notes
    assert "3 nodes answered, one group of the workload has 2 pods" in notes
    assert not any(f["code"] == "FLEET018" for f in fleet["findings"])  # fewer, not more
    node = next(t for t in doc["targets"] if t["target"]["subject"] == "node a")
    assert node["facts"]["facts"]["deploy.gpus_per_pod"]["value"] == 8


def test_a_pod_that_sees_more_gpus_than_it_asks_is_fleet018(documents):
    done = _run(
        "fleet",
        "--facts",
        str(documents),
        "--manifest",
        str(MANIFESTS / "corpus/vllm-docs-k8s-nvidia.yaml"),
        "--select",
        "FLEET",
        "--format",
        "json",
    )
    doc = json.loads(done.stdout)
    fleet = next(t for t in doc["targets"] if t["target"]["kind"] == "fleet")
    finding = next(f for f in fleet["findings"] if f["code"] == "FLEET018")
    nodes = next(
        e["value"] for e in finding["evidence"] if e["fact"] == "fleet.pod_gpus_beyond_request"
    )
    # c (the one-GPU host) sees what its pod asks for
    assert nodes == [
        "a: sees 4 GPUs, the pod asks for 1",
        "b: sees 2 GPUs, the pod asks for 1",
    ]


def test_kubectl_logs_prefix_on_stdin_names_each_node_by_its_pod(documents):
    """`kubectl logs -l ... --prefix` as the printed Job's header pipes it: every line led by
    `[pod/NAME/CONTAINER] `, two pods' lines interleaved (as `-f` prints them), a line of the
    container's own between the documents."""
    pods = {
        "vllm-doctor-facts-mistral-7b-0-x7k2p": (documents / "a.json").read_text(),
        "vllm-doctor-facts-mistral-7b-1-q9w4d": (documents / "b.json").read_text(),
        "vllm-doctor-facts-mistral-7b-2-m3c8z": (documents / "c.json").read_text(),
    }
    streams = [
        [f"[pod/{pod}/vllm-doctor-facts] {line}" for line in text.splitlines()]
        for pod, text in pods.items()
    ]
    streams[0].insert(0, "[pod/vllm-doctor-facts-mistral-7b-0-x7k2p/vllm-doctor-facts] WARNING x")
    first, second, third = streams
    woven = [line for pair in zip(first, second, strict=False) for line in pair]
    woven += first[len(second) :] + second[len(first) :] + third
    stream = "\n".join(woven) + "\n"
    done = _run(
        "fleet", "--facts", "-", *ONLY, "--fail-on", "warning", "--format", "json", stdin=stream
    )
    assert done.returncode == 1, done.stderr  # FLEET004 is a warning
    doc = json.loads(done.stdout)
    assert [n["label"] for n in doc["fleet"]["nodes"]] == list(pods)
    fleet = next(t for t in doc["targets"] if t["target"]["kind"] == "fleet")
    branches = next(
        e["value"] for e in fleet["findings"][0]["evidence"] if e["fact"].endswith(".nodes")
    )
    a, b, c = pods
    assert sorted(branches) == [f"570: {c}", f"580: {a}, {b}"]
    found = {(t["target"]["subject"], f["code"]) for t in doc["targets"] for f in t["findings"]}
    assert found == {("fleet of 3 nodes", "FLEET004"), (f"node {c}", "ENV004")}


def test_a_node_whose_pods_preload_hami_core_is_hw050_at_tp2(tmp_path):
    """A real document, edited as `vllm-doctor facts` reads a pod that HAMi's device plugin
    gave its GPUs (/etc/ld.so.preload names libvgpu.so): HW050 on that node, not the other."""
    shutil.copy(FACTS[1], tmp_path / "plain.json")
    edited = json.loads(FACTS[1].read_text())
    edited["facts"]["platform.cuda_interposer"] = {
        "value": "hami-core",
        "source": "machine",
        "detail": "/etc/ld.so.preload names /usr/local/vgpu/libvgpu.so",
    }
    (tmp_path / "hami.json").write_text(json.dumps(edited))
    line = ("--", "vllm", "serve", "Qwen/Qwen2.5-3B-Instruct", "--tensor-parallel-size", "2")
    from doctor_forks import doctor_run

    args = ("fleet", "--facts", str(tmp_path), "--select", "HW050", "--format", "json", *line)
    doc = json.loads(doctor_run(*args, cwd=ROOT).stdout)
    found = {(t["target"]["subject"], f["code"]) for t in doc["targets"] for f in t["findings"]}
    assert found == {("node hami", "HW050")}


# HAMi's own example of vLLM across two vGPUs (Project-HAMi/HAMi examples/nvidia/
# vllm_cross_vgpu.yaml at 4707fb02), trimmed to the Deployment's pod
HAMI_EXAMPLE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-cross-vgpu
spec:
  replicas: 1
  template:
    spec:
      schedulerName: default-scheduler
      containers:
        - name: vllm
          image: vllm/vllm-openai:latest
          command: ["/bin/sh", "-c"]
          args:
            - >
              vllm serve Qwen/Qwen2.5-3B-Instruct --host 0.0.0.0 --port 8000
              --tensor-parallel-size 2 --disable-custom-all-reduce
          resources:
            limits:
              cpu: "8"
              memory: 20Gi
              nvidia.com/gpu: 2
              nvidia.com/gpumem-percentage: 30
              nvidia.com/gpucores: 30
"""


def test_the_facts_job_asks_for_the_vgpu_shares_the_workload_asks_for(tmp_path):
    """Under HAMi the facts pod must get what the workload's pod gets (libvgpu.so preloaded,
    the same memory and core shares), so its documents show HW050's fact as vLLM will see it."""
    from doctor_forks import doctor_run

    path = tmp_path / "vllm.yaml"
    path.write_text(HAMI_EXAMPLE, encoding="utf-8")
    done = doctor_run("fleet", "--k8s-job", "default/vllm-cross-vgpu", "--manifest", str(path))
    assert done.returncode == 0, done.stderr
    job = yaml.safe_load(done.stdout)
    assert api_problems(job) == []
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {
        "nvidia.com/gpu": 2,
        "nvidia.com/gpumem-percentage": 30,
        "nvidia.com/gpucores": 30,
    }
