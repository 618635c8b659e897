"""HW207 (CUDA out of memory) reads the memory model's ``memory.kv_room``: the estimate confirms
the cause where it leaves no room, contradicts it (one step less confident) only where it leaves
room beyond its margin and every GPU has its share free, and says nothing where it is unknown;
without the message the rule never applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, evaluate_rule
from vllm_doctor.engine.loader import default_rules_dir, load_rule_file
from vllm_doctor.facts.derived import compute_derived
from vllm_doctor.facts.model import Facts
from vllm_doctor.memory.corpus import entry_facts
from vllm_doctor.memory.facts import compute_memory

RULE, _ = load_rule_file(Path(default_rules_dir()) / "hw" / "HW207.yaml")
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 250.00 MiB. GPU 0 has a "
    "total capacity of 22.05 GiB of which 120.12 MiB is free.\n"
)


def _deployment(config: str, gpu: str | None, serve: str) -> Facts:
    entry = {"vllm_version": "0.33.0", "serve": serve, "config": config}
    if gpu:
        entry["gpu"] = gpu
    facts = entry_facts(entry)
    facts.set("release.judged", "0.33.0", "test")
    compute_derived(facts)
    compute_memory(facts)
    return facts


def _evidence(finding, path: str):
    return next(e for e in finding.evidence if e.path == path)


def test_confirmed_where_the_memory_model_leaves_no_room():
    # Qwen3-32B's bf16 weights (61 GiB, its safetensors index) on one 24 GB L4
    facts = _deployment("models/Qwen3-32B", "NVIDIA L4", "vllm serve m --max-model-len 8192")
    assert facts.value("memory.kv_room") == "none"
    finding = evaluate_rule(RULE, facts, OOM)
    assert finding.verdict == APPLIES and finding.confidence == RULE.confidence
    assert _evidence(finding, "memory.kv_room").value == "none"
    # the facts alone never make a log-only rule apply
    assert evaluate_rule(RULE, facts, "").verdict == NOT_APPLIES


def test_contradicted_only_where_the_estimate_leaves_room_beyond_its_margin():
    facts = _deployment(
        "models/Llama-3.1-8B-Instruct", "NVIDIA H100 80GB HBM3", "vllm serve m --max-model-len 8192"
    )
    assert facts.value("memory.kv_room") == "room"
    assert facts.value("derived.free_memory_below_utilization") is False
    finding = evaluate_rule(RULE, facts, OOM)
    assert finding.verdict == APPLIES  # the message was seen
    assert finding.confidence == "low" != RULE.confidence


@pytest.mark.parametrize("room, lowered", [("tight", False), ("room", True), ("none", False)])
def test_within_the_margin_neither_confirms_nor_contradicts(room, lowered):
    facts = Facts.from_flat(
        {"memory.kv_room": room, "derived.free_memory_below_utilization": False}
    )
    finding = evaluate_rule(RULE, facts, OOM)
    assert finding.verdict == APPLIES
    assert (finding.confidence != RULE.confidence) is lowered


def test_unknown_when_the_memory_models_inputs_are_missing():
    # no GPU named: no memory figure and no free memory; the message alone decides
    facts = _deployment("models/Llama-3.1-8B-Instruct", None, "vllm serve m --max-model-len 8192")
    assert "memory.kv_room" not in facts
    assert "gpu.memory_total_mib" in facts.why_missing("memory.kv_room")
    finding = evaluate_rule(RULE, facts, OOM)
    assert finding.verdict == APPLIES and finding.confidence == RULE.confidence
    # the confirmation is undecided and names what it lacks
    outcome = RULE.when.evaluate(facts)
    assert outcome.value is None and "memory.kv_room" in outcome.missing
    assert evaluate_rule(RULE, facts, "").verdict == NOT_APPLIES


def test_facts_against_the_cause_are_shown_as_also_checked_not_because():
    from vllm_doctor.commands.check import render_document
    from vllm_doctor.report.document import CheckDocument

    # every GPU has its share free and the KV cache has room: both facts argue against the
    # cause the message names; a seen message still makes the rule apply
    facts = Facts.from_flat(
        {"memory.kv_room": "room", "derived.free_memory_below_utilization": False}
    )
    finding = evaluate_rule(RULE, facts, OOM)
    assert finding.verdict == APPLIES
    assert [e.supports for e in finding.evidence] == [False, False]
    assert finding.to_dict()["evidence"][0]["supports"] is False
    doc = CheckDocument(facts, [finding], "error", 1, 0.0)
    text = render_document(doc, "text", verbose=False, to_file=True)
    assert "also checked: derived.free_memory_below_utilization = no" in text
    assert "because derived.free_memory_below_utilization" not in text
    markdown = render_document(doc, "markdown", verbose=False, to_file=True)
    assert "- also checked: `derived.free_memory_below_utilization` = `False`" in markdown
    junit = render_document(doc, "junit", verbose=False, to_file=True)
    assert "also checked: memory.kv_room = room" in junit
    data = json.loads(render_document(doc, "json", verbose=False, to_file=True))
    assert [e.get("supports") for e in data["findings"][0]["evidence"]] == [False, False]

    # the KV cache within its margin confirms it: only that fact is shown, as "because"
    facts = Facts.from_flat(
        {"memory.kv_room": "tight", "derived.free_memory_below_utilization": False}
    )
    finding = evaluate_rule(RULE, facts, OOM)
    assert [(e.path, e.supports) for e in finding.evidence] == [("memory.kv_room", True)]
    text = render_document(
        CheckDocument(facts, [finding], "error", 1, 0.0), "text", verbose=False, to_file=True
    )
    assert "because memory.kv_room = tight" in text
