"""The CI-gate contract of `check`, run as a pipeline runs it: every format agrees with the
exit code; SARIF validates against the official SARIF 2.1.0 schema (vendored in
tests/schemas, from the OASIS sarif-spec repository) and carries what GitHub code scanning
requires; --strict, unknown prefixes and codes; the configuration file; the rule base's version.

The inputs are the bundled examples (real collect-env reports, config.json files and a crash
log from upstream vLLM issues) and the shipped rule base.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from test_cli_check import RULES, doctor

HERE = Path(__file__).parent
SARIF_SCHEMA = json.loads(
    (HERE / "schemas" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")
)
EXAMPLES = HERE.parent / "vllm_doctor" / "examples"
DIFFUSION = EXAMPLES / "diffusion-gemma-tp2"
HEALTHY = ["check", "--example", "healthy-h100-llama"]  # nothing applies, nothing undecided
# nothing applies; MEM001 undecided: an A100 (40 or 80 GiB) holds 8B weights and 128k context
# at 0.8 utilisation with 80 GiB only, and its name does not say which
UNDECIDED = [
    *HEALTHY,
    "--gpu",
    "A100",
    "--serve",
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 128k --gpu-memory-utilization 0.8",
]
FAILING = ["check", "--example", "diffusion-gemma-tp2"]  # MODEL001 (error) applies


def validate_sarif(text: str) -> dict:
    data = json.loads(text)
    validator = jsonschema.Draft4Validator(SARIF_SCHEMA, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    # what GitHub code scanning adds to the schema: each result has a location with a file
    # URI, each rule has help text
    run = data["runs"][0]
    for result in run["results"]:
        (loc,) = result["locations"]
        assert loc["physicalLocation"]["artifactLocation"]["uri"]
        assert loc["physicalLocation"]["region"]["startLine"] >= 1  # GitHub: required
        assert re.fullmatch(
            r"[0-9a-f]{16}:1", result["partialFingerprints"]["primaryLocationLineHash"]
        )
        assert result["message"]["text"]
        rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
        assert rule["id"] == result["ruleId"]
        assert rule["help"]["text"] and rule["help"]["markdown"]
    return data


def repo_with_serve_config(tmp_path: Path) -> Path:
    """A repository as a team keeps it: the serve config, the model's config.json and the
    collect-env report of the target machine (all from the diffusion-gemma example, the
    machine on release 0.24.0: the example's nightly may be any of 0.23.0-0.26.0, of which
    only 0.24.0 has the bug, so without its log it draws a warning, not the error a gate
    fails on)."""
    repo = tmp_path / "repo"
    shutil.copytree(DIFFUSION / "model", repo / "model")
    report = (DIFFUSION / "collect-env.txt").read_text(encoding="utf-8")
    nightly = "0.23.1rc1.dev20+g0d8097964 (git sha: 0d8097964)"
    assert nightly in report
    (repo / "collect-env.txt").write_text(report.replace(nightly, "0.24.0"), encoding="utf-8")
    (repo / "deploy").mkdir()
    (repo / "deploy" / "serve.yaml").write_text(
        "# serve config for the diffusion model\n"
        "model: nvidia/diffusiongemma-26B-A4B-IT-NVFP4\n"
        "max-model-len: 8192\n"
        "tensor-parallel-size: 2\n",
        encoding="utf-8",
    )
    return repo


GATE_ARGS = [
    "check",
    "--serve-config",
    "deploy/serve.yaml",
    "--model-config",
    "model",
    "--report",
    "collect-env.txt",
]


# -- SARIF --------------------------------------------------------------------------------


def test_sarif_of_a_serve_config_points_at_the_line_and_validates(tmp_path):
    repo = repo_with_serve_config(tmp_path)
    run = doctor(*GATE_ARGS, "--format", "sarif", cwd=repo)
    assert run.returncode == 1, run.stderr
    data = validate_sarif(run.stdout)
    results = {r["ruleId"]: r for r in data["runs"][0]["results"]}
    model001 = results["MODEL001"]
    assert model001["level"] == "error" and model001["kind"] == "fail"
    physical = model001["locations"][0]["physicalLocation"]
    # relative to the repository root, which the run names as %SRCROOT%
    assert physical["artifactLocation"] == {"uri": "deploy/serve.yaml", "uriBaseId": "%SRCROOT%"}
    assert data["runs"][0]["originalUriBaseIds"] == {
        "%SRCROOT%": {"uri": repo.resolve().as_uri() + "/"}
    }
    assert physical["region"]["startLine"] == 4  # the tensor-parallel-size line
    assert model001["partialFingerprints"]["vllmDoctorFinding/v1"]
    # the line hash follows the line's content: a line added above moves the alert, not its id
    serve = repo / "deploy" / "serve.yaml"
    serve.write_text("# reviewed\n" + serve.read_text())
    moved = validate_sarif(doctor(*GATE_ARGS, "--format", "sarif", cwd=repo).stdout)
    (again,) = [r for r in moved["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    assert again["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    assert again["partialFingerprints"] == model001["partialFingerprints"]
    serve.write_text(
        serve.read_text().replace("tensor-parallel-size: 2", "tensor-parallel-size: 2  # two H100")
    )
    edited = validate_sarif(doctor(*GATE_ARGS, "--format", "sarif", cwd=repo).stdout)
    (third,) = [r for r in edited["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    assert (
        third["partialFingerprints"]["primaryLocationLineHash"]
        != model001["partialFingerprints"]["primaryLocationLineHash"]
    )
    # undecided rules are no alerts: they are listed in the run's properties
    assert all(r["properties"]["verdict"] == "applies" for r in data["runs"][0]["results"])
    props = data["runs"][0]["properties"]
    assert {u["code"] for u in props["undecided"]} >= {"MEM001", "HW001"}
    assert props["rulebase"]["newest_release"] == "0.33.0" and props["rulebase"]["version"]


@pytest.mark.parametrize(
    "args",
    [
        FAILING,
        HEALTHY,
        ["check", "--example", "gemma4-mtp-tp2"],
        ["check", "--serve", "vllm serve m -tp 2"],
    ],
)
def test_sarif_validates_with_and_without_input_files(args):
    run = doctor(*args, "--format", "sarif", "--fail-on", "never")
    assert run.returncode == 0, run.stderr
    data = validate_sarif(run.stdout)
    assert "informationUri" not in data["runs"][0]["tool"]["driver"]


def test_sarif_without_files_uses_the_placeholder_location():
    run = doctor(
        "check",
        "--serve",
        "vllm serve m -tp 2",
        "--format",
        "sarif",
        "--no-default-rules",
        "--rules-dir",
        str(RULES),
        env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
    )
    data = validate_sarif(run.stdout)
    locations = {
        json.dumps(r["locations"][0]["physicalLocation"]) for r in data["runs"][0]["results"]
    }
    assert locations == {
        json.dumps({"artifactLocation": {"uri": "vllm-serve"}, "region": {"startLine": 1}})
    }


def test_sarif_of_a_serve_line_from_a_workflow_points_at_the_workflow(tmp_path):
    """In GitHub Actions a serve line given to the Action's `args` is held by the workflow
    file: the findings point at the line that writes the flag, relative to the workspace."""
    repo = repo_with_serve_config(tmp_path)
    workflow = repo / ".github" / "workflows" / "preflight.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(
        "on: pull_request\njobs:\n  gate:\n    steps:\n      - uses: org/doctor@v1\n"
        "        with:\n          args: >-\n            --model-config model --report collect-env.txt\n"
        "            --serve 'vllm serve nvidia/diffusiongemma-26B-A4B-IT-NVFP4 -tp 2'\n"
    )
    sub = repo / "deploy"
    env = {
        "GITHUB_WORKSPACE": str(repo),
        "GITHUB_WORKFLOW_REF": "org/app/.github/workflows/preflight.yml@refs/pull/7/merge",
    }
    args = [
        "check",
        "--model-config",
        "../model",
        "--report",
        "../collect-env.txt",
        "--format",
        "sarif",
        "--serve",
        "vllm serve nvidia/diffusiongemma-26B-A4B-IT-NVFP4 -tp 2",
    ]
    data = validate_sarif(doctor(*args, cwd=sub, env=env).stdout)
    (model001,) = [r for r in data["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    physical = model001["locations"][0]["physicalLocation"]
    assert physical == {
        "artifactLocation": {"uri": ".github/workflows/preflight.yml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 9},
    }
    assert (
        data["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    )
    # outside Actions the same serve line is in no file: the model's config.json holds the
    # finding's other evidence, at its architectures key, relative to the git checkout around
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    data = validate_sarif(doctor(*args, cwd=sub).stdout)
    (model001,) = [r for r in data["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    physical = model001["locations"][0]["physicalLocation"]
    config = (repo / "model" / "config.json").read_text().splitlines()
    assert physical["artifactLocation"] == {"uri": "model/config.json", "uriBaseId": "%SRCROOT%"}
    assert '"architectures"' in config[physical["region"]["startLine"] - 1]


def test_sarif_under_strict_reports_undecided_errors_as_failures():
    run = doctor(*UNDECIDED, "--strict", "--format", "sarif")
    assert run.returncode == 1
    data = validate_sarif(run.stdout)
    results = data["runs"][0]["results"]
    assert results and all(
        r["properties"]["verdict"] == "undecided" and r["level"] == "error" and r["kind"] == "fail"
        for r in results
    )
    assert all(
        "cannot be decided (--strict fails the run on it)" in r["message"]["text"] for r in results
    )
    assert not validate_sarif(doctor(*UNDECIDED, "--format", "sarif").stdout)["runs"][0]["results"]


def test_sarif_marks_ignored_findings_as_suppressed(tmp_path):
    ignore = tmp_path / "ignore.yaml"
    ignore.write_text("ignore:\n  - {code: MODEL001, reason: we serve at tp 1 in production}\n")
    run = doctor(*FAILING, "--format", "sarif", "--ignore-file", str(ignore))
    assert run.returncode == 0, run.stderr  # the only error is accepted
    data = validate_sarif(run.stdout)
    (model001,) = [r for r in data["runs"][0]["results"] if r["ruleId"] == "MODEL001"]
    assert model001["suppressions"][0]["justification"] == "we serve at tp 1 in production"


# -- JUnit --------------------------------------------------------------------------------


def junit(run) -> ET.Element:
    return ET.fromstring(run.stdout).find("testsuite")


@pytest.mark.parametrize(
    "fail_on, exit_code, failures",
    [("error", 0, 0), ("warning", 0, 0), ("info", 1, 1), ("never", 0, 0)],
)
def test_junit_failures_agree_with_fail_on_and_the_exit_code(fail_on, exit_code, failures):
    # ENV901 (info) applies: a failure only when --fail-on info
    run = doctor(
        "check",
        "--no-default-rules",
        "--rules-dir",
        str(RULES),
        "--format",
        "junit",
        "--fail-on",
        fail_on,
        env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
    )
    assert run.returncode == exit_code, run.stderr
    suite = junit(run)
    assert suite.get("failures") == str(failures)
    case = next(c for c in suite.iter("testcase") if c.get("name").startswith("ENV901"))
    if failures:
        assert case.find("failure") is not None
    else:
        assert case.find("failure") is None and "below --fail-on" in case.find("system-out").text


def test_junit_on_the_failing_example_has_one_failure_and_exit_1():
    run = doctor(*FAILING, "--format", "junit")
    assert run.returncode == 1
    suite = junit(run)
    assert suite.get("failures") == "1"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["knowledge_newest_release"] == "0.33.0" and props["rulebase"].startswith("0.1.0+")


def test_junit_reports_only_ignored_findings_as_ignored(tmp_path):
    # an entry for the prefix MODEL accepts MODEL001 (it applies); the other MODEL rules do
    # not apply and stay passing tests, not "skipped"
    ignore = tmp_path / "ignore.yaml"
    ignore.write_text("ignore:\n  - {code: MODEL, reason: model team owns these}\n")
    run = doctor(*FAILING, "--format", "junit", "--ignore-file", str(ignore))
    assert run.returncode == 0, run.stderr
    suite = junit(run)
    ignored = sorted(
        c.get("name").split()[0]
        for c in suite.iter("testcase")
        if c.find("skipped") is not None
        and c.find("skipped").get("message") == "ignored: model team owns these"
    )
    # what the entry accepts: the MODEL findings that apply or are undecided (an undecided
    # rule can fail a --strict run, so an entry may accept it too)
    accepted = json.loads(
        doctor(*FAILING, "--format", "json", "--ignore-file", str(ignore)).stdout
    )["suppressed"]
    expected = sorted(f["code"] for f in accepted)
    assert "MODEL001" in expected and all(c.startswith("MODEL") for c in expected)
    assert ignored == expected
    model_cases = [c for c in suite.iter("testcase") if c.get("name").startswith("MODEL")]
    assert len(model_cases) > len(expected)  # the MODEL rules that do not apply still pass
    assert all(
        c.find("skipped") is None for c in model_cases if c.get("name").split()[0] not in expected
    )
    assert suite.get("failures") == "0"


def test_control_characters_from_a_crash_log_keep_junit_valid(tmp_path):
    log = tmp_path / "crash.log"
    # the example's real crash log as a terminal with colours writes it (ANSI escapes), and a bell
    lines = (DIFFUSION / "crash.log").read_text(encoding="utf-8").splitlines()
    log.write_text("".join(f"\x1b[31m{line}\x1b[0m\x07\n" for line in lines), encoding="utf-8")
    for fmt in ("junit", "sarif", "json", "gitlab"):
        run = doctor(*FAILING, "--log", str(log), "--format", fmt)
        assert run.returncode == 1, (fmt, run.stderr)
        if fmt == "junit":
            suite = junit(run)
            failure = next(
                c.find("failure") for c in suite.iter("testcase") if c.find("failure") is not None
            )
            assert "seen in the log" in failure.text and "\\x07" in failure.text
        else:
            json.loads(run.stdout)


# -- GitHub annotations and GitLab Code Quality ------------------------------------------


def test_github_annotations_point_at_the_serve_config(tmp_path):
    repo = repo_with_serve_config(tmp_path)
    run = doctor(*GATE_ARGS, "--format", "github", cwd=repo)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines and all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    (model001,) = [line for line in lines if "title=MODEL001" in line]
    assert model001.startswith("::error file=deploy/serve.yaml,line=4,title=MODEL001")
    assert "\n" not in model001 and "%0AMore: vllm-doctor explain MODEL001" in model001


def test_github_level_follows_fail_on():
    run = doctor(*FAILING, "--format", "github", "--fail-on", "never")
    assert run.returncode == 0
    assert run.stdout.startswith("::warning ")  # an error finding that fails nothing


def test_gitlab_code_quality_report(tmp_path):
    repo = repo_with_serve_config(tmp_path)
    run = doctor(*GATE_ARGS, "--format", "gitlab", cwd=repo)
    assert run.returncode == 1
    issues = json.loads(run.stdout)
    assert isinstance(issues, list) and issues
    for issue in issues:
        assert {"description", "check_name", "fingerprint", "severity", "location"} <= set(issue)
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert issue["location"]["path"] and issue["location"]["lines"]["begin"] >= 1
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    (model001,) = [i for i in issues if i["check_name"] == "MODEL001"]
    assert model001["severity"] == "critical"
    assert model001["location"] == {"path": "deploy/serve.yaml", "lines": {"begin": 4}}
    clean = doctor(*HEALTHY, "--format", "gitlab")
    assert clean.returncode == 0 and json.loads(clean.stdout) == []


# -- strict mode and unknown names --------------------------------------------------------


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_prefix_is_exit_2(option):
    run = doctor(*HEALTHY, option, "MODLE")
    assert run.returncode == 2
    assert f"{option}: no rule code starts with MODLE" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_strict_fails_on_undecided_errors():
    loose = doctor(*UNDECIDED)
    assert loose.returncode == 0, loose.stderr
    strict = doctor(*UNDECIDED, "--strict", "--format", "json")
    assert strict.returncode == 1
    data = json.loads(strict.stdout)
    assert data["summary"]["strict"] is True
    # a rule left open only by facts this input can never supply (a report shows no
    # container identity) is named, not failed
    undecided_errors = sorted(
        f["code"]
        for f in data["undecided"]
        if f["severity"] == "error" and not all(m.get("unknowable") for m in f["missing"])
    )
    assert undecided_errors and not data["findings"]
    assert sorted(data["summary"]["failing"]) == undecided_errors
    assert (
        f"--strict: {len(undecided_errors)} undecided at or above --fail-on error fail the run"
    ) in strict.stderr
    # under --fail-on never nothing fails, strict or not
    assert doctor(*UNDECIDED, "--strict", "--fail-on", "never").returncode == 0
    # JUnit says the same as the exit code
    suite = junit(doctor(*UNDECIDED, "--strict", "--format", "junit"))
    assert suite.get("failures") == str(len(undecided_errors))


def test_zero_rules_selected_warns_and_strict_fails():
    run = doctor(*HEALTHY, "--select", "HW001", "--ignore", "HW001")
    assert run.returncode == 0
    assert "warning: no rule selected" in run.stderr
    strict = doctor(*HEALTHY, "--select", "HW001", "--ignore", "HW001", "--strict")
    assert strict.returncode == 2 and "no rule selected" in strict.stderr


def test_unknown_code_in_the_ignore_file_warns_and_strict_fails(tmp_path):
    ignore = tmp_path / "ignore.yaml"
    ignore.write_text("ignore:\n  - {code: HW0001, reason: typo of HW001}\n")
    run = doctor(*HEALTHY, "--ignore-file", str(ignore))
    assert run.returncode == 0
    assert "ignore entry HW0001 matches no rule code" in run.stderr
    strict = doctor(*HEALTHY, "--ignore-file", str(ignore), "--strict")
    assert strict.returncode == 2
    assert f"{ignore}:ignore[0]: ignore entry HW0001 matches no rule code" in strict.stderr


# -- configuration ------------------------------------------------------------------------


def test_pyproject_configuration_is_found_upward_and_the_command_line_wins(tmp_path):
    (tmp_path / ".git").mkdir()  # the search goes up to the repository's root
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "serving"\n\n[tool.vllm-doctor]\nformat = "json"\nstrict = true\n'
        'select = ["MEM", "ENV"]\n'
    )
    sub = tmp_path / "deploy" / "prod"
    sub.mkdir(parents=True)
    run = doctor(*UNDECIDED, cwd=sub)
    assert run.returncode == 1, run.stderr  # strict from the file: undecided errors fail
    data = json.loads(run.stdout)
    assert data["summary"]["rules_checked"] == len(
        list(json.loads(doctor("rules", "list", "--format", "json", "--select", "MEM,ENV").stdout))
    )
    # the command line wins over each key
    run = doctor(*HEALTHY, "--no-strict", "--format", "text", "--select", "HW", cwd=sub)
    assert run.returncode == 0 and run.stdout.startswith("Read: ")  # text, not the file's json
    # --no-config ignores the file
    assert doctor(*HEALTHY, "--no-config", cwd=sub).stdout.startswith("Read: ")


def test_environment_sits_between_the_command_line_and_the_settings_file(tmp_path):
    (tmp_path / ".vllm-doctor.toml").write_text('format = "junit"\nfail-on = "never"\n')
    # the file alone: junit, and MODEL001 passes under fail-on never
    run = doctor(*FAILING, cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.startswith("<?xml"), run.stderr
    # the environment over the file
    env = {
        "VLLM_DOCTOR_FORMAT": "json",
        "VLLM_DOCTOR_FAIL_ON": "error",
        "VLLM_DOCTOR_SELECT": "MODEL,PAR",
    }
    run = doctor(*FAILING, cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    assert data["summary"]["fail_on"] == "error"
    assert {f["code"][:3] for f in data["undecided"] + data["findings"]} <= {"MOD", "PAR"}
    # the command line over the environment; an empty variable counts as unset
    run = doctor(
        *FAILING,
        "--fail-on",
        "never",
        "--format",
        "text",
        cwd=tmp_path,
        env={**env, "VLLM_DOCTOR_STRICT": ""},
    )
    assert run.returncode == 0 and run.stdout.startswith("Read: "), run.stderr


@pytest.mark.parametrize(
    "variable, value",
    [
        ("VLLM_DOCTOR_FAIL_ON", "critical"),
        ("VLLM_DOCTOR_STRICT", "maybe"),
        ("VLLM_DOCTOR_FORMAT", "yaml"),
    ],
)
def test_a_bad_environment_setting_names_the_variable(variable, value):
    run = doctor(*HEALTHY, env={variable: value})
    assert run.returncode == 2
    assert (
        run.stderr.startswith(f"vllm-doctor: {variable}: {value!r} is not")
        and "Traceback" not in run.stderr
    )


def test_another_projects_broken_pyproject_is_not_our_input(tmp_path):
    """A pyproject.toml that never names the table cannot configure the doctor: broken, it is
    passed over; one that does name it and is broken is still bad input."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project\nname = "unrelated"\n')
    sub = tmp_path / "deploy"
    sub.mkdir()
    run = doctor(*HEALTHY, cwd=sub)
    assert run.returncode == 0, run.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.vllm-doctor]\nstrict = yes\n")
    run = doctor(*HEALTHY, cwd=sub)
    assert run.returncode == 2 and "not valid TOML" in run.stderr


def test_dot_file_wins_over_pyproject_and_carries_ignore_entries(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.vllm-doctor]\nformat = "json"\n')
    (tmp_path / ".vllm-doctor.toml").write_text(
        'format = "junit"\n'
        'ignore-entries = [{code = "MODEL001", reason = "accepted for the demo", expires = 2999-01-01}]\n'
    )
    run = doctor(*FAILING, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    suite = junit(run)
    skipped = [
        c.find("skipped").get("message")
        for c in suite.iter("testcase")
        if c.find("skipped") is not None
    ]
    assert "ignored: accepted for the demo" in skipped


def test_configured_rule_directory_adds_to_the_shipped_rules(tmp_path):
    shutil.copytree(RULES, tmp_path / "team-rules")
    (tmp_path / ".vllm-doctor.toml").write_text('rules-dir = ["team-rules"]\nformat = "json"\n')
    env = {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    data = json.loads(doctor(*HEALTHY, cwd=tmp_path, env=env).stdout)
    listed = json.loads(doctor("rules", "list", "--format", "json").stdout)
    # `check` judges one machine: the FLEET rules (they compare nodes) are `fleet`'s
    shipped = len([r for r in listed if not r["code"].startswith("FLEET")])
    assert data["summary"]["rules_checked"] == shipped + 3
    only = json.loads(doctor(*HEALTHY, "--no-default-rules", cwd=tmp_path, env=env).stdout)
    assert only["summary"]["rules_checked"] == 3


@pytest.mark.parametrize(
    "text, needle",
    [
        ("colour = 1\n", "unknown key(s) colour"),
        ('select = "MODEL"\n', "select must be a list"),
        ("strict = yes\n", "not valid TOML"),
        ('fail-on = "critical"\n', "fail-on 'critical' is not one of error, warning, info, never"),
    ],
)
def test_bad_configuration_is_exit_2(tmp_path, text, needle):
    (tmp_path / ".vllm-doctor.toml").write_text(text)
    run = doctor(*HEALTHY, cwd=tmp_path)
    assert run.returncode == 2 and needle in run.stderr and "Traceback" not in run.stderr


# -- the rule base's version and reach ----------------------------------------------------


def test_outputs_name_the_rule_base_and_the_newest_release():
    data = json.loads(doctor(*HEALTHY, "--format", "json").stdout)
    assert data["rulebase"]["newest_release"] == "0.33.0"
    assert data["rulebase"]["version"].startswith("0.1.0+")
    text = doctor(*HEALTHY).stdout
    assert f"rule base {data['rulebase']['version']}, knowledge up to vLLM 0.33.0" in text
    assert "knowledge up to vLLM 0.33.0" in doctor(*HEALTHY, "--format", "markdown").stdout


def test_a_vllm_version_beyond_the_knowledge_says_so():
    run = doctor(*HEALTHY, "--vllm-version", "0.40.0", "--format", "json")
    notes = json.loads(run.stdout)["notes"]
    assert any("vLLM 0.40.0 (--vllm-version) is newer than 0.33.0" in n for n in notes)
    assert "warning: vLLM 0.40.0 (--vllm-version) is newer than 0.33.0" in run.stderr
    covered = json.loads(doctor(*HEALTHY, "--vllm-version", "0.33.0", "--format", "json").stdout)
    assert not any("is newer than" in n for n in covered["notes"])


def test_no_link_to_another_projects_repository():
    root = HERE.parent
    needle = "github.com/" + "vllm-doctor"  # spelled in two parts so this file does not match
    offenders = [
        str(p)
        for p in root.rglob("*")
        if p.is_file()
        and ".git" not in p.parts
        and p.suffix in (".py", ".json", ".yaml", ".yml", ".md", ".toml", ".sarif", "")
        and needle in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert offenders == []
    data = json.loads(doctor(*FAILING, "--format", "json").stdout)
    assert data["findings"][0]["url"].startswith("https://github.com/vllm-project/vllm/")


def test_configured_ignore_prefixes_and_ignore_file(tmp_path):
    (tmp_path / "accepted.yaml").write_text(
        "ignore:\n  - {code: MODEL001, reason: tp 1 in production}\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.vllm-doctor]\nignore = ["HW", "MEM"]\nignore-file = "accepted.yaml"\nformat = "json"\n'
    )
    data = json.loads(doctor(*FAILING, cwd=tmp_path).stdout)
    checked = {f["code"] for f in data["findings"] + data["undecided"] + data["suppressed"]} | set(
        data["not_applicable"]
    )
    assert checked and not any(code.startswith(("HW", "MEM")) for code in checked)
    assert [f["code"] for f in data["suppressed"]] == ["MODEL001"]
    assert data["summary"]["failing"] == []
    # --ignore on the command line replaces the file's list
    again = json.loads(doctor(*FAILING, "--ignore", "ENV", cwd=tmp_path).stdout)
    assert any(f["code"].startswith("MEM") for f in again["undecided"])
