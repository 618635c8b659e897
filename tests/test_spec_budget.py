"""The scheduler budget a speculative configuration leaves (derived.spec_*, facts/spec_budget.py):
the drafting slots per method as each release counts them, and the batch defaults per GPU."""

from __future__ import annotations

import pytest

from vllm_doctor.engine.over_releases import facts_for_release
from vllm_doctor.facts.derived import compute_derived
from vllm_doctor.facts.model import Facts, Source


def speculative(version: str | None, spec: dict, **serve) -> Facts:
    facts = Facts()
    if version:
        facts.set("vllm.version", version, Source.USER, "--vllm-version")
    facts.set("serve.speculative_config", spec, Source.SERVE, "--speculative-config")
    for name, value in serve.items():
        facts.set(f"serve.{name}", value, Source.SERVE, name)
    return facts


def with_gpu(facts: Facts, name: str, mib: int | None = None) -> Facts:
    facts.set("gpu.names", [name], Source.NVML, "NVML")
    if mib is not None:
        facts.set("gpu.memory_total_mib", mib, Source.NVML, "NVML")
    return facts


@pytest.mark.parametrize(
    ("version", "spec", "slots"),
    [
        # parallel drafting reserves K − 1 up to 0.27, DFlash K from 0.28, none from 0.33
        ("0.26.0", {"method": "dflash", "num_speculative_tokens": 16}, 15),
        ("0.27.1", {"method": "dflash", "num_speculative_tokens": 16}, 15),
        ("0.28.0", {"method": "dflash", "num_speculative_tokens": 16}, 16),
        ("0.33.0", {"method": "dflash", "num_speculative_tokens": 16}, 0),
        ("0.26.0", {"method": "dspark", "num_speculative_tokens": 7}, 6),
        ("0.33.0", {"method": "dspark", "num_speculative_tokens": 7}, 0),
        # a draft model: one slot; with parallel drafting (PARD) K (K − 1 + 1 before 0.28)
        ("0.26.0", {"method": "draft_model", "num_speculative_tokens": 5}, 1),
        (
            "0.26.0",
            {"method": "draft_model", "num_speculative_tokens": 5, "parallel_drafting": True},
            5,
        ),
        (
            "0.30.0",
            {"method": "draft_model", "num_speculative_tokens": 5, "parallel_drafting": True},
            5,
        ),
        # P-EAGLE
        ("0.30.0", {"method": "eagle3", "num_speculative_tokens": 8, "parallel_drafting": True}, 7),
        # serial methods reserve nothing
        ("0.26.0", {"method": "mtp", "num_speculative_tokens": 3}, 0),
        ("0.26.0", {"method": "eagle3", "num_speculative_tokens": 3}, 0),
    ],
)
def test_drafting_slots_per_release(version, spec, slots):
    facts = speculative(version, spec)
    compute_derived(facts)
    assert facts.value("derived.spec_drafting_slots") == slots


def test_issue_50708_figure_from_the_gb10_defaults():
    # vLLM 0.26.0 printed -1792 for DFlash K=16 on a DGX Spark with the default batching
    facts = with_gpu(
        speculative("0.26.0", {"method": "dflash", "num_speculative_tokens": 16}), "NVIDIA GB10"
    )
    compute_derived(facts)
    assert facts.value("derived.spec_scheduled_tokens") == -1792
    assert "2048 − 15 × 256" in facts.get("derived.spec_scheduled_tokens").detail


def test_large_gpu_default_tier_and_explicit_batch():
    spec = {"method": "dflash", "num_speculative_tokens": 15}
    facts = with_gpu(speculative("0.26.0", spec), "NVIDIA H100 80GB HBM3", 81559)
    compute_derived(facts)
    assert facts.value("derived.spec_scheduled_tokens") == 8192 - 14 * 1024
    raised = with_gpu(
        speculative("0.26.0", spec, max_num_batched_tokens=32768), "NVIDIA H100 80GB HBM3", 81559
    )
    compute_derived(raised)
    assert raised.value("derived.spec_scheduled_tokens") == 32768 - 14 * 1024


def test_explicit_batch_needs_no_gpu():
    facts = speculative(
        "0.26.0",
        {"method": "dflash", "num_speculative_tokens": 16},
        max_num_batched_tokens=8192,
        max_num_seqs=512,
    )
    compute_derived(facts)
    assert facts.value("derived.spec_scheduled_tokens") == 8192 - 15 * 512


def test_default_seqs_never_exceed_the_batch_given():
    # EngineArgs: a default max_num_seqs is min(default, max_num_batched_tokens)
    facts = with_gpu(
        speculative(
            "0.26.0",
            {"method": "draft_model", "num_speculative_tokens": 4},
            max_num_batched_tokens=128,
        ),
        "NVIDIA GB10",
    )
    compute_derived(facts)
    assert facts.value("derived.spec_scheduled_tokens") == 128 - 1 * 128


@pytest.mark.parametrize(
    ("facts", "missing"),
    [
        # the defaults depend on the GPU
        (speculative("0.26.0", {"method": "dflash", "num_speculative_tokens": 16}), "gpu.names"),
        # and on the release
        (
            with_gpu(
                speculative(None, {"method": "dflash", "num_speculative_tokens": 16}), "NVIDIA GB10"
            ),
            "vllm.version",
        ),
        # data parallelism has its own default batch: not modelled, not guessed
        (
            with_gpu(
                speculative(
                    "0.26.0",
                    {"method": "dflash", "num_speculative_tokens": 16},
                    data_parallel_size=2,
                ),
                "NVIDIA GB10",
            ),
            "serve.max_num_batched_tokens",
        ),
        # chunked prefill off grows the batch to max_model_len
        (
            with_gpu(
                speculative(
                    "0.26.0",
                    {"method": "dflash", "num_speculative_tokens": 16},
                    enable_chunked_prefill=False,
                ),
                "NVIDIA GB10",
            ),
            "serve.max_num_batched_tokens",
        ),
        # a method vLLM infers from the draft model's name
        (
            speculative("0.26.0", {"model": "org/drafter", "num_speculative_tokens": 4}),
            "serve.speculative_method",
        ),
    ],
)
def test_undecided_names_the_missing_fact(facts, missing):
    compute_derived(facts)
    assert facts.get("derived.spec_scheduled_tokens") is None
    assert missing in facts.why_missing("derived.spec_scheduled_tokens")


def test_absent_without_a_speculative_configuration():
    facts = with_gpu(Facts(), "NVIDIA GB10")
    facts.set("vllm.version", "0.26.0", Source.USER, "--vllm-version")
    compute_derived(facts)
    assert facts.get("derived.spec_scheduled_tokens") is None
    assert not facts.why_missing("derived.spec_scheduled_tokens")


def test_recomputed_for_each_release_judged():
    # judged over releases (no version given), the slots follow each release
    facts = with_gpu(
        speculative(None, {"method": "dflash", "num_speculative_tokens": 16}), "NVIDIA GB10"
    )
    assert facts_for_release(facts, "0.26.0").value("derived.spec_drafting_slots") == 15
    assert facts_for_release(facts, "0.33.0").value("derived.spec_drafting_slots") == 0


def test_a_batch_size_the_serve_line_names_but_does_not_state_is_not_a_default():
    # --max-num-batched-tokens "$BATCH" with the variable unset: the release default is not it
    facts = with_gpu(
        speculative("0.26.0", {"method": "dflash", "num_speculative_tokens": 16}), "NVIDIA GB10"
    )
    facts.mark_missing("serve.max_num_batched_tokens", "$BATCH is not set")
    compute_derived(facts)
    assert facts.get("derived.spec_scheduled_tokens") is None
    assert "$BATCH" in facts.why_missing("derived.spec_scheduled_tokens")
