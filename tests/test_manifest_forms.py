"""The forms a production deployment takes (issue 33): compose GPU requests, image and install
versions, workload kinds, unusual YAML, Helm values, a manifest joined with a serve line; and
the corpus of real deployment files of tests/fixtures/manifests/deployments."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from doctor_forks import doctor_run
from scripts import load_script

from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.serveline import manifest

HERE = Path(__file__).parent
DEPLOYMENTS = HERE / "fixtures" / "manifests" / "deployments"


def facts_of(text: str, name: str = "m.yaml", index: int = 0):
    target = manifest.read_targets(name, text)[index]
    return target, collect_facts(CollectOptions(manifest_target=target, probe_machine=False))


COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.10.1
    command: --model Qwen/Qwen3-8B --tensor-parallel-size 2
{gpus}"""


@pytest.mark.parametrize(
    "gpus, count",
    [
        (
            "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: 2, "
            "capabilities: [gpu]}]}}}",
            2,
        ),
        (
            "    deploy: {resources: {reservations: {devices: [{capabilities: [gpu], "
            "count: '4'}]}}}",
            4,
        ),
        (
            "    deploy: {resources: {reservations: {devices: [{driver: nvidia, "
            "device_ids: ['0', '1', '3'], capabilities: [gpu]}]}}}",
            3,
        ),
        (
            "    deploy: {resources: {reservations: {devices: [{capabilities: [gpu], "
            "device_ids: ['0,1,2,3']}]}}}",
            4,
        ),
        ("    gpus: [{count: 2}]", 2),
        ("    devices: [nvidia.com/gpu=0, nvidia.com/gpu=1]", 2),
        ("    runtime: nvidia\n    environment:\n      - NVIDIA_VISIBLE_DEVICES=1,2", 2),
        # every GPU of the host: a number the file does not state
        (
            "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, "
            "capabilities: [gpu]}]}}}",
            None,
        ),
        (
            "    deploy: {resources: {reservations: {devices: [{driver: nvidia, "
            "capabilities: [gpu]}]}}}",
            None,
        ),
        ("    gpus: all", None),
        ("    devices: [nvidia.com/gpu=all]", None),
        ("    runtime: nvidia\n    environment: {NVIDIA_VISIBLE_DEVICES: all}", None),
    ],
)
def test_compose_gpus_in_every_form(gpus, count):
    _, facts = facts_of(COMPOSE.format(gpus=gpus), "compose.yaml")
    assert facts.value("deploy.gpus_per_pod") == count
    if count is None:
        assert "all the host's GPUs" in facts.why_missing("deploy.gpus_per_pod")


def test_compose_anchors_merge_keys_and_an_interpolated_image():
    text = """x-gpu: &gpu
  deploy: {resources: {reservations: {devices: [{driver: nvidia, count: 2, capabilities: [gpu]}]}}}
services:
  vllm:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.6.6}
    <<: *gpu
    command: --model ${MODEL:-Qwen/Qwen2.5-1.5B-Instruct} --tensor-parallel-size 2
"""
    target, facts = facts_of(text, "compose.yaml")
    assert facts.value("deploy.gpus_per_pod") == 2
    assert facts.value("serve.tensor_parallel_size") == 2
    assert "vllm.version" not in facts
    assert "the host's environment or .env" in facts.why_missing("vllm.version")
    assert target.unresolved == {"model": "${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}"}


def test_a_complex_yaml_key_is_read_not_refused():
    # kubernetes-engine-samples' Secret leaves `{{HF_TOKEN}}` for the user to fill in
    text = """apiVersion: apps/v1
kind: Deployment
metadata: {name: v}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.0
        args: [--model=m, --tensor-parallel-size=2]
        resources: {limits: {nvidia.com/gpu: 2}}
---
apiVersion: v1
kind: Secret
stringData:
  hf_api_token: {{HF_TOKEN}}
? [a, b]
: c
"""
    _, facts = facts_of(text)
    assert facts.value("serve.tensor_parallel_size") == 2


@pytest.mark.parametrize(
    "image, version",
    [
        ("aibrix/vllm-openai:v0.7.3.self.post1", "0.7.3"),
        (
            "aibrix-container-registry-cn-beijing.cr.volces.com/aibrix/vllm-openai-aibrix-kvcache"
            "-nixl:v0.10.2-nixl-0.7.1-ucx-1.19.0",
            "0.10.2",
        ),
        ("registry.example.com/aibrix/vllm/vllm-openai:v0.9.2", "0.9.2"),  # a mirror
        ("quay.io/rh-aiservices-bu/vllm-openai-ubi9:0.4.2", "0.4.2"),
        ("nvcr.io/nvidia/vllm:25.10-py3", "0.10.2"),
        ("nvcr.io/nvidia/vllm:26.05-py3", "0.20.1"),
        ("nvcr.io/nvidia/vllm:19.01-py3", None),  # not in the table: never guessed
        ("vllm/vllm-openai:v0.6.3.post1", "0.6.3.post1"),
        ("lmcache/vllm-openai:v0.3.5", None),
        ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", None),
        ("someone/vllm-openai:v0.8.0", None),  # an unknown build: its tag may be anything
    ],
)
def test_vendor_image_versions(image, version):
    assert manifest.image_vllm_version(image)[0] == version


@pytest.mark.parametrize(
    "run, version",
    [
        ("pip install vllm==0.10.1+gptoss", "0.10.1+gptoss"),
        ("python3 -m pip install --no-cache-dir 'vllm[tensorizer]==0.9.2' ray", "0.9.2"),
        ("uv pip install --system vllm==0.11.0 --torch-backend=auto", "0.11.0"),
        ("pip install vllm", None),
        ("pip install -U git+https://github.com/vllm-project/vllm.git", None),
    ],
)
def test_a_dockerfile_install_names_the_version(run, version):
    text = (
        f"FROM nvidia/cuda:12.8.0-devel-ubuntu22.04\nRUN {run}\n"
        'ENTRYPOINT ["vllm", "serve", "Qwen/Qwen3-8B"]\n'
    )
    _, facts = facts_of(text, "Dockerfile")
    assert facts.value("vllm.version") == version
    if version is None:
        assert "unpinned" in facts.why_missing("vllm.version")


def test_an_install_overrides_the_base_image_and_an_old_version_is_a_fact():
    text = 'FROM vllm/vllm-openai:v0.10.0\nRUN pip install vllm==0.4.2\nCMD ["--model", "m"]\n'
    _, facts = facts_of(text, "Dockerfile")
    assert facts.value("vllm.version") == "0.4.2"


def test_an_entrypoint_that_takes_docker_runs_arguments_is_left_open():
    text = 'FROM vllm/vllm-openai:v0.10.1\nENTRYPOINT ["vllm", "serve"]\n'
    target, facts = facts_of(text, "Dockerfile")
    assert target.unresolved == {manifest.MORE_ARGUMENTS: "the arguments of `docker run IMAGE ...`"}
    assert facts.value("vllm.version") == "0.10.1"
    assert "serve.tensor_parallel_size" not in facts
    assert "docker run" in facts.why_missing("serve.tensor_parallel_size")


def test_an_env_from_a_build_argument_without_default_is_unresolved():
    text = (
        "FROM python:3.10\nRUN pip install vllm\nARG gpu\nENV gpu=$gpu\n"
        "CMD python -m vllm.entrypoints.api_server --model m --tensor-parallel-size $gpu\n"
    )
    target, facts = facts_of(text, "Dockerfile")
    assert target.unresolved == {"tensor-parallel-size": "$gpu"}
    assert "serve.tensor_parallel_size" not in facts


# -- the corpus ---------------------------------------------------------------------------------

EXPECTED = yaml.safe_load((DEPLOYMENTS / "expected.yaml").read_text(encoding="utf-8"))


def test_every_deployment_file_has_its_source_and_expectation():
    sources = (DEPLOYMENTS / "SOURCES.md").read_text(encoding="utf-8")
    files = {p.name for p in DEPLOYMENTS.iterdir()} - {"SOURCES.md", "expected.yaml", "README.md"}
    assert files == {name for name in EXPECTED if not name.startswith("../")}
    assert all(f"| {name} |" in sources for name in files)


def test_the_corpus_figures_meet_the_issue():
    n = load_script(
        HERE.parent / "bench" / "manifests" / "measure.py", "manifests_measure"
    ).measure()
    assert n["files"] >= 40
    assert n["refused"] == 0
    assert n["found"] == n["targets"]
    assert n["tp_right"] >= 0.9 * n["tp_stated"]
    assert n["tp_open_right"] == n["tp_left_open"]
    assert n["version_right"] == n["version_named"] and n["version_invented"] == 0
    assert n["gpus_right"] >= 0.9 * n["gpus_asked"]
    assert n["error_findings"] == 0


def test_a_values_file_of_an_unknown_chart_says_how_to_render_it():
    with pytest.raises(InputError) as err:
        manifest.read_targets("values.yaml", "replicaCount: 1\nimage: {repository: x}\n")
    assert "helm template" in err.value.problem


# -- Helm values: production-stack's chart, checked against the chart's own tests ----------------

CHART_TESTS = yaml.safe_load(
    (
        HERE
        / "fixtures"
        / "manifests"
        / "helm"
        / "production-stack-deployment-vllm-multi_test.yaml"
    ).read_text(encoding="utf-8")
)["tests"]
# the paths of the rendered Deployment the reader builds (labels, probes... are not read)
READ_PATHS = (
    "metadata.name",
    "spec.template.spec.containers[0].image",
    "spec.template.spec.containers[0].command",
    "spec.template.spec.hostIPC",
)


def _at(doc, path):
    node = doc
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            node = node[int(part[1:-1])] if isinstance(node, list) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
    return node


@pytest.mark.parametrize("case", CHART_TESTS, ids=[c["it"] for c in CHART_TESTS])
def test_production_stack_values_render_as_the_chart_tests_say(case):
    from vllm_doctor.serveline import helm_values

    release = (case.get("release") or {}).get("name", helm_values.RELEASE)
    rendered = helm_values.render(case["set"], release)
    # the chart also renders a ConfigMap per chat template (documents the reader skips)
    others = sum(
        1
        for check in case["asserts"]
        if (check.get("equal") or {}).get("path") == "kind"
        and check["equal"]["value"] != "Deployment"
    )
    checked = 0
    for check in case["asserts"]:
        if "hasDocuments" in check:
            assert len(rendered) == check["hasDocuments"]["count"] - others
            checked += 1
            continue
        if check.get("documentIndex", 0) >= len(rendered):
            continue  # one of those other documents
        ((how, spec),) = ((k, v) for k, v in check.items() if k != "documentIndex")
        if spec.get("path") not in READ_PATHS:
            continue
        value = _at(rendered[check.get("documentIndex", 0)], spec["path"])
        if how == "equal":
            assert value == spec["value"], spec["path"]
        elif how == "contains":
            assert spec["content"] in value
        elif how == "notContains":
            assert spec["content"] not in value
        elif how == "notExists":
            assert value is None
        checked += 1
    assert checked


def test_production_stack_values_give_a_target_per_engine_with_its_line():
    path = DEPLOYMENTS / "production-stack-values-25-v100-multi-gpu-tp2.yaml"
    (target,) = manifest.read_targets(str(path))
    assert target.name == "Deployment/release-name-qwen7b-deployment-vllm container vllm"
    facts = collect_facts(CollectOptions(manifest_target=target, probe_machine=False))
    assert facts.value("serve.tensor_parallel_size") == 2
    assert facts.value("deploy.gpus_per_pod") == 2
    assert facts.value("vllm.version") == "0.8.5"
    assert facts.value("deploy.shm_mib") == 4096  # shmSize, mounted because TP is set
    assert facts.value("serve.enforce_eager") is True  # vllmConfig.extraArgs


# -- a manifest and a serve line together; facts --manifest ------------------------------------


def doctor(*args: str):
    import os

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    return doctor_run(*args, env=environ, timeout=120)


def test_a_dockerfile_and_the_line_docker_run_completes_are_judged_together(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM vllm/vllm-openai:v0.10.1\nENTRYPOINT ["vllm", "serve"]\n')
    run = doctor(
        "check",
        "--offline",
        "--manifest",
        str(dockerfile),
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "-tp",
        "2",
    )
    assert run.returncode in (0, 1), run.stderr
    assert "give only one of" not in run.stderr
    facts = doctor(
        "facts",
        "--offline",
        "--format",
        "json",
        "--manifest",
        str(dockerfile),
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "-tp",
        "2",
    )
    assert facts.returncode == 0, facts.stderr
    import json

    (target,) = json.loads(facts.stdout)["targets"]
    assert target["target"] == "Dockerfile"
    assert target["facts"]["vllm.version"]["value"] == "0.10.1"
    assert target["facts"]["serve.tensor_parallel_size"]["value"] == 2
    assert target["facts"]["serve.tensor_parallel_size"]["detail"].startswith(
        "the serve line given after --"
    )
    assert target["facts"]["serve.model"]["value"] == "Qwen/Qwen3-8B"


def test_the_line_given_replaces_the_files_model_and_wins_over_its_options():
    text = (
        "FROM vllm/vllm-openai:v0.10.1\n"
        'CMD ["--model", "a/b", "--tensor-parallel-size", "4", "--max-model-len", "4096"]\n'
    )
    (target,) = manifest.read_targets("Dockerfile", text)
    target.join(["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2"], "--serve")
    line = target.serve_line()
    assert line.model == "Qwen/Qwen3-8B"
    assert line.options["tensor-parallel-size"] == 2
    assert line.options["max-model-len"] == 4096
    assert target.joined == "--serve"


def test_facts_of_each_manifest_target():
    run = doctor(
        "facts",
        "--offline",
        "--format",
        "json",
        "--manifest",
        str(DEPLOYMENTS / "aibrix-stormservice-1p1d.yaml"),
    )
    assert run.returncode == 0, run.stderr
    import json

    targets = json.loads(run.stdout)["targets"]
    assert [t["target"] for t in targets] == [
        "StormService/vllm-1p1d role prefill container prefill",
        "StormService/vllm-1p1d role decode container decode",
    ]
    assert all(t["facts"]["vllm.version"]["value"] == "0.10.0" for t in targets)


# -- KServe: an InferenceService joined with its ServingRuntime ---------------------------------

RUNTIME = (DEPLOYMENTS / "odh-vllm-cuda-template.yaml").read_text(encoding="utf-8")
SERVICE = """---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: granite
spec:
  predictor:
    model:
      modelFormat: {name: vLLM}
      {runtime}
      args: ["--tensor-parallel-size=2", "--max-model-len=8192"]
      resources:
        limits: {nvidia.com/gpu: "2"}
"""


@pytest.mark.parametrize("runtime", ["runtime: vllm-cuda-runtime", ""])  # named, auto-selected
def test_an_inference_service_runs_on_its_runtime_from_the_same_input(runtime):
    text = RUNTIME + SERVICE.replace("{runtime}", runtime)
    (target,) = manifest.read_targets("both.yaml", text)  # the runtime is not checked alone
    assert target.name == (
        "InferenceService/granite predictor (ServingRuntime/vllm-cuda-runtime) "
        "container kserve-container"
    )
    assert target.unresolved == {}  # the service's args are the ones KServe appends
    facts = collect_facts(CollectOptions(manifest_target=target, probe_machine=False))
    assert facts.value("serve.tensor_parallel_size") == 2
    assert facts.value("serve.max_model_len") == 8192
    assert facts.value("deploy.gpus_per_pod") == 2
    assert target.serve_line().options["served-model-name"] == ["granite"]


def test_an_inference_service_without_its_runtime_says_what_to_give():
    with pytest.raises(InputError) as err:
        manifest.read_targets("isvc.yaml", SERVICE.replace("{runtime}", "runtime: elsewhere"))
    assert "its runtime (elsewhere) is not in the input" in err.value.problem


def test_an_openshift_template_fills_in_its_parameters():
    text = """apiVersion: template.openshift.io/v1
kind: Template
metadata: {name: vllm}
parameters:
  - {name: MODEL, value: ibm-granite/granite-3.3-8b-instruct}
  - {name: TP, value: "2"}
  - {name: TOKEN, generate: expression}
objects:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: vllm}
    spec:
      template:
        spec:
          containers:
            - name: vllm
              image: quay.io/rh-aiservices-bu/vllm-openai-ubi9:0.4.2
              args: ["--model", "${MODEL}", "--tensor-parallel-size", "${TP}"]
              resources: {limits: {nvidia.com/gpu: "2"}}
"""
    target, facts = facts_of(text)
    assert target.name == "Deployment/vllm container vllm"
    assert facts.value("serve.model") == "ibm-granite/granite-3.3-8b-instruct"
    assert facts.value("serve.tensor_parallel_size") == 2
    # older than the releases the knowledge covers, and still the image's version
    assert facts.value("vllm.version") == "0.4.2"


def test_llm_d_modelservice_values_give_each_role_its_vllm_serve_line():
    text = """modelArtifacts:
  name: Qwen/Qwen3-32B
  uri: hf://Qwen/Qwen3-32B
decode:
  parallelism: {tensor: 4, dataLocal: 2}
  containers:
  - name: vllm
    image: ghcr.io/llm-d/llm-d-cuda:v0.3.0
    modelCommand: vllmServe
    args: [--max-model-len, "32768"]
prefill:
  create: false
"""
    (target,) = manifest.read_targets("values.yaml", text)
    assert target.name == "Deployment/release-name-llm-d-modelservice-decode container vllm"
    facts = collect_facts(CollectOptions(manifest_target=target, probe_machine=False))
    assert facts.value("serve.model") == "Qwen/Qwen3-32B"
    assert facts.value("serve.tensor_parallel_size") == 4
    assert facts.value("serve.max_model_len") == 32768
    assert facts.value("deploy.gpus_per_pod") == 8  # tensor × data-local, as the chart adds
    assert "vllm.version" not in facts  # llm-d's image names llm-d's release


# -- production-stack: its values file and the chart's rendered output agree --------------------

RENDERED = HERE / "fixtures" / "manifests" / "helm" / "rendered"


def _serve_and_deploy_facts(manifest_arg: str, stdin: str | None = None) -> dict[str, dict]:
    import json
    import os

    run = doctor_run(
        "facts",
        "--offline",
        "--format",
        "json",
        "--manifest",
        manifest_arg,
        stdin=stdin,
        env={k: v for k, v in os.environ.items() if not k.startswith("VLLM_")},
    )
    assert run.returncode == 0, run.stderr
    return {
        t["target"]: {
            path: fact["value"]
            for path, fact in t["facts"].items()
            if path.startswith(("serve.", "deploy.", "vllm.version")) and path != "deploy.file"
        }
        for t in json.loads(run.stdout)["targets"]
    }


@pytest.mark.parametrize(
    "rendered", sorted(RENDERED.glob("*.rendered.yaml")), ids=lambda p: p.name.split(".")[0]
)
def test_production_stack_values_read_as_helm_renders_them(rendered):
    values = DEPLOYMENTS / rendered.name.replace(".rendered.yaml", ".yaml")
    from_values = _serve_and_deploy_facts(str(values))
    from_chart = _serve_and_deploy_facts("-", rendered.read_text(encoding="utf-8"))
    assert from_values and all(f.get("serve.model") for f in from_values.values())
    assert from_values == from_chart
