"""`check --manifest`: serve lines read where they are deployed (Kubernetes, compose,
Dockerfile), one target per vLLM container, facts with the file's lines as evidence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from doctor_forks import doctor_run

from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.serveline import manifest

HERE = Path(__file__).parent
SCENARIO = HERE / "fixtures" / "manifests" / "scenario"
MODEL = HERE.parent / "vllm_doctor" / "examples" / "diffusion-gemma-tp2" / "model"
SAME_SERVICE = [
    "diffusion-gemma-deployment.yaml",
    "diffusion-gemma-compose.yaml",
    "Dockerfile.diffusion-gemma",
]


def doctor(*args: str, stdin: str | None = None, cwd: Path | None = None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    return doctor_run(*args, env=environ, stdin=stdin, cwd=cwd, timeout=120)


def facts_of(name: str, index: int = 0):
    target = manifest.read_targets(str(SCENARIO / name))[index]
    return target, collect_facts(
        CollectOptions(manifest_target=target, probe_machine=False, model_config=MODEL)
    )


def line_of(name: str, needle: str) -> int:
    lines = (SCENARIO / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


@pytest.mark.parametrize("name", SAME_SERVICE)
def test_the_same_service_gives_model001_at_the_tensor_parallel_line(name, tmp_path):
    run = doctor(
        "check",
        "--manifest",
        str(SCENARIO / name),
        "--model-config",
        str(MODEL),
        "--format",
        "json",
    )
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    (target,) = data["targets"]
    model001 = next(f for f in target["findings"] if f["code"] == "MODEL001")
    assert model001["severity"] == "error"
    assert model001["location"] == {
        "file": str(SCENARIO / name),
        "line": line_of(name, "--tensor-parallel-size"),
    }
    facts = target["facts"]["facts"]
    assert facts["vllm.version"]["value"] == "0.24.0"
    assert facts["serve.tensor_parallel_size"]["value"] == 2
    assert (
        f":{line_of(name, '--tensor-parallel-size')} "
        in facts["serve.tensor_parallel_size"]["detail"]
    )


def test_text_and_sarif_point_at_the_args_line():
    name = SAME_SERVICE[0]
    args_line = line_of(name, "--tensor-parallel-size")
    text = doctor("check", "--manifest", str(SCENARIO / name), "--model-config", str(MODEL))
    assert text.returncode == 1
    assert f"at {SCENARIO / name}:{args_line}" in text.stdout
    sarif = doctor(
        "check",
        "--manifest",
        str(SCENARIO / name),
        "--model-config",
        str(MODEL),
        "--format",
        "sarif",
        cwd=HERE.parent,
    )
    results = json.loads(sarif.stdout)["runs"][0]["results"]
    model001 = next(r for r in results if r["ruleId"] == "MODEL001")
    physical = model001["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"] == f"tests/fixtures/manifests/scenario/{name}"
    assert physical["region"]["startLine"] == args_line
    github = doctor(
        "check",
        "--manifest",
        str(SCENARIO / name),
        "--model-config",
        str(MODEL),
        "--format",
        "github",
        cwd=HERE.parent,
    )
    assert f"file=tests/fixtures/manifests/scenario/{name},line={args_line}" in github.stdout


def test_deployment_facts_from_the_manifest():
    target, facts = facts_of("diffusion-gemma-deployment.yaml")
    assert target.name == "Deployment/diffusion-gemma container vllm"
    assert facts.value("gpu.count") == 2 and facts.value("deploy.gpus_per_pod") == 2
    assert facts.value("gpu.min_capability") == 90  # H100 from the node selector
    assert facts.get("gpu.names").detail.startswith(
        f"{SCENARIO / 'diffusion-gemma-deployment.yaml'}:10 nodeSelector nvidia.com/gpu.product"
    )
    assert facts.value("deploy.shm_default") is True and facts.value("deploy.shm_mib") == 64
    # HF_TOKEN comes from a Secret: not known, never guessed
    assert "env.HF_TOKEN" not in facts and facts.why_missing("env.HF_TOKEN")


def test_tp4_on_a_pod_with_two_gpus_is_an_error_and_a_memory_shm_passes():
    run = doctor("check", "--manifest", str(SCENARIO / "tp4-on-2-gpus.yaml"), "--format", "json")
    assert run.returncode == 1, run.stderr
    (target,) = json.loads(run.stdout)["targets"]  # the Service runs nothing
    codes = {f["code"]: f for f in target["findings"]}
    assert codes["HW005"]["severity"] == "error"
    assert codes["HW005"]["location"]["line"] == line_of(
        "tp4-on-2-gpus.yaml", "--tensor-parallel-size"
    )
    assert "HW008" in target["not_applicable"]
    assert target["facts"]["facts"]["deploy.shm_mib"]["value"] == 16 * 1024


def test_tp2_without_dev_shm_warns_and_names_the_fix():
    run = doctor(
        "check", "--manifest", str(SCENARIO / "diffusion-gemma-deployment.yaml"), "--format", "json"
    )
    (target,) = json.loads(run.stdout)["targets"]
    hw008 = next(f for f in target["findings"] if f["code"] == "HW008")
    assert hw008["severity"] == "warning"
    titles = " ".join(s["title"] for s in hw008["suggestions"])
    assert "medium: Memory" in titles and "--shm-size" in titles and "--ipc=host" in titles


def test_unresolved_references_are_undecided_never_guessed():
    target, facts = facts_of("unresolved.yaml")
    assert target.unresolved == {"model": "$MODEL_ID", "tensor-parallel-size": "${TP_SIZE}"}
    assert facts.value("serve.max_model_len") == 16384  # $(MAX_LEN) from the container's env
    assert facts.value("serve.enforce_eager") is True
    for path in ("serve.tensor_parallel_size", "serve.world_size", "serve.model"):
        assert (
            path not in facts and "${TP_SIZE}" in (facts.why_missing(path) or "")
        ) or path == "serve.model"
    assert "vllm.version" not in facts and "latest" in facts.why_missing("vllm.version")


def test_stdin_multi_document_and_several_targets():
    stream = "\n---\n".join(
        (SCENARIO / n).read_text()
        for n in ("diffusion-gemma-deployment.yaml", "tp4-on-2-gpus.yaml")
    )
    run = doctor("check", "--manifest", "-", "--format", "sarif", stdin=stream)
    assert run.returncode == 1, run.stderr
    sarif = json.loads(run.stdout)
    assert len(sarif["runs"]) == 1 and len(sarif["runs"][0]["properties"]["targets"]) == 2
    assert {"HW005", "HW008"} <= {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert run.stderr.count("container") == 2  # a summary line per target


def test_serve_config_that_is_a_manifest_is_checked_as_one(tmp_path):
    run = doctor("check", "--serve-config", str(SCENARIO / "tp4-on-2-gpus.yaml"), "-q")
    assert run.returncode == 1 and "HW005" in run.stdout
    neither = tmp_path / "values.yaml"
    neither.write_text("replicaCount: 2\nimage:\n  repository: vllm/vllm-openai\n")
    run = doctor("check", "--serve-config", str(neither))
    assert run.returncode == 2
    assert "neither a vLLM serve config" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "text, problem",
    [
        ("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", "no container runs vLLM"),
        ("just: [a, mapping\n", "not valid YAML"),
        ("a: !!python/object:os.system {}\n", "not valid YAML"),
        ("plain: values\n", "neither a vLLM serve config"),
    ],
)
def test_bad_manifests_are_one_clear_error(text, problem):
    with pytest.raises(InputError, match=problem):
        manifest.read_targets("in.yaml", text)


@pytest.mark.parametrize(
    "image, version",
    [
        ("vllm/vllm-openai:v0.24.0", "0.24.0"),
        ("docker.io/vllm/vllm-openai:v0.10.1.1", "0.10.1.1"),
        ("vllm/vllm-openai-rocm:v0.14.0", "0.14.0"),
        ("rocm/vllm:rocm6.4.1_vllm_0.9.1_20250702", "0.9.1"),
        ("vllm/vllm-openai:latest", None),
        ("vllm/vllm-openai", None),
        ("vllm/vllm-openai:nightly", None),
        ("vllm/vllm-openai@sha256:" + "a" * 64, None),
        ("lmcache/vllm-openai:v0.3.5", None),  # LMCache's release, not vLLM's
        ("ghcr.io/llm-d/llm-d:v0.2.0", None),
    ],
)
def test_image_version(image, version):
    assert manifest.image_vllm_version(image)[0] == version


@pytest.mark.parametrize(
    "text, docker, mib",
    [
        ("16Gi", False, 16384),
        ("512Mi", False, 512),
        ("1G", False, 953),
        ("2", False, 0),
        ("16gb", True, 16384),
        ("8g", True, 8192),
        ("1024m", True, 1024),
        ("10x", False, None),
    ],
)
def test_sizes(text, docker, mib):
    assert manifest.quantity_mib(text, docker=docker) == mib


def test_leaderworkerset_group_and_kubernetes_escapes():
    text = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: vllm}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
          - name: vllm-leader
            image: vllm/vllm-openai:v0.20.0
            env: [{name: TP, value: "8"}]
            command: ["sh", "-c", "ray start --head; vllm serve m --tensor-parallel-size $(TP) --pipeline-parallel-size 2 --served-model-name $$(x)"]
            resources: {limits: {nvidia.com/gpu: "8"}}
    workerTemplate:
      spec:
        containers:
          - name: vllm-worker
            image: vllm/vllm-openai:v0.20.0
            command: ["sh", "-c", "ray start --block --address=$(LWS_LEADER_ADDRESS):6379"]
"""
    (leader,) = manifest.read_targets("lws.yaml", text)
    assert leader.name == "LeaderWorkerSet/vllm leader container vllm-leader"
    line = leader.serve_line()
    assert line.options["tensor-parallel-size"] == 8 and line.options["pipeline-parallel-size"] == 2
    assert leader.nodes.value == 2 and leader.gpus.value == 8
    assert "served-model-name" in leader.unresolved  # $$(x) is a literal $(x): the shell runs x


# -- a corpus of real manifests ------------------------------------------------------------------

CORPUS = HERE / "fixtures" / "manifests" / "corpus"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def judged():
    """Every corpus target judged once by the shipped rules (no model config: the doctor
    must not prove an error it cannot)."""
    from vllm_doctor.engine.evaluate import APPLIES, evaluate_rules
    from vllm_doctor.engine.loader import default_rules_dir, load_rules

    rules = load_rules([default_rules_dir()])
    out = {}
    for name in EXPECTED:
        for target in manifest.read_targets(str(CORPUS / name)):
            facts = collect_facts(CollectOptions(manifest_target=target, probe_machine=False))
            findings = evaluate_rules(rules, facts)
            out[(name, target.name)] = (
                target,
                facts,
                [f for f in findings if f.verdict == APPLIES and f.severity == "error"],
            )
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_manifests_are_read_as_their_authors_wrote_them(name, judged):
    targets = manifest.read_targets(str(CORPUS / name))
    assert [t.name for t in targets] == [e["name"] for e in EXPECTED[name]]
    for expected in EXPECTED[name]:
        target, facts, errors = judged[(name, expected["name"])]
        line = target.serve_line()
        assert line.model == expected["model"]
        for option, value in expected["serve"].items():
            assert line.options.get(option) == value, option
        assert target.unresolved == expected["unresolved"]
        for path, value in expected.get("facts", {}).items():
            assert facts.value(path) == value, path
        for path in expected.get("missing", []):
            assert path not in facts and facts.why_missing(path), path
        assert [f.rule.code for f in errors] == expected["errors"]


def test_every_corpus_file_is_in_the_sources():
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    files = {p.name for p in CORPUS.iterdir()} - {"SOURCES.md", "expected.yaml"}
    assert files == set(EXPECTED)
    assert all(f"| {name} |" in sources for name in files)


def test_secrets_in_a_manifest_stay_out_of_the_report(judged):
    _, facts, _ = judged[
        ("aibrix-heterogeneous-l20.yaml", "Deployment/deepseek-coder-7b-l20 container llm-engine")
    ]
    assert "sk-kFJ12nKsFVf" not in facts.to_json()


# -- the pre-commit hook -----------------------------------------------------------------------


def test_hook_checks_manifests_that_run_vllm_and_skips_the_rest(tmp_path):
    from vllm_doctor.serveline.manifest import hook_option

    service = tmp_path / "service.yaml"
    service.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web}\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM python:3.12\nCMD ["python", "app.py"]\n')
    serve = tmp_path / "deploy" / "serve.yaml"
    serve.parent.mkdir()
    serve.write_text("model: m\n")
    values = tmp_path / "values.yaml"
    values.write_text("replicaCount: 1\n")
    assert hook_option(str(SCENARIO / "tp4-on-2-gpus.yaml")) == "--manifest"
    assert hook_option(str(SCENARIO / "Dockerfile.diffusion-gemma")) == "--manifest"
    assert hook_option(str(SCENARIO / "diffusion-gemma-compose.yaml")) == "--manifest"
    assert hook_option(str(serve)) == "--serve-config"
    for other in (service, dockerfile, values):
        assert hook_option(str(other)) is None


def test_hook_run_fails_on_a_manifest_finding(tmp_path, capsys):
    from vllm_doctor import precommit

    readme = tmp_path / "values.yaml"
    readme.write_text("replicaCount: 1\n")
    with pytest.raises(SystemExit) as exit_:
        precommit.main([str(readme), str(SCENARIO / "tp4-on-2-gpus.yaml")])
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert "tp4-on-2-gpus.yaml" in out and "values.yaml" not in out


def test_a_leaderworkerset_group_too_small_for_the_world_size_is_an_error(tmp_path):
    text = (
        (CORPUS / "lws-gpu-vllm.yaml")
        .read_text()
        .replace("--pipeline_parallel_size 2", "--pipeline_parallel_size 4")
    )
    group = tmp_path / "lws.yaml"
    group.write_text(text)
    run = doctor("check", "--manifest", str(group), "--format", "json")
    assert run.returncode == 1, run.stderr
    (leader,) = json.loads(run.stdout)["targets"]
    par007 = next(f for f in leader["findings"] if f["code"] == "PAR007")
    assert par007["location"]["line"] == line_of_text(text, "--tensor-parallel-size")
    assert "HW005" not in [f["code"] for f in leader["findings"]]  # the pod is one of two


def line_of_text(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


VGPU_POD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.16.0
          command: ["vllm", "serve", "/models/gemma-3-27b-it", "--tensor-parallel-size", "2"]
{env}          resources:
            limits:
{resources}
"""


def vgpu_facts(tmp_path: Path, resources: str, env: str = ""):
    path = tmp_path / "vllm.yaml"
    path.write_text(VGPU_POD.format(env=env, resources=resources), encoding="utf-8")
    target = manifest.read_targets(str(path))[0]
    return collect_facts(CollectOptions(manifest_target=target, probe_machine=False))


def test_a_vgpu_plugins_resources_say_hami_core_is_preloaded(tmp_path):
    """volcano's vgpu-device-plugin counts vGPUs in volcano.sh/vgpu-number and preloads
    HAMi-core's libvgpu.so, as HAMi's plugin does for nvidia.com/gpumem (server.go)."""
    facts = vgpu_facts(
        tmp_path,
        "              volcano.sh/vgpu-number: 2\n              volcano.sh/vgpu-memory: 20000\n",
    )
    assert facts.value("gpu.count") == 2
    fact = facts.get("platform.cuda_interposer")
    assert fact is not None and fact.value == "hami-core"
    assert "resources.limits.volcano.sh/vgpu-number" in fact.detail
    # CUDA_DISABLE_CONTROL=true: the plugin mounts no /etc/ld.so.preload, nothing interposes
    env = "          env:\n            - name: CUDA_DISABLE_CONTROL\n              value: 'true'\n"
    facts = vgpu_facts(
        tmp_path, "              nvidia.com/gpu: 2\n              nvidia.com/gpumem: 8000\n", env
    )
    assert "platform.cuda_interposer" not in facts
    assert facts.why_missing("platform.cuda_interposer") is None
    # nvidia.com/gpu alone: NVIDIA's device plugin or HAMi's, the file does not say
    facts = vgpu_facts(tmp_path, "              nvidia.com/gpu: 2\n")
    assert "not examined" in facts.why_missing("platform.cuda_interposer")
