"""The exit-code contract of `check`, `explain` and `rules`, run as a user runs them.

Each run is a process of its own, forked from a server that has imported the doctor once
(tests/fixtures/doctor_forks.py): its own exit code, streams, working directory and
environment, without paying for the interpreter's start and the imports every time. The
start itself is judged by the bad inputs (tests/test_hardening.py) and the console-script
tests, which start a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
RULES = HERE / "fixtures" / "engine" / "rules"
sys.path.insert(0, str(HERE / "fixtures"))

from doctor_forks import doctor_run  # noqa: E402


def doctor(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    shared = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    return doctor_run(*args, env={**shared, **(env or {})}, cwd=cwd, timeout=120)


def test_exit_0_when_nothing_at_fail_on_and_1_when_something_is():
    env = {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}  # ENV901 (info) applies
    quiet = doctor(
        "check", "--no-default-rules", "--rules-dir", str(RULES), "--format", "json", env=env
    )
    assert quiet.returncode == 0, quiet.stderr
    data = json.loads(quiet.stdout)
    assert [f["code"] for f in data["findings"]] == ["ENV901"]
    assert data["findings"][0]["evidence"][0]["source"] == "environment"
    assert "1 info" in quiet.stderr  # the summary line goes to stderr
    strict = doctor(
        "check", "--no-default-rules", "--rules-dir", str(RULES), "--fail-on", "info", env=env
    )
    assert strict.returncode == 1
    never = doctor(
        "check", "--no-default-rules", "--rules-dir", str(RULES), "--fail-on", "never", env=env
    )
    assert never.returncode == 0
    clean = doctor("check", "--no-default-rules", "--rules-dir", str(RULES), "--fail-on", "info")
    assert clean.returncode == 0


def test_ignore_file_suppresses_and_output_file(tmp_path):
    ignore = tmp_path / "ignore.yaml"
    ignore.write_text("ignore:\n  - {code: ENV9, reason: we know}\n")
    out = tmp_path / "report.xml"
    run = doctor(
        "check",
        "--no-default-rules",
        "--rules-dir",
        str(RULES),
        "--fail-on",
        "info",
        "--ignore-file",
        str(ignore),
        "--format",
        "junit",
        "-o",
        str(out),
        env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
    )
    assert run.returncode == 0, run.stderr
    assert "ignored: we know" in out.read_text()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["check", "--format", "yaml"], "--format"),
        (["check", "--fail-on", "critical"], "--fail-on"),
        (["check", "--example", "no-such-example"], "no example"),
        (
            ["check", "--log", "/nonexistent/crash.log", "--rules-dir", str(RULES)],
            "no such log file",
        ),
        (["check", "--rules-dir", "/nonexistent"], "rule directory does not exist"),
        (["explain", "NOPE999"], "no such rule"),
        (["explain", "--log", "/nonexistent/crash.log"], "no such log file"),
        (["rules", "validate", "--rules-dir", "/nonexistent"], "does not exist"),
        (["no-such-command"], "No such command"),
        (["check", "--serve", "  "], "the serve line is empty"),
        (["facts", "--serve", ""], "the serve line is empty"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    run = doctor(*args)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert needle in run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_bad_rule_and_ignore_files_exit_2(tmp_path):
    bad = tmp_path / "rules" / "hw"
    bad.mkdir(parents=True)
    (bad / "HW999.yaml").write_text("code: HW999\nseverity: [\n")
    run = doctor("check", "--rules-dir", str(tmp_path / "rules"))
    assert run.returncode == 2 and "HW999.yaml:line" in run.stderr and "Traceback" not in run.stderr
    validate = doctor("rules", "validate", "--rules-dir", str(tmp_path / "rules"))
    assert validate.returncode == 2 and "HW999.yaml" in validate.stderr
    ignore = tmp_path / "ignore.yaml"
    ignore.write_text("ignore:\n  - {code: X, reason: r, expires: someday}\n")
    run = doctor(
        "check", "--no-default-rules", "--rules-dir", str(RULES), "--ignore-file", str(ignore)
    )
    assert run.returncode == 2 and "is not a date" in run.stderr


def test_binary_log_is_rejected(tmp_path):
    log = tmp_path / "crash.log"
    log.write_bytes(b"\x00\x01\x02binary")
    run = doctor("explain", "--log", str(log))
    assert run.returncode == 2 and "binary" in run.stderr


def test_explain_log_names_the_rule(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(
        "(Worker_TP0) RuntimeError: a and b must have same reduction dim, "
        "but got [s88, s3] X [131072, 2816].\n"
    )
    run = doctor("explain", "--log", str(log), "--rules-dir", str(RULES))
    assert run.returncode == 1
    assert run.stdout.startswith("MODEL901 [error]")
    assert "upgrade to vLLM 0.24.0" in run.stdout
    clean = tmp_path / "ok.log"
    clean.write_text("INFO all good\n")
    assert doctor("explain", "--log", str(clean), "--rules-dir", str(RULES)).returncode == 0


def test_explain_code_and_rules_commands():
    run = doctor("explain", "MODEL901", "--plain", "--rules-dir", str(RULES))
    assert run.returncode == 0
    for section in ("## What happens", "## Why", "## How to confirm", "## Known false positives"):
        assert section in run.stdout
    listed = json.loads(
        doctor(
            "rules", "list", "--format", "json", "--no-default-rules", "--rules-dir", str(RULES)
        ).stdout
    )
    assert [r["code"] for r in listed] == ["ENV901", "HW901", "MODEL901"]
    tested = doctor("rules", "test", "--no-default-rules", "--rules-dir", str(RULES))
    assert tested.returncode == 0 and "6 passed, 0 failed" in tested.stdout


def test_rules_test_takes_codes_like_rules_show():
    run = doctor("rules", "test", "hw901", "-v", "--no-default-rules", "--rules-dir", str(RULES))
    assert run.returncode == 0 and "rules: 1," in run.stdout, run.stdout
    assert "ok    HW901" in run.stdout and "MODEL901" not in run.stdout
    bad = doctor(
        "rules", "test", "HW901", "XYZ999", "--no-default-rules", "--rules-dir", str(RULES)
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "vllm-doctor: rules test: no rule XYZ999 (`vllm-doctor rules list` lists the codes)"
    ]


def test_rules_test_fails_on_a_wrong_case(tmp_path):
    import shutil

    shutil.copytree(RULES, tmp_path / "rules")
    cases = tmp_path / "rules" / "hw" / "HW901.cases.yaml"
    cases.write_text(cases.read_text().replace("expect: not-applies", "expect: applies"))
    run = doctor("rules", "test", "--no-default-rules", "--rules-dir", str(tmp_path / "rules"))
    assert run.returncode == 1 and "FAIL  HW901 nvlink" in run.stdout


def test_corrected_command_keeps_the_users_variables():
    run = doctor(
        "check",
        "--no-default-rules",
        "--rules-dir",
        str(RULES),
        "--format",
        "json",
        "--serve",
        "VLLM_ATTENTION_BACKEND=FLASHINFER NCCL_DEBUG='INFO x' vllm serve m -tp 2",
    )
    (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["code"] == "ENV901"]
    (suggestion,) = finding["suggestions"]
    assert (
        suggestion["command"]
        == "NCCL_DEBUG='INFO x' vllm serve m -tp 2 --attention-backend FLASH_ATTN"
    )
    assert suggestion["env"] == ["unset VLLM_ATTENTION_BACKEND"]


def test_secrets_on_the_serve_line_never_reach_a_report():
    run = doctor(
        "facts",
        "--format",
        "json",
        "--serve",
        "HF_TOKEN=hf_abc123 vllm serve m --hf-token hf_def456 --api-key=sk-789 -tp 2",
    )
    assert run.returncode == 0, run.stderr
    for secret in ("hf_abc123", "hf_def456", "sk-789"):
        assert secret not in run.stdout
    facts = json.loads(run.stdout)["facts"]
    assert facts["env.HF_TOKEN"]["value"] == "<redacted>"
    assert facts["serve.tensor_parallel_size"]["value"] == 2


def test_serve_config_errors_name_serve_config(tmp_path):
    missing = doctor("check", "--serve-config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("vllm-doctor: --serve-config: no such file")
    (tmp_path / "serve.txt").write_text("model: m\n")
    wrong = doctor("check", "--serve-config", str(tmp_path / "serve.txt"))
    assert wrong.returncode == 2 and wrong.stderr.startswith("vllm-doctor: --serve-config: ")


@pytest.mark.parametrize(
    "words, flag",
    [
        (["--tensor-parallel-size", "2"], "--tensor-parallel-size"),
        (["-q", "-tp", "2"], "-tp"),
        (["--max-model-len=4096"], "--max-model-len"),
    ],
)
def test_a_serve_option_before_the_double_dash_says_where_it_belongs(words, flag):
    run = doctor("check", *words)
    assert run.returncode == 2
    assert run.stderr == (
        f"vllm-doctor: {flag} is a `vllm serve` option: put the serve line after "
        f"`--`, as in `vllm-doctor check [OPTIONS] -- vllm serve MODEL {flag} ...`\n"
    )
    # an option that is neither the doctor's nor vLLM's keeps click's message and suggestion
    typo = doctor("check", "--fail-onn", "x")
    assert typo.returncode == 2 and "No such option: --fail-onn" in typo.stderr


def test_check_without_input_says_what_it_could_not_decide_and_what_to_pass():
    run = doctor("check")
    assert run.returncode == 0  # unchanged: undecided rules fail only under --strict
    summary = run.stderr.strip().splitlines()[-1]
    data = json.loads(doctor("check", "--format", "json").stdout)
    undecided = data["undecided"]
    # a rule needs the serve line when it misses a serve.* fact, or a computed fact (derived,
    # release, memory) that is missing for the reason a serve.* fact is: "needs serve.x: …"
    serve_reasons = {
        reason for path, reason in data["facts"]["missing"].items() if path.startswith("serve")
    }

    def needs_serve(m):
        if m["fact"].startswith("serve."):
            return True
        root = m["reason"]
        while root.startswith("needs ") and ": " in root:
            root = root.split(": ", 1)[1]
        return m["fact"].startswith(("derived.", "release.", "memory.")) and root in serve_reasons

    serve_needed = sum(any(needs_serve(m) for m in f["missing"]) for f in undecided)
    assert len(undecided) > serve_needed > len(undecided) / 2
    assert summary.endswith(
        f"; {serve_needed} of the {len(undecided)} undecided need the serve "
        "line: give the serve line after `--`: vllm-doctor check -- vllm serve MODEL ..."
    )
    serve = next(i for i in data["summary"]["inputs"] if i["input"] == "serve")
    assert serve["status"] == "not-given" and serve["undecided_needing_it"] == serve_needed
    assert data["summary"]["next_step"]["input"] == "serve"
    # the report no longer says that nothing applies without saying what was not checked
    decided = data["summary"]["rules_checked"] - len(undecided)
    assert f"none of the {decided} rules decided applies; {serve_needed} of the" in run.stdout
    # with the serve line given, the next input it lacks is named instead
    served = doctor("check", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
    assert "need the serve line" not in served.stderr and "undecided need" in served.stderr
