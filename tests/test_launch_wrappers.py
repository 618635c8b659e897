"""The wrappers in front of vLLM on a serve line (serveline/launch.py): ``env -i`` / ``env -u``
keep this machine's variables from vLLM, ``sudo`` resets them by a policy not read here and runs
vLLM as another user, so this machine's environment and user facts stand only where they pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.serveline.command import parse_serve_string


def _machine() -> Facts:
    facts = Facts()
    facts.set("env.VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1", Source.ENV)
    facts.set("env.VLLM_LOGGING_LEVEL", "DEBUG", Source.ENV)
    facts.set("container.uid", 1000, Source.MACHINE, "os.getuid()")
    facts.set("container.home", "/home/me", Source.MACHINE, "HOME")
    return facts


def _line_facts(serve: str, facts: Facts | None = None) -> Facts:
    facts = facts or _machine()
    parse_serve_string(serve).to_facts(facts, Source.SERVE, env={})
    return facts


def test_env_i_keeps_this_machines_variables_from_vllm():
    facts = _line_facts("env -i PATH=/usr/bin HF_HOME=/data vllm serve m")
    assert "env.VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in facts
    assert facts.why_missing("env.VLLM_ALLOW_LONG_MAX_MODEL_LEN") is None  # known unset
    assert facts.value("env.HF_HOME") == "/data"  # the line's own reach vLLM
    assert facts.value("container.uid") == 1000  # env changes no user


def test_variables_before_env_i_are_cleared_too():
    facts = _line_facts("VLLM_USE_V1=0 env -i VLLM_LOGGING_LEVEL=INFO vllm serve m")
    assert "env.VLLM_USE_V1" not in facts
    assert facts.value("env.VLLM_LOGGING_LEVEL") == "INFO"


def test_env_u_unsets_one_variable():
    facts = _line_facts("env -u VLLM_ALLOW_LONG_MAX_MODEL_LEN vllm serve m")
    assert "env.VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in facts
    assert facts.value("env.VLLM_LOGGING_LEVEL") == "DEBUG"


def test_sudo_leaves_the_environment_to_its_policy_and_the_user_unknown():
    facts = _line_facts("sudo -u vllm VLLM_USE_V1=1 vllm serve m")
    assert "env.VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in facts
    assert "sudoers" in facts.why_missing("env.VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    assert facts.value("env.VLLM_USE_V1") == "1"  # sudo VAR=value passes it
    assert "container.uid" not in facts
    assert facts.is_unknowable("container.home")
    assert "as vllm" in facts.why_missing("container.home")


@pytest.mark.parametrize(
    "wrapper", ["sudo -E", "sudo --preserve-env=VLLM_ALLOW_LONG_MAX_MODEL_LEN"]
)
def test_sudo_preserve_env_keeps_the_variables(wrapper):
    facts = _line_facts(f"{wrapper} vllm serve m")
    assert facts.value("env.VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"
    assert facts.value("container.uid") is None  # root, not uid 1000


def test_sudo_as_root_changes_nothing_for_root():
    facts = _machine()
    facts.set("container.uid", 0, Source.MACHINE, "os.getuid()")
    _line_facts("sudo -E vllm serve m", facts)
    assert facts.value("container.uid") == 0
    assert facts.value("container.home") == "/home/me"


def test_a_plain_line_keeps_this_machines_environment():
    facts = _line_facts("nohup vllm serve m")
    assert facts.value("env.VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"
    assert facts.value("container.uid") == 1000


def test_an_attention_backend_exported_here_does_not_pass_env_i():
    facts = Facts()
    parse_serve_string("env -i vllm serve m").to_facts(
        facts, Source.SERVE, env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    )
    assert "serve.attention_backend" not in facts


def _model(tmp_path: Path) -> Path:
    """A Llama-shaped model whose context is 4096 tokens."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "max_position_embeddings": 4096,
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_hidden_layers": 32,
                "num_key_value_heads": 8,
                "vocab_size": 32000,
            }
        )
    )
    return model


def test_env_i_draws_the_error_an_exported_override_would_have_hidden(tmp_path: Path):
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 exported here hid ARGS002 for a line that starts vLLM
    # under `env -i`, where vLLM never sees it and refuses the length
    model = _model(tmp_path)

    def codes(prefix: str) -> list[str]:
        run = doctor_run(
            "check", "--format", "json", "--offline", "--no-config", "--fail-on", "never",
            "--vllm-version", "0.20.0",
            "--serve", f"{prefix} vllm serve {model} --max-model-len 100000",
            env={**os.environ, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        return [f["code"] for f in json.loads(run.stdout)["findings"]]

    assert "ARGS002" not in codes("nohup")
    assert "ARGS002" in codes("env -i PATH=/usr/bin")


# an LLM(...) script's process reads the os.environ the script leaves, not this machine's
SCRIPT = """import os
os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
os.environ.setdefault("VLLM_USE_V1", "1")
os.environ.pop("VLLM_LOGGING_LEVEL", None)
os.environ["VLLM_CACHE_ROOT"] = cache_dir
from vllm import LLM
llm = LLM(model="m", max_model_len=100000)
os.environ["VLLM_USE_DEEP_GEMM"] = "0"
"""


def test_a_scripts_environment_writes_stand_over_this_machines():
    facts = Facts()
    facts.set("env.VLLM_LOGGING_LEVEL", "DEBUG", Source.ENV)
    facts.set("env.VLLM_CACHE_ROOT", "/root/.cache/vllm", Source.ENV)
    parse_serve_string(SCRIPT).to_facts(facts, Source.SERVE, env={})
    assert facts.value("env.VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"
    assert facts.value("env.VLLM_USE_V1") == "1"  # setdefault, unset here
    assert "env.VLLM_LOGGING_LEVEL" not in facts  # popped by the script
    assert "env.VLLM_CACHE_ROOT" not in facts  # a variable's value: not known
    assert "cache_dir" in facts.why_missing("env.VLLM_CACHE_ROOT")
    assert "env.VLLM_USE_DEEP_GEMM" not in facts  # written after the call


def test_a_script_setting_the_override_draws_no_error(tmp_path: Path):
    script = SCRIPT.replace('"m"', repr(str(_model(tmp_path))))
    run = doctor_run(
        "check", "--format", "json", "--offline", "--no-config", "--fail-on", "never",
        "--vllm-version", "0.20.0", "--serve", script, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "ARGS002" not in [f["code"] for f in json.loads(run.stdout)["findings"]]
    # the same call without the script's write: vLLM refuses the length
    plain = script.replace('os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"\n', "")
    run = doctor_run(
        "check", "--format", "json", "--offline", "--no-config", "--fail-on", "never",
        "--vllm-version", "0.20.0", "--serve", plain, timeout=120,
    )  # fmt: skip
    assert "ARGS002" in [f["code"] for f in json.loads(run.stdout)["findings"]]


@pytest.mark.parametrize(
    ("serve", "said"),
    [
        ("ssh gpu1 vllm serve m", "`ssh` runs `vllm serve`"),
        ("singularity run --nv vllm.sif vllm serve m", "`singularity` runs `vllm serve`"),
        (
            "apptainer exec vllm.sif python -m vllm.entrypoints.openai.api_server --model m",
            "`apptainer` runs `vllm serve`",
        ),
        ("kubectl exec -it pod -- vllm serve m", "`kubectl` runs `vllm serve`"),
        ("srun -N1 --gres=gpu:1 vllm serve m", "`srun` runs `vllm serve`"),
        # runners of another Python environment: `uv run vllm serve M` was read as a bare
        # serve line whose model is "uv", judged on this interpreter's packages
        ("uv run vllm serve Qwen/Qwen3-8B", "`uv run` runs `vllm serve` in another Python"),
        (
            "conda run -n vllm --no-capture-output vllm serve m -tp 2",
            "`conda run` runs `vllm serve` in another Python",
        ),
        ("uvx --from vllm vllm serve m", "`uvx` runs `vllm serve` in another Python"),
        (
            "pixi run -e gpu python -m vllm.entrypoints.openai.api_server --model m",
            "`pixi run` runs `vllm serve` in another Python",
        ),
    ],
)
def test_a_runner_that_starts_vllm_elsewhere_is_one_line_and_exit_2(serve, said):
    # `singularity run --nv ...` was read as vLLM's own words: model "singularity", ARGS100's
    # error for --nv, judged on this machine's packages
    run = doctor_run("check", "--offline", "--no-config", "--serve", serve, timeout=120)
    assert run.returncode == 2, run.stdout
    assert said in run.stderr
    assert "--report" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_model_named_like_a_runner_is_still_a_model():
    line = parse_serve_string("vllm serve uv --max-model-len 4096")
    assert line.model == "uv"
