"""The ways teams drop the gate into a pipeline, run here as far as this machine allows:

- action.yml (a composite GitHub Action): its `run` steps executed by bash the way the runner
  executes them (`bash -e -o pipefail`, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files), after the
  distribution was built from this checkout and installed into a scratch directory; the
  `uses` step (the SARIF upload) is checked for what it uploads.
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


# -- the GitHub Action ----------------------------------------------------------------------

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
_EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _evaluate(text: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        expr = match.group(1)
        if expr.startswith("inputs."):
            return inputs[expr[len("inputs."):]]
        if expr == "steps.gate.outputs.exit-code":
            return outputs.get("exit-code", "")
        raise AssertionError(f"expression the test runner does not know: {expr}")

    return _EXPRESSION.sub(value, text)


def run_action(workdir: Path, prefix: Path, **given: str) -> dict:
    """Run the action's steps in ``workdir``; returns the outputs, the step summary, each
    step's result and the upload step's inputs."""
    inputs = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
    inputs.update(given)
    output_file, summary_file = workdir / "github-output", workdir / "step-summary.md"
    output_file.write_text(""), summary_file.write_text("")
    env = clean_env()
    # the installed distribution first: its script, then its package
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(prefix)
    env.update(GITHUB_OUTPUT=str(output_file), GITHUB_STEP_SUMMARY=str(summary_file))
    outputs: dict[str, str] = {}
    steps, upload = [], None
    for step in ACTION["runs"]["steps"]:
        if "uses" in step:
            upload = {k: _evaluate(str(v), inputs, outputs) for k, v in step["with"].items()}
            upload["uses"] = step["uses"]
            continue
        assert step["shell"] == "bash"
        step_env = {**env, **{k: _evaluate(str(v), inputs, outputs)
                              for k, v in step.get("env", {}).items()}}
        script = _evaluate(step["run"], inputs, outputs)
        done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script],
                              cwd=workdir, env=step_env, capture_output=True, text=True, timeout=600)
        steps.append((step["name"], done))
        for line in output_file.read_text().splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
        if done.returncode != 0:
            break
    return {"outputs": outputs, "summary": summary_file.read_text(), "steps": steps,
            "upload": upload}


def _build_isolation() -> list[str]:
    """Build without isolation (no download of the build backend) only where the installed
    setuptools can build a wheel by itself: 70.1 and later carry bdist_wheel; older ones need
    the `wheel` package, which a fresh Python often lacks."""
    from importlib import metadata

    from packaging.version import Version

    try:
        setuptools = Version(metadata.version("setuptools"))
    except metadata.PackageNotFoundError:
        return []
    if setuptools >= Version("70.1") or importlib.util.find_spec("wheel") is not None:
        return ["--no-build-isolation"]
    return []


def reinstall(prefix: Path) -> str:
    """pip arguments that install this checkout over ``prefix`` again (as each job does)."""
    return " ".join(["--no-deps", *_build_isolation(), "--upgrade", "--target", str(prefix)])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """This checkout built and installed by the action's own install step (into a directory,
    not over the test environment)."""
    prefix = tmp_path_factory.mktemp("prefix")
    pip_args = " ".join(["--no-deps", *_build_isolation(), "--target", str(prefix)])
    workdir = tmp_path_factory.mktemp("install")
    install = next(s for s in ACTION["runs"]["steps"] if s["name"] == "Install vllm-doctor")
    env = {**clean_env(), "PACKAGE": str(ROOT), "PIP_ARGS": pip_args,
           "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(prefix)}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", install["run"]], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("vllm-doctor 0.1.0")
    # the distribution is vllm-preflight (the index's vllm-doctor is another project) ...
    assert [d.name for d in prefix.glob("*.dist-info")] == ["vllm_preflight-0.1.0.dist-info"]
    # ... and carries the rule base, the knowledge tables and the examples
    assert (prefix / "vllm_doctor" / "rules").is_dir()
    assert list((prefix / "vllm_doctor" / "knowledge" / "data").glob("*.json"))
    assert (prefix / "vllm_doctor" / "examples" / "diffusion-gemma-tp2" / "scenario.yaml").is_file()
    return prefix


def test_action_fails_the_job_on_an_error_and_uploads_sarif(tmp_path, installed):
    repo = scratch_repo(tmp_path / "repo")
    result = run_action(repo, installed, args="--serve-config deploy/serve.yaml "
                        "--model-config model --report collect-env.txt", package=str(ROOT),
                        **{"pip-args": reinstall(installed)})
    names = [name for name, _ in result["steps"]]
    assert names == ["Install vllm-doctor", "Run the gate", "Gate"]
    gate = dict(result["steps"])["Run the gate"]
    assert result["outputs"]["exit-code"] == "1"
    assert dict(result["steps"])["Gate"].returncode == 1  # the job fails
    sarif = json.loads((repo / "vllm-doctor.sarif").read_text())
    (model001,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    assert model001["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "deploy/serve.yaml"
    assert "::error file=deploy/serve.yaml,line=3,title=MODEL001" in gate.stdout
    assert "## vllm-doctor report" in result["summary"] and "MODEL001" in result["summary"]
    assert result["upload"] == {"uses": "github/codeql-action/upload-sarif@v3",
                                "sarif_file": "vllm-doctor.sarif", "category": "vllm-doctor"}


def test_action_passes_under_fail_on_never_and_reports_bad_input_as_2(tmp_path, installed):
    repo = scratch_repo(tmp_path / "repo")
    args = "--serve-config deploy/serve.yaml --model-config model --report collect-env.txt"
    passed = run_action(repo, installed, args=args, package=str(ROOT), **{
        "fail-on": "never", "pip-args": reinstall(installed)})
    assert passed["outputs"]["exit-code"] == "0"
    assert dict(passed["steps"])["Gate"].returncode == 0
    bad = run_action(repo, installed, args="--serve-config deploy/missing.yaml", package=str(ROOT),
                     **{"pip-args": reinstall(installed)})
    assert bad["outputs"]["exit-code"] == "2"
    assert dict(bad["steps"])["Gate"].returncode == 2
    assert bad["summary"] == ""  # no report for input the gate could not read


def test_action_arguments_are_split_not_evaluated(tmp_path, installed):
    repo = scratch_repo(tmp_path / "repo")
    marker = tmp_path / "evaluated"
    result = run_action(repo, installed, args=f"--serve 'vllm serve m -tp 2' --select '$(touch {marker})'",
                        package=str(ROOT), **{"pip-args": reinstall(installed)})
    assert not marker.exists()
    assert result["outputs"]["exit-code"] == "2"  # the odd prefix is an unknown --select


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
