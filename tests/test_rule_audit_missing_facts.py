"""No error from a missing fact, over the whole shipped rule base, mechanically.

For every error-severity rule and every positive (``applies``) case of it that proves the
failure from facts (a case proven only by its crash log is left out): take away, one at a
time, each fact the rule reads. The cases are picked from the case files alone (a case of a
rule with a condition, giving at least one fact the condition reads), never by asking the
engine which of them apply: a broken engine must fail the audit, not shrink it.

* Not collected (marked missing with a reason): the verdict must become "cannot decide" (or
  "does not apply"), never stay "applies" — a rule must not prove an error without a fact it
  reads. Only a rule whose other facts still prove it on their own (an `any` with a second
  proving branch) may keep applying, and then the dropped fact must not be in its evidence.
* Looked for and not there (absent): staying "applies" is only right for facts whose absence
  is itself a proof — a flag not given, a package not installed, a variable not set, a model
  feature the config does not have — never for a fact every input has (``never_absent``).
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

from vllm_doctor import yaml_io
from vllm_doctor.engine.cases import INPUT_KEYS, is_real_input_case
from vllm_doctor.engine.cases import _write_tree as write_tree
from vllm_doctor.engine.evaluate import APPLIES, evaluate_rule
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.schema import absent_is_unknown

RULES = Path(__file__).resolve().parents[1] / "rules"

# facts whose absence is meaningful: looked for and provably not there
ABSENCE_PROVES = (
    "serve.",
    "env.",
    "packages.",
    "model.num_experts",
    "model.num_mtp_layers",
    "model.kv_lora_rank",
    "model.qk_rope_head_dim",
    "model.global_head_dim",
    "model.quant_",
    "model.text_model_type",
    "gpu.mig_enabled",
    "log.",
    # no manifest: the serve line runs where gpu.count counts the GPUs (one node)
    "deploy.nodes",
)


# the tests that ask about absence itself
ABSENCE_TESTS = ("exists", "ne", "not_in")


@lru_cache(maxsize=1)
def positive_cases() -> list[tuple]:
    found = []
    for rule in load_rules([RULES]):
        if rule.severity != "error":
            continue
        data = yaml_io.safe_load(rule.path.with_name(f"{rule.code}.cases.yaml").read_text())
        for case in data["cases"]:
            # a case that also carries a crash log is audited when its facts alone prove it
            # a case with real inputs gets its facts from the collectors; the facts-only
            # cases beside it are the ones whose facts can be dropped one at a time
            # a case on an upstream input (`source:`) carries only the facts its source states:
            # its log proves it, as the real inputs' collectors prove the others
            if (
                case.get("expect") != APPLIES
                or any(case.get(k) is not None for k in INPUT_KEYS)
                or is_real_input_case(case)
            ):
                continue
            # a log-only rule, or a case whose facts leave the condition alone, is proven by
            # its crash log
            if not rule.log_only and dropped_paths(rule, case):
                found.append((rule, case))
    return found


def facts_of(case: dict, drop: str | None = None, missing: bool = True) -> Facts:
    flat = {k: v for k, v in (case.get("facts") or {}).items() if k != drop}
    facts = Facts.from_flat(flat)
    for path, reason in (case.get("missing") or {}).items():
        facts.mark_missing(str(path), str(reason))
    if drop and missing:
        facts.mark_missing(drop, "dropped by the audit")
    return facts


def dropped_paths(rule, case) -> list[str]:
    read = set(rule.when.paths())
    return sorted(p for p in (case.get("facts") or {}) if p in read)


def test_the_audit_covers_the_error_rules():
    codes = {rule.code for rule, _ in positive_cases()}
    # every error rule decided by its facts (not by a crash log alone) is audited: a new one
    # without a facts-only positive case would otherwise escape the audit unnoticed
    # (a fleet rule compares the facts of several machines: its cases give nodes, not facts)
    decided_by_facts = {
        rule.code
        for rule in load_rules([RULES])
        if rule.severity == "error"
        and not rule.log_only
        and not all(path.startswith("fleet.") for path in rule.when.paths())
    }
    assert decided_by_facts and decided_by_facts - codes == set()
    assert "PAR001" in codes and "HW005" in codes
    # cases with a crash log beside facts that prove the error are in it too
    with_log = {(rule.code, case["name"]) for rule, case in positive_cases() if case.get("log")}
    assert {
        ("PAR001", "deepseek-v4-64-heads-tp3"),
        ("HW005", "tp8-on-4-gpus"),
        ("ENV001", "cu130-torch-on-r570"),
    } <= with_log
    # every error rule over the generated release knowledge proves its case from facts
    release_rules = {
        "ARGS100",
        "ARGS101",
        "MODEL101",
        "ENV101",
        "QUANT100",
        "QUANT101",
        "QUANT102",
        "ATTN100",
        "ATTN101",
    }
    assert release_rules <= codes, sorted(release_rules - codes)


def verdict(rule, case, facts: Facts):
    files = case.get("vllm_files")
    if not isinstance(files, dict):
        return evaluate_rule(rule, facts)
    with tempfile.TemporaryDirectory(prefix="vllm-doctor-audit-") as tmp:
        return evaluate_rule(rule, facts, vllm_tree=write_tree(Path(tmp), files))


@pytest.mark.parametrize(
    "rule, case", positive_cases(), ids=lambda x: x.code if hasattr(x, "code") else x.get("name")
)
def test_dropping_a_fact_never_proves_an_error(rule, case):
    assert verdict(rule, case, facts_of(case)).verdict == APPLIES  # the case itself holds
    problems = []
    for path in dropped_paths(rule, case):
        for missing in (True, False):
            finding = verdict(rule, case, facts_of(case, drop=path, missing=missing))
            if finding.verdict != APPLIES:
                continue
            how = "not collected" if missing else "absent"
            cited = [e for e in finding.evidence if e.path == path]
            if missing and cited:
                problems.append(f"{path} {how}: still applies, citing it")
            elif not missing and cited and not path.startswith(ABSENCE_PROVES):
                # a test over an absent fact proved the error (a negated test passing)
                problems.append(
                    f"{path} {how}: applies on its absence, which proves nothing"
                    + (" (never_absent)" if absent_is_unknown(path) else "")
                )
            elif (
                not missing
                and cited
                and path.startswith("model.")
                and cited[0].test.split()[0] not in ABSENCE_TESTS
            ):
                # a model feature's absence may prove something, but only through a test that
                # asks about it (`exists: false`, `ne`, `not_in`): `not: {divisible_by: ...}`
                # over a dense model's absent expert count reads "no experts" as "not
                # divisible". (A serve flag's absence is its default: negating a positive
                # test of it is sound.)
                problems.append(
                    f"{path} {how}: applies through `not` over "
                    f"`{cited[0].test}`, which is false only for want of a value"
                )
            # else: another branch of the rule proves it from facts that are still there
    assert not problems, problems


def test_the_audit_catches_a_negated_test_over_an_absent_fact():
    # The defect class itself: before model heads were never_absent, PAR001 proved an error
    # from a config without num_attention_heads. A rule negating a fact with no such guard
    # (vllm.git_sha is neither never_absent nor a fact whose absence proves anything) must
    # be reported by the same check the rule base passes.
    from test_engine import make_rule

    rule = make_rule(
        affected=None,
        when={
            "all": [
                {"fact": "serve.tensor_parallel_size", "gt": 1},
                {"not": {"fact": "vllm.git_sha", "matches": "^abc"}},
            ]
        },
    )
    case = {"facts": {"serve.tensor_parallel_size": 2, "vllm.git_sha": "def123"}}
    assert verdict(rule, case, facts_of(case)).verdict == APPLIES
    finding = verdict(rule, case, facts_of(case, drop="vllm.git_sha", missing=False))
    assert finding.verdict == APPLIES
    assert any(e.path == "vllm.git_sha" for e in finding.evidence)  # what the audit flags
    assert not "vllm.git_sha".startswith(ABSENCE_PROVES)


# -- the same over real inputs: a report line, a GPU, a version dropped ---------------------------
#
# The cases above drop a fact from a rule's own case. Here the inputs are the real ones the
# stack facts are tested on (tests/test_stack_trust.py): a collect-env report loses one line
# at a time (a version, a GPU, the driver, `Is CUDA available`, a package), a machine's
# recorded facts lose one fact at a time. Whatever goes, an error that cited what went is no
# longer proven, and no other error appears: a missing fact gives "cannot decide", never a
# different error.

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "fixtures" / "reports"


def _collect(**options):
    from vllm_doctor.facts.collect import CollectOptions, collect_facts

    options.setdefault("probe_machine", False)
    options.setdefault("offline", True)
    return collect_facts(CollectOptions(**options))


def _judge_facts(facts):
    from vllm_doctor.engine.evaluate import defer, evaluate_rules
    from vllm_doctor.engine.over_releases import judge_over_releases

    findings = defer(judge_over_releases(evaluate_rules(load_rules(), facts), facts))
    return {f.rule.code: f for f in findings}


def _judge(**options):
    facts = _collect(**options)
    return facts, _judge_facts(facts)


def _errors(findings) -> dict[str, set[str]]:
    """Each applying error, with the facts it cites."""
    return {
        code: {e.path for e in f.evidence}
        for code, f in findings.items()
        if f.verdict == APPLIES and f.severity == "error"
    }


def _dropping_problems(before, had, after_facts, after_findings, what: str) -> list[str]:
    """``before``: the errors of the whole input and the facts each cites; ``had``: its facts."""
    problems = []
    after = _errors(after_findings)
    for code in sorted(set(after) - set(before)):
        problems.append(f"{what}: {code} applies only once it is gone")
    for code, cited in before.items():
        gone = sorted(p for p in cited if p in had and p not in after_facts)
        if code in after and gone:
            problems.append(f"{what}: {code} still applies without {', '.join(gone)}")
    return problems


def _judged_facts(facts, report: Path) -> str:
    """What judging reads of the facts read from ``report``: all of them but where each value
    was read (its ``detail``: the file and line) and the report's name in the notes and
    reasons, which are shown in the findings' words and never tested by a rule."""
    import json

    data = facts.to_dict()
    for fact in data["facts"].values():
        fact.pop("detail", None)
    text = json.dumps([data, len(facts.crashes)], sort_keys=True, default=str)
    return text.replace(json.dumps(str(report))[1:-1], "<the report>")


@pytest.mark.parametrize(
    "report, errors",
    [
        ("torch-1.6-cuda10.2-driver-418-unavailable.txt", {"ENV010"}),
        ("torch-1.3.1-cuda10.1-driver-410-unavailable.txt", {"ENV010"}),  # driver CUDA inferred
        ("h100x8_nvlink_nightly.txt", set()),  # healthy: nothing may appear
    ],
)
def test_dropping_a_report_line_never_proves_another_error(report, errors, tmp_path):
    lines = (REPORTS / report).read_text().splitlines()
    serve = "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 8 --max-model-len 32768"
    had, findings = _judge(report=REPORTS / report, serve_string=serve)
    before = _errors(findings)
    assert set(before) == errors
    # most lines carry no fact: a cut whose facts are judged as the whole report's (or an
    # earlier cut's) are, has that judgement's errors, so the facts are judged once each
    judged = {_judged_facts(had, REPORTS / report): findings}
    problems = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        cut = tmp_path / f"cut-{index}.txt"
        cut.write_text("\n".join(lines[:index] + lines[index + 1 :]) + "\n")
        try:
            facts = _collect(report=cut, serve_string=serve)
        except Exception as err:  # a report that no longer reads as one is not the question
            if type(err).__name__ == "InputError":
                continue
            raise
        key = _judged_facts(facts, cut)
        if key not in judged:
            judged[key] = _judge_facts(facts)
        after = judged[key]
        problems += _dropping_problems(
            before, had, facts, after, f"without line {index + 1} {line!r}"
        )
    assert not problems, problems


def test_dropping_a_machine_fact_never_proves_another_error():
    import json

    from vllm_doctor.facts.collect import MACHINE_AREAS
    from vllm_doctor.facts.hardware import TargetHardware

    recorded = Facts.from_dict(json.loads((HERE / "fixtures/hosts/h200x4-facts.json").read_text()))
    mine = (*MACHINE_AREAS, "env")
    kept = {p: f for p, f in recorded.values.items() if p.split(".")[0] in mine}

    def host(drop: str | None = None) -> Facts:
        facts = Facts()
        facts.values = {p: f for p, f in kept.items() if p != drop}
        if drop:
            facts.mark_missing(drop, "dropped by the audit")
        return facts

    line = "vllm serve Qwen/Qwen3-8B -tp 8"  # HW005 on this 4-GPU host
    target = TargetHardware(gpu="NVIDIA H200")
    had, findings = _judge(given=host(), target=target, serve_string=line, vllm_version="0.24.0")
    before = _errors(findings)
    assert "HW005" in before
    problems = []
    read = {p for rule in load_rules() for c in (rule.when,) for p in c.paths()}
    for path in sorted(p for p in kept if p in read or p.split(".")[0] in ("gpu", "topology")):
        facts, after = _judge(
            given=host(path), target=target, serve_string=line, vllm_version="0.24.0"
        )
        problems += _dropping_problems(before, had, facts, after, f"without {path}")
    # the version too: an unknown version judged over the releases proves nothing new
    facts, after = _judge(given=host(), target=target, serve_string=line)
    problems += [
        p
        for p in _dropping_problems(before, had, facts, after, "without the version")
        if "applies only once" in p
    ]
    assert not problems, problems
