"""memory.attention_block_size, memory.mamba_cache_mode and memory.max_num_batched_tokens
(memory/facts.py) against what vLLM printed, and the rule that reads them (MEM006)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, evaluate_rule
from vllm_doctor.engine.loader import load_rule_file
from vllm_doctor.facts.model import Source
from vllm_doctor.memory.corpus import entry_facts, load_entry
from vllm_doctor.memory.facts import compute_memory

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "memory-logs"
PRINTED = re.compile(r"Setting attention block size to (\d+) tokens")
HYBRID_LOGS = sorted(p for p in CORPUS.glob("*.yaml") if PRINTED.search(p.read_text()))


def _mem006(facts) -> str:
    rule, problems = load_rule_file(ROOT / "rules" / "mem" / "MEM006.yaml")
    assert rule is not None, problems
    return evaluate_rule(rule, facts).verdict


def test_the_corpus_has_hybrid_logs():
    assert len(HYBRID_LOGS) >= 3


@pytest.mark.parametrize("path", HYBRID_LOGS, ids=lambda p: p.stem)
def test_the_block_is_the_one_vllm_printed(path, tmp_path):
    entry = load_entry(path)
    facts = entry_facts(entry, tmp_path)
    compute_memory(facts)
    printed = int(PRINTED.search(str(entry.get("log"))).group(1))
    assert facts.value("memory.attention_block_size") == printed
    mode = facts.value("memory.mamba_cache_mode")
    # releases before 0.15.0 have no cache modes: missing, saying so
    assert mode in ("none", "align", "all") or "added in 0.15.0" in str(
        facts.why_missing("memory.mamba_cache_mode")
    )


def test_align_mode_and_the_budget(tmp_path):
    # guardkit's Qwen3.5-35B-A3B-FP8 on a GB10, vLLM 0.19.0 with --enable-prefix-caching
    entry = load_entry(CORPUS / "web-guardkit-qwen3.5-35b-a3b-fp8-gb10.yaml")
    facts = entry_facts(entry, tmp_path)
    compute_memory(facts)
    assert facts.value("memory.mamba_cache_mode") == "align"
    budget = facts.get("memory.max_num_batched_tokens")
    assert budget is not None and budget.value == 2048 and "default" in (budget.detail or "")
    assert _mem006(facts) == NOT_APPLIES  # 1056 tokens fit the 2048 of the default budget
    facts.set("serve.max_num_batched_tokens", 512, Source.SERVE, "--max-num-batched-tokens")
    compute_memory(facts)
    assert facts.value("memory.max_num_batched_tokens") == 512
    assert _mem006(facts) == APPLIES
    # without prefix caching on 0.19.0 there is no align mode
    facts.set("serve.enable_prefix_caching", False, Source.SERVE, "--no-enable-prefix-caching")
    compute_memory(facts)
    assert facts.value("memory.mamba_cache_mode") == "none"
    assert _mem006(facts) == NOT_APPLIES


def test_a_dense_model_has_none_of_them(tmp_path):
    entry = next(
        load_entry(p)
        for p in sorted(CORPUS.glob("*.yaml"))
        if "qwen3-8b" in p.stem.lower() and not PRINTED.search(p.read_text())
    )
    facts = entry_facts(entry, tmp_path)
    compute_memory(facts)
    for path in (
        "memory.attention_block_size",
        "memory.mamba_cache_mode",
        "memory.max_num_batched_tokens",
    ):
        assert path not in facts and facts.why_missing(path) is None
