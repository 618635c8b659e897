"""A serve line pasted as a ``docker run`` / ``podman run`` command (serveline/container_run.py):
the engine's options end at the image, what follows is the container's command, ``-e`` sets
its environment and the image's tag names the vLLM release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.serveline.command import parse_serve_string
from vllm_doctor.serveline.container_run import container_facts, split_container_run

# vLLM's own docs, "Using Docker" (https://docs.vllm.ai/en/stable/deployment/docker.html),
# as published: the quickstart command users paste into issues
VLLM_DOCS = """docker run --runtime nvidia --gpus all \\
    -v ~/.cache/huggingface:/root/.cache/huggingface \\
    --env "HF_TOKEN=$HF_TOKEN" \\
    -p 8000:8000 \\
    --ipc=host \\
    vllm/vllm-openai:latest \\
    --model mistralai/Mistral-7B-v0.1"""


def test_the_docs_command_is_read_as_the_images_serve_line():
    line = parse_serve_string(VLLM_DOCS)
    assert line.model == "mistralai/Mistral-7B-v0.1"
    assert line.image == "vllm/vllm-openai:latest"
    assert line.env == {"HF_TOKEN": "$HF_TOKEN"}
    # none of docker's options (--runtime, --gpus, -v, -p, --ipc) is taken for vLLM's
    assert line.unknown_flags == []
    assert set(line.given) == {"model"}


def check(serve: str, *more: str) -> dict:
    run = doctor_run(
        "check", "--format", "json", "--offline", "--no-config", "--elsewhere",
        "--fail-on", "never", "--serve", serve, *more, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_docs_command_draws_no_finding_about_options():
    doc = check(VLLM_DOCS)
    assert not [f for f in doc["findings"] if f["code"].startswith("ARGS")]
    assert doc["facts"]["facts"]["deploy.image"]["value"] == "vllm/vllm-openai:latest"


def test_the_images_tag_names_the_release_unless_a_version_is_given():
    serve = (
        "docker run --gpus all -e VLLM_USE_V1=1 -p 8000:8000 vllm/vllm-openai:v0.11.0 "
        "--model Qwen/Qwen3-8B --tensor-parallel-size 2"
    )
    facts = check(serve)["facts"]["facts"]
    assert facts["vllm.version"]["value"] == "0.11.0"
    assert "vllm/vllm-openai:v0.11.0" in facts["vllm.version"]["detail"]
    assert facts["env.VLLM_USE_V1"]["value"] == "1"
    assert facts["serve.tensor_parallel_size"]["value"] == 2
    given = check(serve, "--vllm-version", "0.12.0")["facts"]["facts"]
    assert given["vllm.version"]["value"] == "0.12.0"


@pytest.mark.parametrize(
    ("words", "image", "env", "command"),
    [
        # a short cluster, an attached value, `docker container run`, `--` before the image
        (
            "sudo docker container run -dit -p8000:8000 -eA=1 -- vllm/vllm-openai:v0.9.0 m",
            "vllm/vllm-openai:v0.9.0",
            ["A=1"],
            ["vllm", "serve", "m"],
        ),
        # another image whose command runs vLLM itself
        (
            "podman run --rm --device nvidia.com/gpu=all nvcr.io/nvidia/pytorch:25.01-py3 "
            "vllm serve m -tp 2",
            "nvcr.io/nvidia/pytorch:25.01-py3",
            [],
            ["vllm", "serve", "m", "-tp", "2"],
        ),
        # --entrypoint replaces the image's; `-e KEY` alone passes the host's value (not shown)
        (
            "docker run -e HF_TOKEN --entrypoint python3 vllm/vllm-openai:v0.8.5 "
            "-m vllm.entrypoints.openai.api_server --model m",
            "vllm/vllm-openai:v0.8.5",
            [],
            ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
        ),
    ],
)
def test_the_engines_options_end_at_the_image(words, image, env, command):
    run = split_container_run(words.split())
    assert run is not None
    assert (run.image, run.env, run.command) == (image, env, command)


def test_a_plain_serve_line_is_no_container_run():
    assert split_container_run(["vllm", "serve", "m", "--port", "8000"]) is None
    assert split_container_run(["docker", "compose", "up"]) is None


@pytest.mark.parametrize(
    ("serve", "said"),
    [
        ("docker run ubuntu:22.04 bash", "not a vLLM image the doctor knows"),
        ("docker run --gpus all", "names no image"),
    ],
)
def test_a_container_run_that_does_not_run_vllm_is_one_line_and_exit_2(serve, said):
    with pytest.raises(InputError, match=said):
        parse_serve_string(serve)
    run = doctor_run("check", "--offline", "--no-config", "--serve", serve, timeout=60)
    assert run.returncode == 2
    assert said in run.stderr and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("engine_words", "gpus", "shm_default", "shm_mib"),
    [
        # vLLM's docs: "use the ipc=host flag or --shm-size" for tensor parallel inference
        ("--gpus 2", 2, True, 64),
        ('--gpus "device=0,1" --ipc=host', 2, False, None),
        ("--gpus all --shm-size 16g", None, False, 16384),
    ],
)
def test_the_containers_gpus_and_shared_memory_are_deployment_facts(
    engine_words, gpus, shm_default, shm_mib
):
    serve = f"docker run {engine_words} vllm/vllm-openai:v0.11.0 --model m -tp 2"
    doc = check(serve, "--select", "HW008")
    facts = doc["facts"]["facts"]
    assert facts.get("deploy.gpus_per_pod", {}).get("value") == gpus
    assert facts["deploy.shm_default"]["value"] is shm_default
    assert facts.get("deploy.shm_mib", {}).get("value") == shm_mib
    # HW008: tensor parallel in a container that keeps the runtime's 64 MB /dev/shm
    warned = [f["code"] for f in doc["findings"]]
    assert warned == (["HW008"] if shm_default else [])


def test_gpus_all_leaves_the_count_open_and_says_why():
    doc = check("docker run --gpus all vllm/vllm-openai:v0.11.0 --model m")
    assert "every GPU of the host" in doc["facts"]["missing"]["deploy.gpus_per_pod"]


def _machine_then_container(image: str, packages_source: str) -> Facts:
    """This machine's facts as the host collector leaves them, then a `docker run` line."""
    facts = Facts()
    facts.set("vllm.version", "0.26.0", Source.MACHINE, "this machine")
    facts.set("torch.version", "2.13.0+cpu", packages_source, "torch")
    facts.set("packages.transformers", "5.17.0", packages_source, "transformers")
    facts.set("platform.glibcxx", "3.4.30", Source.MACHINE, "libstdc++")
    facts.set("platform.nvcc_found", False, Source.MACHINE, "no nvcc")
    facts.set("platform.kernel", "6.8.0", Source.MACHINE, "uname")
    facts.set("driver.version", "580.65.06", Source.MACHINE, "NVML")
    command = "--model Qwen/Qwen3-8B" if "vllm-openai" in image else "vllm serve Qwen/Qwen3-8B"
    line = parse_serve_string(f"docker run --gpus all --ipc=host {image} {command}")
    assert line.container is not None
    container_facts(line.container, facts, Source.SERVE)
    return facts


def test_this_machines_packages_and_libraries_do_not_stand_for_the_images():
    # a host with torch 2.13 CPU drew ENV101's error for the image's own (pinned) torch
    facts = _machine_then_container("vllm/vllm-openai:v0.20.0", Source.MACHINE)
    assert facts.value("vllm.version") == "0.20.0"  # the tag names the release
    for path in (
        "torch.version",
        "packages.transformers",
        "platform.glibcxx",
        "platform.nvcc_found",
    ):
        assert path not in facts, path
        assert facts.is_unknowable(path), path
        assert "vllm/vllm-openai:v0.20.0" in facts.why_missing(path)
    # the kernel and the driver are the host's, shared with the container
    assert facts.value("platform.kernel") == "6.8.0"
    assert facts.value("driver.version") == "580.65.06"


def test_an_image_naming_no_release_leaves_vllm_unknown_not_this_machines():
    facts = _machine_then_container("nvcr.io/nvidia/pytorch:25.01-py3", Source.MACHINE)
    assert "vllm.version" not in facts
    assert facts.why_missing("vllm.version")


def test_a_reports_packages_stay_beside_a_container_run():
    facts = _machine_then_container("vllm/vllm-openai:v0.20.0", Source.REPORT)
    assert facts.value("torch.version") == "2.13.0+cpu"
    assert facts.value("packages.transformers") == "5.17.0"


def test_the_containers_environment_is_the_lines_not_this_machines():
    facts = Facts()
    facts.set("env.VLLM_USE_DEEP_GEMM", "0", Source.ENV)
    facts.set("env.VLLM_LOGGING_LEVEL", "DEBUG", Source.ENV)
    line = parse_serve_string(
        "docker run --gpus all -e VLLM_LOGGING_LEVEL -e VLLM_USE_V1=1 "
        "vllm/vllm-openai:v0.20.0 --model m"
    )
    assert line.container is not None
    assert line.container.passed == ["VLLM_LOGGING_LEVEL"]
    container_facts(line.container, facts, Source.SERVE)
    assert "env.VLLM_USE_DEEP_GEMM" not in facts  # exported here, not passed to the container
    assert facts.value("env.VLLM_LOGGING_LEVEL") == "DEBUG"  # `-e KEY` passes the host's value
    assert facts.why_missing("env.VLLM_USE_DEEP_GEMM") is None  # no --env-file: not set


def test_an_env_file_leaves_the_variables_it_may_set_unknown():
    line = parse_serve_string("docker run --env-file ./vllm.env vllm/vllm-openai:v0.20.0 --model m")
    assert line.container is not None
    facts = Facts()
    container_facts(line.container, facts, Source.SERVE)
    assert "--env-file ./vllm.env" in facts.why_missing("env.VLLM_USE_DEEP_GEMM")


def test_an_attention_backend_exported_here_is_not_the_containers():
    line = parse_serve_string("docker run vllm/vllm-openai:v0.20.0 --model m")
    facts = Facts()
    line.to_facts(facts, Source.SERVE, env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    assert "serve.attention_backend" not in facts
    passed = parse_serve_string(
        "docker run -e VLLM_ATTENTION_BACKEND vllm/vllm-openai:v0.20.0 --model m"
    )
    facts = Facts()
    passed.to_facts(facts, Source.SERVE, env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    assert facts.value("serve.attention_backend") == "FLASHINFER"


def test_bind_mounts_map_the_containers_paths_to_this_machines():
    line = parse_serve_string(
        "docker run -v ~/.cache/huggingface:/root/.cache/huggingface -v /data/models:/models:ro "
        "--mount type=bind,source=/srv/m,target=/m2 -v named-volume:/cache "
        "vllm/vllm-openai:v0.20.0 --model /models/qwen"
    )
    run = line.container
    assert run is not None
    assert run.host_path("/models/qwen") == "/data/models/qwen"
    assert run.host_path("/m2/x/config.json") == "/srv/m/x/config.json"
    assert run.host_path("/modelsX/qwen") is None  # not under /models
    assert run.host_path("/cache/x") is None  # a named volume has no path here


def test_a_model_path_inside_the_container_is_read_only_through_a_mount(tmp_path):
    # `docker run ... --model /tmp/x` read this machine's /tmp/x, which is not the container's
    model = tmp_path / "qwen"
    model.mkdir()
    (model / "config.json").write_text(
        (Path(__file__).parent / "fixtures/models/Qwen3-32B/config.json").read_text()
    )
    mapped = check(
        f"docker run -v {tmp_path}:/models vllm/vllm-openai:v0.20.0 --model /models/qwen"
    )
    facts = mapped["facts"]["facts"]
    assert facts["model.architectures"]["value"] == ["Qwen3ForCausalLM"]
    assert facts["model.id"]["value"] == "/models/qwen"
    assert str(model) in facts["model.id"]["detail"]
    unmapped = check(f"docker run vllm/vllm-openai:v0.20.0 --model {model}")
    assert "model.architectures" not in unmapped["facts"]["facts"]
    assert "no `docker run -v` mount maps" in unmapped["facts"]["missing"]["model"]
