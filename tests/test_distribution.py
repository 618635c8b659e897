"""The ways teams drop the gate into a pipeline, run here as far as this machine allows (the
GitHub Action: tests/test_action.py):

- .pre-commit-hooks.yaml: pre-commit itself installs the hook from this repository into its
  own environment (from PyPI: typer, rich, ...) and runs it on a scratch repository that keeps
  a serve config.
- Dockerfile: its entrypoint script run here (no Docker engine on this machine).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "diffusion-gemma-tp2"

pytestmark = pytest.mark.slow


def scratch_repo(path: Path) -> Path:
    """A repository that keeps a serve config, its model's config.json and the target
    machine's collect-env report (all from the diffusion-gemma example: MODEL001 applies)."""
    path.mkdir(parents=True)
    shutil.copytree(EXAMPLE / "model", path / "model")
    shutil.copy(EXAMPLE / "collect-env.txt", path / "collect-env.txt")
    (path / "deploy").mkdir()
    (path / "deploy" / "serve.yaml").write_text(
        "model: nvidia/diffusiongemma-26B-A4B-IT-NVFP4\nmax-model-len: 8192\n"
        "tensor-parallel-size: 2\n", encoding="utf-8")
    return path


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "GITHUB_"))}


# -- the pre-commit hook --------------------------------------------------------------------

def test_pre_commit_hook_on_a_repository_with_a_serve_config(tmp_path):
    if shutil.which("pre-commit") is None and importlib.util.find_spec("pre_commit") is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    if not (ROOT / ".git").exists():
        pytest.skip("the hook is installed from this checkout's git history")
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["vllm-doctor"]
    repo = scratch_repo(tmp_path / "repo")
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{
        "repo": str(ROOT), "rev": rev,
        "hooks": [{"id": "vllm-doctor", "args": ["--report", "collect-env.txt", "--model-config", "model"]}],
    }]}))
    (repo / "README.md").write_text("not a serve config\n")
    env = {**clean_env(), "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    pre_commit = [sys.executable, "-m", "pre_commit"]
    failing = subprocess.run([*pre_commit, "run", "--all-files"], cwd=repo, env=env,
                             capture_output=True, text=True, timeout=600)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "vllm-doctor: deploy/serve.yaml" in failing.stdout
    assert "MODEL001" in failing.stdout and "README.md" not in failing.stdout
    # fixed: tensor-parallel 1 -> the hook passes and the commit goes through
    (repo / "deploy" / "serve.yaml").write_text(
        "model: nvidia/diffusiongemma-26B-A4B-IT-NVFP4\nmax-model-len: 8192\n"
        "tensor-parallel-size: 1\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*pre_commit, "install"], cwd=repo, env=env, check=True, capture_output=True)
    commit = subprocess.run([*git, "commit", "-qm", "serve at tp 1"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=600)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "Passed" in commit.stdout + commit.stderr


# -- the container image ----------------------------------------------------------------------

def test_container_entrypoint_runs_the_doctor(tmp_path):
    entrypoint = ROOT / "docker" / "entrypoint.sh"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["/usr/local/bin/vllm-doctor-entrypoint"]' in dockerfile
    assert "COPY docker/entrypoint.sh /usr/local/bin/vllm-doctor-entrypoint" in dockerfile
    env = {**clean_env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["sh", str(entrypoint), "check", "--example", "diffusion-gemma-tp2", "-q"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1 and "MODEL001" in run.stdout
    # no arguments: the default command, a check of this machine
    default = subprocess.run(["sh", str(entrypoint)], capture_output=True, text=True, env=env,
                             timeout=120)
    assert default.returncode in (0, 1) and "Known failures" in default.stdout
    assert "rules checked" in default.stderr


def test_pre_commit_arguments_keep_option_values_apart_from_serve_configs(tmp_path):
    from vllm_doctor.precommit import split_arguments, value_options

    report, config = tmp_path / "collect-env.txt", tmp_path / "serve.yaml"
    report.write_text("x")
    config.write_text("model: m\n")
    # an existing file given as an option's value is that option's, not a serve config
    options, files = split_arguments(["--report", str(report), "--strict", str(config),
                                      "-o", str(report)])
    assert files == [str(config)]
    assert options == ["--report", str(report), "--strict", "-o", str(report)]
    assert {"--report", "--serve-config", "--config", "-f", "-o"} <= value_options()
    assert "--strict" not in value_options() and "-q" not in value_options()
