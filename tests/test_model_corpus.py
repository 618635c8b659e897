"""Every architecture of the newest vLLM registry, checked with healthy stack facts: no error
finding unless the config's own values prove it.

The corpus (tests/fixtures/model-configs/corpus.jsonl.gz, built by tools/gen_model_layouts.py)
holds a config.json per architecture transformers has a config class for, plus the real
configs in tests/fixtures/models. Each line also carries what transformers itself reads from
that config (``transformers_reads``: heads, KV heads, hidden size, layers, vocabulary through
the class's attribute_map and get_text_config); the proofs below are recomputed from those
values, not from the doctor's reader, so a reader that reads the wrong key fails here.
"""

from __future__ import annotations

import gzip
import json
from functools import cache, lru_cache
from pathlib import Path

import pytest

from vllm_doctor.engine.evaluate import APPLIES, UNDECIDED, evaluate_rules
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.derived import compute_derived
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.model_config import read_model_config
from vllm_doctor.serve_args import parse_serve_argv

CORPUS = Path(__file__).parent / "fixtures" / "model-configs"
RULES = Path(__file__).resolve().parents[1] / "rules"

HEALTHY_STACK = {
    "vllm.installed": True,
    "vllm.version": "0.33.0",
    "vllm.torch_pin": "2.13.0",
    "torch.version": "2.13.0+cu130",
    "torch.cuda_version": "13.0",
    "torch.matches_vllm_pin": True,
    "driver.version": "580.95.05",
    "driver.cuda_version": "13.0",
    "packages.transformers": "5.23.0",
    "gpu.count": 8,
    "gpu.names": ["NVIDIA H100 80GB HBM3"] * 8,
    "gpu.capabilities": [90] * 8,
    "gpu.min_capability": 90,
    "gpu.max_capability": 90,
    "gpu.memory_total_mib": 81559,
    "gpu.memory_free_mib": 81000,
    "gpu.mig_enabled": False,
    "topology.all_nvlink": True,
    "topology.p2p_all": True,
    "topology.worst_link": "NV18",
}
SERVE_LINES = [
    (tp, pp, dtype) for tp in (1, 2, 4, 8) for pp in (1,) for dtype in (None, "bfloat16")
] + [(1, 2, None), (2, 2, "bfloat16")]


@lru_cache(maxsize=1)
def corpus() -> list[dict]:
    with gzip.open(CORPUS / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@lru_cache(maxsize=1)
def rules():
    return load_rules([RULES])


def facts_for(entry: dict, tp: int, pp: int, dtype: str | None) -> Facts:
    facts = Facts.from_flat(HEALTHY_STACK, "healthy stack")
    read_model_config(
        facts,
        Path("/corpus") / entry["name"] / "config.json",
        entry["config"],
        f"corpus {entry['name']}",
    )
    argv = [
        "vllm",
        "serve",
        "org/model",
        "--tensor-parallel-size",
        str(tp),
        "--pipeline-parallel-size",
        str(pp),
    ] + (["--dtype", dtype] if dtype else [])
    parse_serve_argv(argv).to_facts(facts, Source.SERVE, {})
    compute_derived(facts)
    return facts


def proven(code: str, truth: dict, tp: int, pp: int) -> bool | None:
    """Whether the config's own values (as transformers reads them) prove the error; None
    for a rule whose proof is not arithmetic over those values."""
    heads, kv = truth.get("num_attention_heads"), truth.get("num_key_value_heads")
    if code == "PAR001":
        return bool(heads) and tp > 1 and heads % tp != 0
    if code == "PAR002":
        return (
            bool(heads)
            and bool(kv)
            and tp > 1
            and heads % tp == 0
            and kv % tp != 0
            and tp % kv != 0
        )
    return None


def all_findings(entry: dict) -> list[tuple[str, int, int, str | None, object]]:
    return _findings_of(entry["name"])


@cache
def _findings_of(name: str) -> list[tuple[str, int, int, str | None, object]]:
    entry = next(e for e in corpus() if e["name"] == name)
    found = []
    for tp, pp, dtype in SERVE_LINES:
        facts = facts_for(entry, tp, pp, dtype)
        for finding in evaluate_rules(rules(), facts):
            # kept: the errors, and the arithmetic rules whatever their verdict
            if finding.rule.code in ("PAR001", "PAR002") or (
                finding.verdict == APPLIES and finding.severity == "error"
            ):
                found.append((finding.rule.code, tp, pp, dtype, finding))
    return found


def error_findings(entry: dict) -> list[tuple[str, int, int, str | None, object]]:
    return [
        item
        for item in all_findings(entry)
        if item[4].verdict == APPLIES and item[4].severity == "error"
    ]


def test_corpus_covers_the_registry():
    entries = corpus()
    archs = {e["architecture"] for e in entries}
    not_covered = json.loads((CORPUS / "not-covered.json").read_text(encoding="utf-8"))
    # every registry architecture is either in the corpus or listed with a reason
    assert len(archs) >= 250, len(archs)
    assert all(item["reason"] for item in not_covered)
    assert not archs & {item["architecture"] for item in not_covered}
    # the layouts the issue names are in it
    types = {e["config"].get("model_type") for e in entries}
    assert {"mamba", "rwkv", "dbrx", "mpt", "whisper", "gpt2", "falcon", "t5"} <= types


@pytest.mark.parametrize("entry", corpus(), ids=lambda e: e["name"])
def test_model_facts_match_what_transformers_reads(entry):
    facts = Facts()
    read_model_config(facts, Path("/corpus/config.json"), entry["config"], "corpus")
    wrong, unknown = [], []
    for name, value in entry["transformers_reads"].items():
        path = f"model.{name}"
        got = facts.value(path)
        if got == value:
            continue
        if got is None and (value is None or (name == "num_attention_heads" and value == 0)):
            # transformers itself has no number (a class default of 0 heads: attention-free)
            assert facts.why_missing(path) or path not in facts, path
            continue
        # transformers reads a number: the doctor must read the same one. Unknown is counted
        # apart from wrong, and fails too: the expected outcome is decided.
        (unknown if got is None else wrong).append((path, got, value))
    assert not wrong, f"read differently from transformers: {wrong}"
    assert not unknown, f"unknown where transformers reads a value: {unknown}"
    for path in (
        "model.num_attention_heads",
        "model.num_key_value_heads",
        "model.hidden_size",
        "model.num_hidden_layers",
        "model.vocab_size",
        "model.head_dim",
    ):
        assert path in facts or facts.why_missing(path), f"{path} neither read nor missing"


@pytest.mark.parametrize("entry", corpus(), ids=lambda e: e["name"])
def test_no_error_finding_without_proof(entry):
    truth = entry["transformers_reads"]
    unproven = []
    for code, tp, pp, dtype, finding in error_findings(entry):
        proof = proven(code, truth, tp, pp)
        if proof is None:
            # not arithmetic: every model fact it rests on must be what transformers reads
            for ev in finding.evidence:
                name = ev.path.split(".", 1)[1] if ev.path.startswith("model.") else None
                if name in truth and ev.value != truth[name]:
                    unproven.append(
                        f"{code} tp{tp} pp{pp}: {ev.path}={ev.value} but the "
                        f"config says {truth[name]}"
                    )
            continue
        if not proof:
            unproven.append(f"{code} tp{tp} pp{pp} dtype {dtype}: not proven by {truth}")
    assert not unproven, unproven


@pytest.mark.parametrize("entry", corpus(), ids=lambda e: e["name"])
def test_the_arithmetic_rules_decide_where_the_config_decides(entry):
    # Where the config's own values decide PAR001 / PAR002, the doctor's verdict must be that
    # decision: "cannot decide" is counted apart and fails like a wrong verdict.
    truth = entry["transformers_reads"]
    wrong, undecided = [], []
    for code, tp, pp, _dtype, finding in all_findings(entry):
        proof = proven(code, truth, tp, pp)
        if proof is None or not truth.get("num_attention_heads"):
            continue
        if finding.verdict == UNDECIDED:
            undecided.append(f"{code} tp{tp}: cannot decide, missing {finding.missing}")
        elif (finding.verdict == APPLIES) != proof:
            wrong.append(f"{code} tp{tp}: {finding.verdict}, the config says {proof}")
    assert not wrong, wrong
    assert not undecided, undecided


def test_the_proof_fires_where_the_facts_prove_it():
    # GPT-2 (12 heads under n_head) at TP 8: the head check must apply, from n_head
    gpt2 = next(e for e in corpus() if e["config"].get("model_type") == "gpt2")
    codes = {(code, tp) for code, tp, _pp, _d, _f in error_findings(gpt2)}
    assert ("PAR001", 8) in codes and ("PAR001", 4) not in codes


NEWEST_SOURCE = Path("/work/wheels/src/0.33.0/vllm")
# the registry of 0.33.0 (vllm/model_executor/models/registry.py), committed so that the
# coverage check runs everywhere; where the wheels are unpacked it is compared with the release
REGISTRY = CORPUS.parent / "vllm-source" / "registry-architectures-0.33.0.json"


def test_every_registry_architecture_is_covered_or_listed():
    fixture = json.loads(REGISTRY.read_text(encoding="utf-8"))
    assert fixture["release"] == "0.33.0"
    registry = set(fixture["architectures"])
    in_corpus = {e["architecture"] for e in corpus()}
    listed = {
        i["architecture"]
        for i in json.loads((CORPUS / "not-covered.json").read_text(encoding="utf-8"))
    }
    assert registry <= in_corpus | listed, sorted(registry - in_corpus - listed)[:10]
    assert len(registry) >= 400


@pytest.mark.skipif(not NEWEST_SOURCE.is_dir(), reason="needs the unpacked vLLM wheels")
def test_the_registry_fixture_is_the_release_registry():
    from tools.gen_model_layouts import registry_architectures

    fixture = json.loads(REGISTRY.read_text(encoding="utf-8"))
    assert registry_architectures(NEWEST_SOURCE) == fixture["architectures"]
