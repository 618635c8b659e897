"""Conditions that compare two facts, and facts that are never legitimately absent."""

from __future__ import annotations

import pytest

from vllm_doctor.engine.conditions import ConditionError, compile_condition
from vllm_doctor.facts.model import Facts


def evaluate(node, flat, missing=None):
    facts = Facts.from_flat(flat)
    for path, reason in (missing or {}).items():
        facts.mark_missing(path, reason)
    return compile_condition(node).evaluate(facts)


@pytest.mark.parametrize(
    "op, world, gpus, expected",
    [
        ("gt", 8, 4, True),
        ("gt", 4, 4, False),
        ("ge", 4, 4, True),
        ("lt", 2, 4, True),
        ("le", 5, 4, False),
        ("eq", 4, 4, True),
        ("ne", 4, 4, False),
        ("ne", 32, 24, True),
    ],
)
def test_compare_two_facts(op, world, gpus, expected):
    node = {"fact": "serve.world_size", op: {"fact": "gpu.count"}}
    outcome = evaluate(node, {"serve.world_size": world, "gpu.count": gpus})
    assert outcome.value is expected
    assert [t.path for t in outcome.evidence] == ["serve.world_size"]


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_either_side_unknown_is_unknown(op):
    node = {"fact": "serve.world_size", op: {"fact": "gpu.count"}}
    no_gpus = evaluate(node, {"serve.world_size": 8}, {"gpu": "NVML not available"})
    assert no_gpus.value is None and no_gpus.missing == ["gpu.count"]
    no_serve = evaluate(node, {"gpu.count": 4}, {"serve": "no serve line"})
    assert no_serve.value is None and no_serve.missing == ["serve.world_size"]
    # the left side absent (a flag not given) is no proof either way for a comparison of facts
    absent = evaluate(
        {"fact": "serve.max_model_len", op: {"fact": "model.vocab_size"}},
        {"model.vocab_size": 10, "serve.tensor_parallel_size": 1},
    )
    assert absent.value is None


def test_compare_strings_and_mismatched_types():
    node = {"fact": "serve.dtype", "eq": {"fact": "model.dtype"}}
    assert evaluate(node, {"serve.dtype": "BFloat16", "model.dtype": "bfloat16"}).value is True
    lt = {"fact": "serve.dtype", "lt": {"fact": "model.dtype"}}
    assert evaluate(lt, {"serve.dtype": "half", "model.dtype": "bfloat16"}).value is None


@pytest.mark.parametrize(
    "node",
    [
        {"fact": "gpu.count", "gt": {"fact": "nope.x"}},
        {"fact": "gpu.count", "eq": {"fact": "gpu.count", "plus": 1}},
        {"fact": "gpu.count", "lt": {"value": 3}},
    ],
)
def test_bad_fact_operands_are_rejected(node):
    with pytest.raises(ConditionError):
        compile_condition(node)


@pytest.mark.parametrize("op", [{"exists": False}, {"ne": 32}, {"not_in": [32]}])
def test_never_absent_facts_are_unknown_when_not_there(op):
    # A config.json read, but its head count under a key the collector does not know: even
    # the negative tests must not hold, or `not: {divisible_by}` proves an error.
    node = {"fact": "model.num_attention_heads", **op}
    outcome = evaluate(node, {"model.model_type": "mystery", "serve.tensor_parallel_size": 2})
    assert outcome.value is None and outcome.missing == ["model.num_attention_heads"]
    # an optional feature stays absent: a dense model has no experts
    dense = evaluate({"fact": "model.num_experts", "exists": False}, {"model.model_type": "llama"})
    assert dense.value is True


def test_negated_divisibility_over_unread_heads_cannot_decide():
    node = {
        "all": [
            {"fact": "serve.tensor_parallel_size", "gt": 1},
            {
                "not": {
                    "fact": "model.num_attention_heads",
                    "divisible_by": {"fact": "serve.tensor_parallel_size"},
                }
            },
        ]
    }
    outcome = evaluate(node, {"serve.tensor_parallel_size": 4, "model.model_type": "mamba"})
    assert outcome.value is None and outcome.missing == ["model.num_attention_heads"]
