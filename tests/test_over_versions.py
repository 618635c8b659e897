"""A rule open only for a companion version the judged release's requirement bounds, judged
over the versions that requirement admits (engine/over_versions.py), on the shipped rules and
the generated requires table."""

from __future__ import annotations

from pathlib import Path

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rule
from vllm_doctor.engine.loader import load_rule_file
from vllm_doctor.engine.over_releases import judge_over_releases
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts, Source

REPO = Path(__file__).resolve().parent.parent


def judged(code: str, values: dict):
    given = Facts()
    for path, value in values.items():  # as a report or --package would state them
        given.set(path, value, Source.REPORT, "test")
    facts = collect_facts(CollectOptions(probe_machine=False, environ={}, given=given))
    rule, problems = load_rule_file(next(REPO.glob(f"rules/*/{code}.yaml")))
    assert rule is not None, problems
    before = evaluate_rule(rule, facts)
    return before, judge_over_releases([evaluate_rule(rule, facts)], facts)[0]


GEMMA4 = {"model.model_type": "gemma4"}


def test_gemma4_on_0271_transformers_unknown_warns_with_the_admitted_versions_that_fail():
    # vLLM 0.27.1 requires transformers>=5.5.3; ENV009 applies from 5.15.0 (issue 51744)
    before, after = judged("ENV009", {**GEMMA4, "vllm.version": "0.27.1"})
    assert before.verdict == UNDECIDED
    assert [m.path for m in before.missing] == ["packages.transformers"]
    assert after.verdict == APPLIES
    assert after.severity == "warning"  # the rule's error, capped: the version is inferred
    (reason,) = after.missing
    assert reason.path == "packages.transformers"
    assert "it applies with 5.15.0–" in reason.reason
    assert "not with 5.5.3–5.14.1" in reason.reason


def test_release_that_fixed_it_or_a_known_version_is_left_as_evaluated():
    before, fixed = judged("ENV009", {**GEMMA4, "vllm.version": "0.28.0"})
    assert fixed.fix_state is not None and fixed.fix_state.state == "fixed"
    assert fixed.verdict == before.verdict != APPLIES  # not turned into a finding
    _, known_good = judged(
        "ENV009", {**GEMMA4, "vllm.version": "0.27.1", "packages.transformers": "5.14.1"}
    )
    assert known_good.verdict == NOT_APPLIES
    before, known_bad = judged(
        "ENV009", {**GEMMA4, "vllm.version": "0.27.1", "packages.transformers": "5.15.0"}
    )
    assert known_bad.verdict == APPLIES and known_bad.severity == "error"
    assert known_bad.missing == before.missing == []


def test_a_rule_open_for_another_fact_too_stays_open():
    # the model type is not known: the admitted transformers versions cannot decide it
    before, after = judged("ENV009", {"vllm.version": "0.27.1"})
    assert before.verdict == UNDECIDED
    assert after.verdict == UNDECIDED


def test_only_a_rule_that_takes_the_inferred_version_as_evidence_is_judged():
    # ENV011 (transformers 5 with vLLM before 0.11.1) has no warn_when on an inferred
    # transformers: vLLM 0.10.2's open requirement leaves it undecided, as before
    before, after = judged("ENV011", {"vllm.version": "0.10.2"})
    assert before.verdict == UNDECIDED
    assert after.verdict == UNDECIDED and after.missing == before.missing
