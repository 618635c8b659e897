"""The stack facts on real input, both ways: a working setup is never refused, a broken one
never passes (issue 29). Each report is kept in tests/fixtures/reports with its source
(SOURCES.md there)."""

from __future__ import annotations

from pathlib import Path

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, Finding, defer, evaluate_rules
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.over_releases import judge_over_releases
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts
from vllm_doctor.report.document import CheckDocument

HERE = Path(__file__).parent
REPORTS = HERE / "fixtures" / "reports"


def judge(**options) -> tuple[Facts, dict[str, Finding]]:
    """check's judgement, in process: the facts, then every rule over them and over the
    releases an unknown version could be."""
    options.setdefault("probe_machine", False)
    options.setdefault("offline", True)
    facts = collect_facts(CollectOptions(**options))
    findings = defer(judge_over_releases(evaluate_rules(load_rules(), facts), facts))
    return facts, {f.rule.code: f for f in findings}


def fails_strict(facts: Facts, findings: dict[str, Finding]) -> list[str]:
    doc = CheckDocument(facts, list(findings.values()), "error", len(findings), 0.0, strict=True)
    return sorted(f.rule.code for f in doc.failing())


# -- 1. an unknown vLLM version is not a version inside the covered range ---------------------


def test_torch_collect_env_without_vllm_is_not_an_env101_error():
    # torch's own collect_env: torch 2.5.1 (what vLLM 0.6.4-0.7.x pin), no vLLM section
    facts, findings = judge(report=REPORTS / "torch-collect-env-2.5.1-v100s.txt")
    assert "vllm.version" not in facts and facts.value("torch.version") == "2.5.1+cu118"
    env101 = findings["ENV101"]
    assert env101.verdict == UNDECIDED
    reason = env101.missing[0].reason
    assert env101.missing[0].path == "vllm.version"
    assert "among the covered releases it applies in 0.8.0–0.33.0" in reason
    assert "older than the releases the knowledge covers, or not installed" in reason
    assert "torch 2.5.1+cu118 is older than every covered release's pin (0.8.0 pins 2.6.0)" in (
        reason
    )
    # ENV100 (transformers bounds) is judged the same way
    assert findings["ENV100"].verdict != APPLIES


def test_the_same_torch_beside_a_covered_release_is_still_an_error(tmp_path):
    # the report states the release: vLLM 0.10.0 pins torch 2.7.1, 2.5.1 cannot load its ops
    report = tmp_path / "report.txt"
    text = (REPORTS / "torch-collect-env-2.5.1-v100s.txt").read_text()
    report.write_text(text + "vLLM Version: 0.10.0\n")
    facts, findings = judge(report=report)
    assert facts.value("vllm.version") == "0.10.0"
    assert findings["ENV101"].verdict == APPLIES
