"""The shipped rule base: every file valid, every rule's cases green, both kinds present."""

from __future__ import annotations

import pytest

from vllm_doctor import yaml_io
from vllm_doctor.engine.cases import cases_path, run_cases
from vllm_doctor.engine.loader import default_rules_dir, load_rules, validate_dir

RULES = load_rules()
# each rule's cases as `rules test` reads them (yaml_io: libyaml's parser where PyYAML has it)
CASES = {rule.code: yaml_io.safe_load(cases_path(rule).read_text())["cases"] for rule in RULES}


def test_rule_files_validate():
    rules, problems = validate_dir(default_rules_dir())
    assert problems == []
    assert len(rules) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_cases(rule):
    results, coverage = run_cases(rule)
    assert coverage == []
    failed = [f"{r.name}: {r.message}" for r in results if not r.ok]
    assert failed == []


def test_every_signature_is_recognised_by_explain_log():
    """Every rule with signatures has a positive log case (checked by its cases)."""
    lacking = []
    for rule in RULES:
        if not rule.signatures:
            continue
        cases = CASES[rule.code]
        if not any(c.get("log") and c.get("expect") == "applies" for c in cases):
            lacking.append(rule.code)
    assert lacking == []


APPLIES_LOGS = [
    (rule.code, case["name"], case["log"])
    for rule in RULES
    for case in CASES[rule.code]
    if case.get("log") and case.get("expect") == "applies"
]


@pytest.mark.parametrize(
    "code, name, log", APPLIES_LOGS, ids=[f"{c}-{n}" for c, n, _ in APPLIES_LOGS]
)
def test_explain_log_names_the_rule(tmp_path, capsys, code, name, log):
    from vllm_doctor.commands.explain import explain_log

    path = tmp_path / "crash.log"
    path.write_text(log)
    assert explain_log(path, None) == 1
    named = [
        line.split()[0]
        for line in capsys.readouterr().out.splitlines()
        if line and not line.startswith(" ")
    ]
    assert code in named


def test_code_bands_as_contributing_md_states_them():
    """0xx curated, 1xx over the generated release knowledge, 2xx log-only (CONTRIBUTING.md)."""
    wrong = []
    for rule in RULES:
        band = int(rule.code[-3]) if rule.code[-3:].isdigit() else None
        reads_release = any(p.startswith("release.") for p in rule.when.paths()) or bool(
            rule.reader
        )
        if band == 2 and not rule.log_only:
            wrong.append(f"{rule.code}: 2xx but not log_only")
        if band == 1 and not reads_release:
            wrong.append(f"{rule.code}: 1xx without release.* facts or a log reader")
        if band == 0 and rule.log_only:
            wrong.append(f"{rule.code}: 0xx but log_only (a 2xx code)")
    assert wrong == []
