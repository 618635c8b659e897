"""`rules validate` catches, in seconds, what only the whole suite caught before: a fact path
no collector sets on an input kind, a rule a healthy input leaves undecided (--strict could
never pass there), and related:/defers_to: naming no rule; a --rules-dir rule is judged like
a shipped one. Each defect is planted in a rule directory of its own."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from doctor_forks import doctor_run

DETAILS = """details: |
  ## What happens
  A planted defect.
  ## Why
  A test.
  ## How to confirm
  The test.
  ## Known false positives
  None.
"""


def write_rule(directory: Path, code: str, when: str, cases: str, extra: str = "") -> Path:
    category = directory / "env"
    category.mkdir(parents=True, exist_ok=True)
    (category / f"{code}.yaml").write_text(
        f"code: {code}\nslug: planted-{code.lower()}\nstatus: stable\nseverity: error\n"
        "confidence: high\nsummary: a planted rule\nphase: startup\n"
        f"when:\n{when}\n{extra}"
        "no_real_input: planted by the test\n"
        "references: [https://github.com/vllm-project/vllm/issues/1]\n" + DETAILS,
        encoding="utf-8",
    )
    (category / f"{code}.cases.yaml").write_text(cases, encoding="utf-8")
    return directory


def validate(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor_run("rules", "validate", *args, timeout=120)


@pytest.mark.parametrize("strict", [False, True])
def test_an_environment_variable_no_host_collector_reads_is_an_error(tmp_path, strict):
    rules = write_rule(
        tmp_path,
        "ENV951",
        "  fact: env.MYCOMPANION_DISABLE_VERSION_CHECK\n  eq: '1'",
        "cases:\n"
        "  - {name: set, expect: applies, facts: {env.MYCOMPANION_DISABLE_VERSION_CHECK: '1'}}\n"
        "  - {name: unset, expect: not-applies, facts: {}}\n",
    )
    started = time.perf_counter()
    result = validate("--rules-dir", str(rules), *(["--strict"] if strict else []))
    assert time.perf_counter() - started < 60
    assert result.returncode == 2, result.stdout + result.stderr
    assert "env.MYCOMPANION_DISABLE_VERSION_CHECK is never collected on a host" in result.stderr


def test_a_package_the_host_collector_never_looks_up_is_an_error(tmp_path):
    rules = write_rule(
        tmp_path,
        "ENV952",
        "  fact: packages.some-companion\n  exists: true",
        "cases:\n"
        "  - {name: there, expect: applies, facts: {packages.some-companion: '1.0'}}\n"
        "  - {name: not-there, expect: not-applies, facts: {}}\n",
    )
    result = validate("--rules-dir", str(rules))
    assert result.returncode == 2
    assert "packages.some-companion is never collected on a host" in result.stderr


def test_a_rule_that_breaks_healthy_strict_is_an_error(tmp_path):
    # the worst link read without asking for more than one GPU first: every one-GPU report
    # (the bundled healthy example) leaves it undecided, so --strict fails on it
    rules = write_rule(
        tmp_path,
        "ENV953",
        "  fact: topology.worst_link\n  eq: SYS",
        "cases:\n"
        "  - {name: sys, expect: applies, facts: {topology.worst_link: SYS}}\n"
        "  - {name: nvlink, expect: not-applies, facts: {topology.worst_link: NV18}}\n",
    )
    result = validate("--rules-dir", str(rules), "--strict")
    assert result.returncode == 2
    assert "--strict can never pass on a healthy collect-env report" in result.stderr
    assert "topology.worst_link (one GPU: no links between GPUs)" in result.stderr
    # the same rule guarded by the facts that make it relevant is decided there
    guarded = write_rule(
        tmp_path / "guarded",
        "ENV954",
        "  all:\n    - {fact: gpu.count, gt: 1}\n    - {fact: topology.worst_link, eq: SYS}",
        "cases:\n"
        "  - {name: sys, expect: applies, facts: {gpu.count: 2, topology.worst_link: SYS}}\n"
        "  - {name: one, expect: not-applies, facts: {gpu.count: 1}}\n",
    )
    ok = validate("--rules-dir", str(guarded), "--strict")
    assert ok.returncode == 0, ok.stderr
    assert "1 rules valid" in ok.stdout


def test_a_package_no_collect_env_lists_does_not_break_healthy_strict(tmp_path):
    # flashinfer-cubin is never in a report's pip list (no pattern matches it): on a report
    # it cannot be known, which --strict names and does not fail on
    rules = write_rule(
        tmp_path,
        "ENV955",
        "  all:\n    - {fact: packages.flashinfer-python, exists: true}\n"
        "    - {fact: packages.flashinfer-cubin, exists: false}",
        "cases:\n"
        "  - {name: no-cubin, expect: applies, facts: {packages.flashinfer-python: '0.7.2'}}\n"
        "  - {name: cubin, expect: not-applies, facts: {packages.flashinfer-python: '0.7.2', "
        "packages.flashinfer-cubin: '0.7.2'}}\n",
    )
    result = validate("--rules-dir", str(rules), "--strict")
    assert result.returncode == 0, result.stderr


def test_related_may_name_a_shipped_rule_but_not_a_missing_one(tmp_path):
    cases = (
        "cases:\n  - {name: set, expect: applies, facts: {env.VLLM_PORT: '8000'}}\n"
        "  - {name: unset, expect: not-applies, facts: {}}\n"
    )
    shipped = write_rule(
        tmp_path / "a",
        "ENV956",
        "  fact: env.VLLM_PORT\n  exists: true",
        cases,
        "related: [HW005]\n",
    )
    assert validate("--rules-dir", str(shipped)).returncode == 0
    # check loads it beside the shipped rules (a --rules-dir rule is judged like a shipped one)
    check = doctor_run("check", "--rules-dir", str(shipped), "--no-strict", timeout=120)
    assert check.returncode in (0, 1), check.stderr
    missing = write_rule(
        tmp_path / "b",
        "ENV957",
        "  fact: env.VLLM_PORT\n  exists: true",
        cases,
        "related: [HW999]\n",
    )
    result = validate("--rules-dir", str(missing))
    assert result.returncode == 2
    assert "related: HW999 is not a known rule" in result.stderr
    defers = write_rule(
        tmp_path / "c",
        "ENV958",
        "  fact: env.VLLM_PORT\n  exists: true",
        cases,
        "defers_to: [ENV999]\n",
    )
    result = validate("--rules-dir", str(defers))
    assert result.returncode == 2
    assert "defers_to: ENV999 is not a known rule" in result.stderr


def test_rules_test_catches_both_planted_defects_in_under_a_minute(tmp_path):
    # the two defects, planted as a new contributor would write them: a companion's
    # variable no collector reads, and a rule a healthy report always leaves undecided
    rules = write_rule(
        tmp_path,
        "ENV961",
        "  fact: env.MYCOMPANION_DISABLE_VERSION_CHECK\n  eq: '1'",
        "cases:\n"
        "  - {name: set, expect: applies, facts: {env.MYCOMPANION_DISABLE_VERSION_CHECK: '1'}}\n"
        "  - {name: unset, expect: not-applies, facts: {}}\n",
    )
    write_rule(
        tmp_path,
        "ENV962",
        "  fact: topology.worst_link\n  eq: SYS",
        "cases:\n"
        "  - {name: sys, expect: applies, facts: {topology.worst_link: SYS}}\n"
        "  - {name: nvlink, expect: not-applies, facts: {topology.worst_link: NV18}}\n",
    )
    started = time.perf_counter()
    tested = doctor_run(
        "rules", "test", "--no-default-rules", "--rules-dir", str(rules), timeout=120
    )
    assert time.perf_counter() - started < 60
    # every case passes: only the healthy-input runs see the defects
    assert tested.returncode == 1, tested.stdout + tested.stderr
    assert "cases: 4 passed, 0 failed, 3 problem(s) on healthy inputs" in tested.stdout
    assert "HEALTHY " in tested.stdout
    assert "env.MYCOMPANION_DISABLE_VERSION_CHECK is never collected on a host" in tested.stdout
    assert "ENV962.yaml: --strict can never pass on a healthy collect-env report" in tested.stdout
    assert "ENV962.yaml: --strict can never pass on a healthy live host" in tested.stdout
    # rules validate --strict names both, in the same minute
    started = time.perf_counter()
    validated = validate("--rules-dir", str(rules), "--strict")
    assert time.perf_counter() - started < 60
    assert validated.returncode == 2, validated.stdout + validated.stderr
    assert "env.MYCOMPANION_DISABLE_VERSION_CHECK is never collected on a host" in validated.stderr
    assert "--strict can never pass on a healthy collect-env report" in validated.stderr
    assert "topology.worst_link (one GPU: no links between GPUs)" in validated.stderr
