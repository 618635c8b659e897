"""release.flashinfer_version (facts/release_pins.py): the flashinfer-python a deployment runs
with, read from what is installed or reported, else the judged release's pin (inferred), and
the rule that reads it (ATTN030)."""

from __future__ import annotations

from pathlib import Path

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rule
from vllm_doctor.engine.loader import load_rule_file
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.hardware import TargetHardware
from vllm_doctor.facts.model import Source

REPO = Path(__file__).resolve().parent.parent
REPORTS = REPO / "tests" / "fixtures" / "reports"
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "head_dim": 128,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 36,
    "max_position_embeddings": 40960,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
}


def facts_for(tmp_path: Path, gpu: str | None = None, **kw):
    import json

    config = tmp_path / "config.json"
    config.write_text(json.dumps(QWEN3_8B))
    return collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B",
            probe_machine=False,
            model_config=config,
            target=TargetHardware(gpu=gpu, count=1) if gpu else None,
            **kw,
        )
    )


def verdict(code: str, facts) -> str:
    path = next(REPO.glob(f"rules/*/{code}.yaml"))
    rule, problems = load_rule_file(path)
    assert rule is not None, problems
    return evaluate_rule(rule, facts).verdict


def test_a_what_if_release_runs_the_flashinfer_it_pins(tmp_path):
    # vLLM 0.22.0's wheel requires flashinfer-python==0.6.11.post2; this machine's packages say
    # nothing about what installing it brings
    facts = facts_for(tmp_path, vllm_version="0.22.0", gpu="T4")
    fact = facts.get("release.flashinfer_version")
    assert fact is not None and fact.value == "0.6.11.post2"
    assert fact.inferred and "Requires-Dist of vLLM 0.22.0" in (fact.detail or "")
    # an inferred pin warns, never errs
    result = evaluate_rule(load_rule_file(next(REPO.glob("rules/*/ATTN030.yaml")))[0], facts)
    assert result.verdict == APPLIES and result.severity == "warning"
    # 0.24.0 no longer runs FlashInfer on sm_75 although it still pins 0.6.12
    later = facts_for(tmp_path, vllm_version="0.24.0", gpu="T4")
    assert later.value("release.flashinfer_version") == "0.6.12"
    assert verdict("ATTN030", later) == NOT_APPLIES


def test_a_flashinfer_named_beside_the_release_is_the_one_judged(tmp_path):
    facts = facts_for(
        tmp_path,
        vllm_version="0.22.0",
        gpu="T4",
        packages={"flashinfer-python": "0.6.16.post3"},
    )
    fact = facts.get("release.flashinfer_version")
    assert fact is not None and fact.value == "0.6.16.post3"
    assert not fact.inferred and fact.source == Source.USER
    assert verdict("ATTN030", facts) == NOT_APPLIES
    broken = facts_for(
        tmp_path, vllm_version="0.22.0", gpu="T4", packages={"flashinfer-python": "0.6.14"}
    )
    result = evaluate_rule(load_rule_file(next(REPO.glob("rules/*/ATTN030.yaml")))[0], broken)
    assert result.verdict == APPLIES and result.severity == "error"


def test_a_report_gives_its_own_flashinfer(tmp_path):
    # a real collect-env report (2x RTX 5060 Ti, a vLLM 0.23.1 nightly with flashinfer 0.6.9)
    facts = facts_for(tmp_path, report=REPORTS / "rtx5060ti_x2_pcie.txt")
    fact = facts.get("release.flashinfer_version")
    assert fact is not None and fact.value == "0.6.9"
    assert fact.source == Source.REPORT and not fact.inferred


def test_without_a_release_it_cannot_be_known(tmp_path):
    facts = facts_for(tmp_path, gpu="T4")
    assert "release.flashinfer_version" not in facts
    assert facts.why_missing("release.flashinfer_version")
    assert verdict("ATTN030", facts) == UNDECIDED
