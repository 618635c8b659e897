"""``--manifest DIR``: the manifest files of a folder read as one input (issue 33, item 1): a
KServe InferenceService joined with its runtime from another file, each value's evidence at
its own file and line; what is skipped, and the bounds of the walk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor import bounds
from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.serveline import manifest
from vllm_doctor.serveline.directory import read_input

DEPLOYMENTS = Path(__file__).parent / "fixtures" / "manifests" / "deployments"
CORPUS = Path(__file__).parent / "fixtures" / "manifests" / "corpus"
# the real runtime (opendatahub-io/odh-model-controller, SOURCES.md): an OpenShift Template
# wrapping the ServingRuntime vllm-cuda-runtime, its args at lines 46-48
RUNTIME = DEPLOYMENTS / "odh-vllm-cuda-template.yaml"
SERVICE = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: granite
spec:
  predictor:
    nodeSelector:
      nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
    model:
      modelFormat: {name: vLLM}
      runtime: vllm-cuda-runtime
      args: ["--tensor-parallel-size=2", "--max-model-len=8192"]
      resources:
        limits: {nvidia.com/gpu: "2"}
"""


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def split_service(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The runtime and the service in two files of one folder, as a GitOps repository keeps
    them."""
    folder = tmp_path / "deploy"
    (folder / "runtimes").mkdir(parents=True)
    runtime = folder / "runtimes" / RUNTIME.name
    shutil.copy(RUNTIME, runtime)
    service = folder / "isvc.yaml"
    service.write_text(SERVICE, encoding="utf-8")
    return folder, runtime, service


def run(*args: str) -> subprocess.CompletedProcess:
    return doctor_run(*args, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_a_service_and_its_runtime_in_two_files_are_one_target_placed_in_each(tmp_path):
    folder, runtime, service = split_service(tmp_path)
    (target,) = read_input(str(folder))  # the runtime is not checked on its own
    assert target.name == (
        "InferenceService/granite predictor (ServingRuntime/vllm-cuda-runtime) "
        "container kserve-container"
    )
    # the target is the service, at its predictor's model
    assert target.where == f"{service}:{_line_of(service, 'model:')}"
    assert target.unresolved == {}
    facts = collect_facts(CollectOptions(manifest_target=target, probe_machine=False))
    detail = lambda path: facts.get(path).detail  # noqa: E731
    # the service's args and GPUs at the service's lines
    assert facts.value("serve.tensor_parallel_size") == 2
    assert detail("serve.tensor_parallel_size").startswith(
        f"{service}:{_line_of(service, '--tensor-parallel-size=2')} "
    )
    assert detail("deploy.gpus_per_pod").startswith(
        f"{service}:{_line_of(service, 'nvidia.com/gpu:')} "
    )
    assert detail("gpu.names").startswith(f"{service}:{_line_of(service, 'gpu.product')} ")
    # the runtime's args, image and env at the runtime's lines
    assert facts.value("serve.model") == "/mnt/models"
    assert detail("serve.model").startswith(
        f"{runtime}:{_line_of(runtime, '--model=/mnt/models')} "
    )
    assert detail("deploy.image").startswith(f"{runtime}:{_line_of(runtime, 'image:')} ")
    assert detail("env.HF_HOME").startswith(f"{runtime}:{_line_of(runtime, 'name: HF_HOME')} ")
    assert target.serve_line().options["served-model-name"] == ["granite"]
    # report locations follow the fact to its file
    assert target.fact_files["serve.model"] == str(runtime)
    assert "serve.tensor_parallel_size" not in target.fact_files


def test_facts_of_a_folder_name_each_file_and_report_what_was_skipped(tmp_path):
    folder, runtime, service = split_service(tmp_path)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD.yaml").write_text("kind: x\n")
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: mine\nversion: 0.1.0\n")
    (folder / "templates").mkdir()
    (folder / "templates" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        '  labels: {{- include "x" . | nindent 4 }}\n'
    )
    (folder / "serve.yaml").write_text("model: Qwen/Qwen3-8B\ntensor-parallel-size: 2\n")
    (folder / "big.yaml").write_bytes(b"#" * (bounds.FILE_LIMITS["report"] + 1))
    (folder / "notes.txt").write_text("not a manifest, not even looked at\n")
    result = run("facts", "--manifest", str(folder), "--format", "json")
    assert result.returncode == 0, result.stderr
    (target,) = json.loads(result.stdout)["targets"]
    assert target["where"].startswith(f"{service}:")
    assert target["facts"]["serve.model"]["detail"].startswith(f"{runtime}:")
    skipped = result.stderr.splitlines()
    assert f"vllm-doctor: {folder}/.git/: skipped (a hidden folder)" in skipped
    assert any(s.startswith(f"vllm-doctor: {folder}/big.yaml: skipped (4.0 MiB") for s in skipped)
    assert any(
        s.startswith(f"vllm-doctor: {folder}/templates/deployment.yaml: skipped (not valid YAML")
        and s.endswith("(a template: render it, e.g. `helm template`)")
        for s in skipped
    )
    assert (
        f"vllm-doctor: {folder}/serve.yaml: skipped (a vLLM serve config, not a manifest: "
        "give it with --serve-config)"
    ) in skipped
    assert any(
        s.startswith(f"vllm-doctor: {folder}/Chart.yaml: skipped (not a manifest") for s in skipped
    )
    assert not any("notes.txt" in s for s in skipped)  # not a manifest file by its name
    assert len(skipped) == 5


def test_a_folder_of_corpus_files_gives_the_targets_of_each_file(tmp_path):
    names = [
        "gke-gemma3-1b.yaml",
        "compose-aibrix-standalone.yml",
        "Dockerfile.koyeb-example-vllm",
        "production-stack-values-02-basic-config.yaml",
        "gke-lws-llama3-405b.yaml",
    ]
    for name in names:
        shutil.copy(DEPLOYMENTS / name, tmp_path / name)
    one_by_one = [
        (t.name, str(Path(t.file).name), t.line, t.words)
        for name in sorted(names)
        for t in manifest.read_targets(str(tmp_path / name))
    ]
    together = [
        (t.name, str(Path(t.file).name), t.line, t.words) for t in read_input(str(tmp_path))
    ]
    assert sorted(together) == sorted(one_by_one)
    assert {file for _, file, _, _ in together} == set(names)


def test_a_folder_with_no_vllm_container_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "web.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n"
        "    spec:\n      containers: [{name: web, image: nginx:1.27}]\n"
    )
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: web\n")
    result = run("check", "--manifest", str(tmp_path))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"vllm-doctor: {tmp_path}: no container runs vLLM (looked at: Deployment"
    )
    assert (
        f"looked at: Deployment in 1 file, 1 skipped: {tmp_path}/Chart.yaml (not a manifest" in line
    )


@pytest.mark.parametrize("chart", [False, True])
def test_a_folder_without_manifests_says_which_files_it_reads(tmp_path, chart):
    (tmp_path / "README.md").write_text("# nothing here\n")
    if chart:
        (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: web\n")
    with pytest.raises(InputError) as err:
        read_input(str(tmp_path))
    assert err.value.problem.startswith(
        "no manifest file in the folder (YAML files by their extension, Dockerfiles by their name"
    )
    assert (f"1 skipped: {tmp_path}/Chart.yaml (not a manifest" in err.value.problem) == chart


def test_a_service_whose_runtime_is_in_no_file_of_the_folder_says_so(tmp_path):
    (tmp_path / "isvc.yaml").write_text(SERVICE.replace("vllm-cuda-runtime", "elsewhere"))
    with pytest.raises(InputError) as err:
        read_input(str(tmp_path))
    assert "its runtime (elsewhere) is not in the input" in err.value.problem
    assert "--manifest DIR" in err.value.problem


@pytest.mark.parametrize("bound", ["MAX_DIR_FILES", "MAX_DIR_BYTES", "MAX_DIR_ENTRIES"])
def test_the_walk_is_bounded(tmp_path, monkeypatch, bound):
    for i in range(4):
        shutil.copy(DEPLOYMENTS / "gke-gemma3-1b.yaml", tmp_path / f"m{i}.yaml")
    limit = {"MAX_DIR_FILES": 3, "MAX_DIR_BYTES": 3 * 1024, "MAX_DIR_ENTRIES": 3}[bound]
    monkeypatch.setattr(bounds, bound, limit)
    with pytest.raises(InputError) as err:
        read_input(str(tmp_path))
    assert err.value.source == str(tmp_path)
    assert "give the folder of the deployment, not a whole tree" in err.value.problem


def test_a_fifo_and_a_link_to_a_folder_are_skipped_never_opened(tmp_path):
    shutil.copy(DEPLOYMENTS / "gke-gemma3-1b.yaml", tmp_path / "gemma.yaml")
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it would block for ever
    os.symlink(tmp_path, tmp_path / "loop")  # following it would walk for ever
    notes: list[str] = []
    (target,) = read_input(str(tmp_path), notes=notes)
    assert target.file == str(tmp_path / "gemma.yaml")
    assert notes == [
        f"{tmp_path}/loop/: skipped (a link to a folder is not followed)",
        f"{tmp_path}/pipe.yaml: skipped (not a regular file)",
    ]


def test_a_bound_inside_one_file_names_that_file(tmp_path):
    text = (CORPUS.parent / "deployments" / "gke-lws-llama3-405b.yaml").read_text()
    assert "size: 2" in text
    (tmp_path / "lws.yaml").write_text(text.replace("size: 2", "size: 100000000", 1))
    with pytest.raises(InputError) as err:
        read_input(str(tmp_path))
    assert err.value.source.startswith(f"{tmp_path}/lws.yaml:")
