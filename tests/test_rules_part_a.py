"""The quantization, hardware and environment rules on whole stacks, not one case at a time.

Healthy stacks must produce no error finding from these rules; a few broken stacks must be
flagged by exactly the rule that describes them (and decided with the right verdict).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rule
from vllm_doctor.engine.loader import load_rules, select_rules
from vllm_doctor.facts.model import Facts

FIXTURES = Path(__file__).parent / "fixtures" / "rules-part-a"
PREFIXES = [
    "QUANT002",
    "QUANT003",
    "QUANT004",
    "QUANT005",
    "QUANT006",
    "QUANT007",
    "QUANT008",
    "QUANT009",
    "QUANT010",
    "QUANT011",
    "QUANT012",
    "QUANT013",
    "HW",
    "ENV",
]


@pytest.fixture(scope="module")
def rules():
    chosen = select_rules(load_rules(), PREFIXES, None)
    # what the selection means, not how many rules the base holds today: every chosen rule is
    # one of the named codes or in the HW / ENV categories, and each named code is there
    codes = {r.code for r in chosen}
    assert all(c in PREFIXES or c.startswith(("HW", "ENV")) for c in codes)
    assert {p for p in PREFIXES if p[-1].isdigit()} <= codes
    return chosen


def _stacks() -> dict[str, dict]:
    return yaml.safe_load((FIXTURES / "healthy.yaml").read_text(encoding="utf-8"))


def _verdicts(rules, flat: dict, log: str | None = None) -> dict[str, str]:
    facts = Facts.from_flat(flat)
    return {r.code: evaluate_rule(r, facts, log).verdict for r in rules}


@pytest.mark.parametrize("name", sorted(_stacks()))
def test_healthy_stack_has_no_finding(rules, name):
    verdicts = _verdicts(rules, _stacks()[name])
    flagged = {code: v for code, v in verdicts.items() if v != NOT_APPLIES}
    assert flagged == {}, f"{name}: {flagged}"


def _variant(name: str, **changes) -> dict:
    flat = dict(_stacks()[name])
    for key, value in changes.items():
        path = key.replace("__", ".")
        if value is None:
            flat.pop(path, None)
        else:
            flat[path] = value
    return flat


def _applying(rules, flat: dict, log: str | None = None) -> set[str]:
    return {code for code, v in _verdicts(rules, flat, log).items() if v == APPLIES}


def test_awq_on_v100_is_only_the_floor_rule(rules):
    flat = _variant(
        "a100-awq",
        gpu__min_capability=70,
        gpu__max_capability=70,
        gpu__capabilities=[70],
        torch__cuda_version="12.6",
        torch__version="2.11.0+cu126",
    )
    assert _applying(rules, flat) == {"QUANT003"}


def test_fp8_on_t4_depends_on_the_release(rules):
    flat = _variant(
        "a100-awq",
        gpu__min_capability=75,
        gpu__max_capability=75,
        gpu__capabilities=[75],
        model__quant_method="fp8",
        model__quant_scheme="fp8",
    )
    old = dict(
        flat,
        **{
            "vllm.version": "0.13.0",
            "vllm.torch_pin": "2.9.0",
            "torch.version": "2.9.0+cu128",
            "torch.cuda_version": "12.8",
        },
    )
    assert _applying(rules, old) == {"QUANT004"}
    # From 0.14.0 Turing runs FP8 weight-only through Marlin: information only.
    assert _applying(rules, flat) == {"QUANT002"}


def test_tp2_over_pcie_with_p2p_warns_and_nvlink_does_not(rules):
    pcie = _variant(
        "h200x2-nvlink-tp2-qwen", topology__all_nvlink=False, topology__worst_link="NODE"
    )
    assert _applying(rules, pcie) == {"HW001"}
    assert "HW001" not in _applying(rules, _stacks()["h200x2-nvlink-tp2-qwen"])


def test_missing_gpu_facts_leave_gpu_rules_undecided(rules):
    flat = {k: v for k, v in _stacks()["a100-awq"].items() if not k.startswith("gpu.")}
    flat["model.quant_method"] = "mxfp4"
    facts = Facts.from_flat(flat)
    facts.mark_missing("gpu", "NVML library not found")
    verdict = {r.code: evaluate_rule(r, facts).verdict for r in rules}
    assert verdict["QUANT009"] == UNDECIDED
    assert verdict["HW003"] == NOT_APPLIES  # dtype auto decides it without the GPU


def test_crash_log_alone_names_the_rule(rules):
    log = (
        "ValueError: The quantization method modelopt is not supported for the current GPU. "
        "Minimum capability: 89. Current capability: 86.\n"
    )
    applying = _applying(rules, _stacks()["h100-tp1-llama-bf16"], log)
    assert applying == {"QUANT005"}
