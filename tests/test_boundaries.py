"""Boundary fixtures: each comparison operator and each range edge of the engine, at the value
below, at and above its bound.

Each group here was written against a bug planted in a copy of the code that the rest of the
suite let through (bench/mutation/RESULTS.md lists them): a divisor larger than the value and a
multiple of it counted as dividing it, a nightly built from the fixing release counted as
affected, an off-by-one at an edge of a version range.
"""

from __future__ import annotations

import operator
from pathlib import Path

import pytest

from vllm_doctor.engine.conditions import compile_condition, possible_versions_satisfy
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, evaluate_rule
from vllm_doctor.engine.fixstate import AFFECTED, FIXED, fix_state
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.packages import set_vllm_version_facts
from vllm_doctor.facts.report import base_release

RULES = {rule.code: rule for rule in load_rules([Path(__file__).resolve().parents[1] / "rules"])}
PYTHON = {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}


def value_of(node: dict, flat: dict) -> bool | None:
    return compile_condition(node).evaluate(Facts.from_flat(flat)).value


# -- comparison operators -----------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(PYTHON))
@pytest.mark.parametrize("value", [7, 8, 9, 7.5, 8.0, 8.5])
def test_each_comparison_below_at_and_above_its_bound(op, value):
    literal = value_of(
        {"fact": "serve.tensor_parallel_size", op: 8}, {"serve.tensor_parallel_size": value}
    )
    assert literal is PYTHON[op](value, 8)
    # the same bound given by another fact
    other = value_of(
        {"fact": "serve.world_size", op: {"fact": "gpu.count"}},
        {"serve.world_size": value, "gpu.count": 8},
    )
    assert other is PYTHON[op](value, 8)


@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge"])
def test_a_fractional_bound_is_not_rounded(op):
    # gpu_memory_utilization 0.9 against 0.9, 0.89 and 0.91
    for value in (0.89, 0.9, 0.91):
        got = value_of(
            {"fact": "serve.gpu_memory_utilization", op: 0.9},
            {"serve.gpu_memory_utilization": value},
        )
        assert got is PYTHON[op](value, 0.9), (op, value)


# -- divisibility ---------------------------------------------------------------------------

DIVISIBLE = [
    # (value, divisor, divisible): the divisor larger than the value and a multiple of it
    # (4 heads at TP 8) does not divide it; equal values do; 1 divides everything
    (4, 8, False),
    (8, 4, True),
    (8, 8, True),
    (32, 64, False),
    (64, 32, True),
    (6, 4, False),
    (12, 8, False),
    (7, 1, True),
    (1, 2, False),
    (48, 6, True),
    (40, 16, False),
]


@pytest.mark.parametrize("value, divisor, divisible", DIVISIBLE)
def test_divisible_by_at_its_edges(value, divisor, divisible):
    literal = value_of(
        {"fact": "model.num_attention_heads", "divisible_by": divisor},
        {"model.num_attention_heads": value},
    )
    assert literal is divisible
    by_fact = value_of(
        {
            "fact": "model.num_attention_heads",
            "divisible_by": {"fact": "serve.tensor_parallel_size"},
        },
        {"model.num_attention_heads": value, "serve.tensor_parallel_size": divisor},
    )
    assert by_fact is divisible


@pytest.mark.parametrize(
    "heads, tp, expect",
    [
        (4, 8, APPLIES),
        (4, 16, APPLIES),
        (32, 64, APPLIES),
        (4, 3, APPLIES),
        (4, 4, NOT_APPLIES),
        (4, 2, NOT_APPLIES),
        (64, 8, NOT_APPLIES),
        (4, 1, NOT_APPLIES),
    ],
)
def test_par001_when_tp_is_a_multiple_of_the_heads(heads, tp, expect):
    # vLLM checks total_num_attention_heads % tensor_parallel_size: 4 heads cannot be split 8 ways
    facts = Facts.from_flat({"model.num_attention_heads": heads, "serve.tensor_parallel_size": tp})
    assert evaluate_rule(RULES["PAR001"], facts).verdict == expect


@pytest.mark.parametrize(
    "heads, kv, tp, expect",
    [
        (32, 8, 16, NOT_APPLIES),  # TP a multiple of the KV heads: they are replicated
        (32, 8, 8, NOT_APPLIES),
        (32, 8, 4, NOT_APPLIES),
        (48, 8, 6, APPLIES),  # neither divides the other
        (48, 16, 12, APPLIES),
    ],
)
def test_par002_kv_heads_divide_or_are_divided(heads, kv, tp, expect):
    facts = Facts.from_flat(
        {
            "model.num_attention_heads": heads,
            "model.num_key_value_heads": kv,
            "serve.tensor_parallel_size": tp,
        }
    )
    assert evaluate_rule(RULES["PAR002"], facts).verdict == expect


# -- version specifiers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, inside",
    [
        ("0.21.9", False),
        ("0.22.0rc1", False),
        ("0.22.0", True),
        ("0.22.0+cu130", True),
        ("0.22.0.post1", True),
        ("0.23.9", True),
        ("0.24.0rc1", False),
        ("0.24.0.dev3+gabc", False),
        ("0.24.0", False),
        ("0.24.0+cu130", False),
        ("0.24.1", False),
    ],
)
def test_version_specifier_edges(version, inside):
    assert (
        value_of({"fact": "vllm.version", "version": ">=0.22.0,<0.24.0"}, {"vllm.version": version})
        is inside
    )


@pytest.mark.parametrize(
    "possible, test, expected",
    [
        (">=0.24.0,<0.25.0", "<0.25.0", True),
        (">=0.25.0", "<0.25.0", False),
        (">=0.24.0,<=0.25.0", "<0.25.0", None),
        ("==0.25.0", ">=0.25.0", True),
        (">0.25.0", "<=0.25.0", False),
        (">=0.25.0", "<=0.25.0", None),
        ("<0.24.0", ">=0.24.0", False),
        ("<=0.24.0", ">=0.24.0", None),
        (">=0.22.0,<0.24.0", ">=0.22.0,<0.24.0", True),
        (">=0.21.0,<0.24.0", ">=0.22.0", None),
    ],
)
def test_inferred_versions_against_a_range_edge(possible, test, expected):
    assert possible_versions_satisfy(possible, test) is expected


# -- fix state: MODEL001 is affected from 0.24.0, fixed in 0.25.0 ----------------------------------

DIFFUSION = {
    "model.architectures": ["DiffusionGemmaForBlockDiffusion"],
    "serve.tensor_parallel_size": 2,
}


def installed(version: str) -> Facts:
    """Facts as the installed-package collector writes them for this version string."""
    facts = Facts.from_flat(DIFFUSION)
    set_vllm_version_facts(facts, version, Source.MACHINE, "package metadata")
    return facts


def reported(version: str) -> Facts:
    """Facts as the collect-env report parser writes them."""
    facts = Facts.from_flat({**DIFFUSION, "vllm.version": version})
    base = base_release(version)
    if base != version:
        facts.set("vllm.base_release", base, Source.REPORT, "test")
    return facts


@pytest.mark.parametrize("read", [installed, reported], ids=["installed", "report"])
@pytest.mark.parametrize(
    "version, expect",
    [
        ("0.23.0", NOT_APPLIES),
        ("0.24.0", APPLIES),
        ("0.24.0+cu130", APPLIES),
        ("0.24.1", APPLIES),
        ("0.25.0", NOT_APPLIES),
        ("0.25.0+cu130", NOT_APPLIES),
        ("0.25.0+cu126.precxx11", NOT_APPLIES),
        ("0.26.0", NOT_APPLIES),
        # nightlies built from the fixing release (setuptools-scm names the next patch)
        ("0.25.1.dev3+g0d8097964", NOT_APPLIES),
        ("0.25.1rc1.dev20+g0d8097964.d20261101", NOT_APPLIES),
        # built from the branch of 0.24.x: the fix may or may not be in it
        ("0.25.0rc1.dev5+gabcdef0", APPLIES),
        ("0.24.1.dev7+gabcdef0", APPLIES),
        # before the bug came in: a build after 0.22.0 may already hold 0.24.0's code (main
        # keeps its base's number past the next minor release), one after 0.20.0 may not
        ("0.23.1.dev2+gabc", APPLIES),
        ("0.22.1.dev2+gabc", APPLIES),
        ("0.20.1.dev2+gabc", NOT_APPLIES),
    ],
)
def test_model001_release_and_nightly_edges(read, version, expect):
    assert evaluate_rule(RULES["MODEL001"], read(version)).verdict == expect


def test_a_local_build_of_a_release_lowers_confidence_only():
    rule = RULES["MODEL001"]
    plain = fix_state(rule, installed("0.24.0"))
    local = fix_state(rule, installed("0.24.0+cu130"))
    assert (
        plain.state == local.state == AFFECTED and plain.method == local.method == "release-range"
    )
    assert local.lowers_confidence and not plain.lowers_confidence
    assert fix_state(rule, installed("0.25.0+cu130")).state == FIXED


def test_the_nightly_of_the_fixing_release_is_fixed_by_its_base():
    state = fix_state(RULES["MODEL001"], installed("0.25.1.dev3+g0d8097964"))
    assert state.state == FIXED and state.method == "dev-version"
    assert "descends from 0.25.0" in state.detail


@pytest.mark.parametrize(
    "version, inside",
    [
        ("0.0.1", True),
        ("0.9.9", True),
        ("0.10.0", False),
        ("0.10.0+cu128", False),  # [0, 0.10.0)
        ("0.20.0", False),
        ("0.21.0", True),
        ("0.21.0+cu130", True),
        ("99.0", True),  # [0.21.0, ∞)
    ],
)
def test_range_edges_from_zero_and_without_a_fix(version, inside):
    from packaging.version import Version

    from vllm_doctor.engine.fixstate import in_ranges
    from vllm_doctor.engine.rule import VersionRange

    ranges = (VersionRange("0", "0.10.0"), VersionRange("0.21.0", None))
    assert in_ranges(Version(version), ranges)[0] is inside


# -- redaction: the length a value needs to count as a token, whatever it is called ----------------


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "Basic"])
@pytest.mark.parametrize("length, hidden", [(7, False), (8, True), (40, True), (200, True)])
def test_a_bearer_token_without_a_secret_name_is_hidden_from_8_characters(scheme, length, hidden):
    from vllm_doctor.redact import REDACTED, redact_text

    token = ("Zq3x9W-_" * 40)[:length]
    # no secret-sounding name before it: only the scheme says it is a credential
    line = f"WARNING request to http://h:8000/v1 sent with {scheme} {token} was refused"
    out = redact_text(line)
    assert (token not in out and REDACTED in out) is hidden, out


@pytest.mark.parametrize(
    "token, hidden",
    [
        ("hf_" + "a" * 29, False),
        ("hf_" + "a" * 30, True),  # Hugging Face tokens
        ("sk-" + "b" * 19, False),
        ("sk-" + "b" * 20, True),  # OpenAI-style keys
        ("AKIA" + "C" * 15, False),
        ("AKIA" + "C" * 16, True),  # AWS access key ids
    ],
)
def test_token_shapes_at_their_minimum_length(token, hidden):
    from vllm_doctor.redact import redact_text

    assert (token not in redact_text(f"loaded {token} from the cache")) is hidden


# -- the other engine edges the mutation run found unguarded (bench/mutation/RESULTS.md) ------------


def test_an_inferred_fact_compared_with_another_fact():
    # every value an inferred fact leaves possible is compared with the other fact's value
    node = {"fact": "serve.world_size", "gt": {"fact": "gpu.count"}}
    facts = Facts.from_flat({"gpu.count": 4})
    facts.infer("serve.world_size", 8, "test", possible=[8, 16])
    assert compile_condition(node).evaluate(facts).value is True
    facts.infer("serve.world_size", 8, "test", possible=[2, 8])
    assert compile_condition(node).evaluate(facts).value is None


def test_a_rule_defers_to_the_one_that_applies():
    from test_engine import BASE, facts_of, make_rule, rule_data

    from vllm_doctor.engine.evaluate import evaluate_rules
    from vllm_doctor.engine.loader import parse_rule

    winner = make_rule()
    loser, problems = parse_rule(
        rule_data(
            code="MODEL902", slug="diffusion-tp-generic", affected=None, defers_to=["MODEL901"]
        ),
        Path("MODEL902.yaml"),
    )
    assert not problems, problems
    both = {
        f.rule.code: f
        for f in evaluate_rules([winner, loser], facts_of(**BASE, vllm__version="0.23.0"))
    }
    assert both["MODEL901"].verdict == APPLIES
    assert both["MODEL902"].verdict == NOT_APPLIES and both["MODEL902"].deferred_to == "MODEL901"
    alone = {
        f.rule.code: f
        for f in evaluate_rules([winner, loser], facts_of(**BASE, vllm__version="0.24.0"))
    }
    # the winner does not apply on 0.24.0; the deferring rule has no range and stands
    assert alone["MODEL901"].verdict == NOT_APPLIES
    assert alone["MODEL902"].deferred_to is None


def test_the_range_words_name_the_edges():
    from packaging.version import Version

    from vllm_doctor.engine.fixstate import in_ranges
    from vllm_doctor.engine.rule import VersionRange

    ranges = (VersionRange("0.22.0", "0.24.0"), VersionRange("0.30.0", None))
    assert in_ranges(Version("0.23.0"), ranges) == (True, "introduced in 0.22.0, fixed in 0.24.0")
    assert in_ranges(Version("0.31.0"), ranges) == (
        True,
        "introduced in 0.30.0, no fixed release yet",
    )
    assert in_ranges(Version("0.25.0"), ranges) == (
        False,
        "affected releases (0.22.0 ≤ v < 0.24.0; 0.30.0 ≤ v < ∞)",
    )


def test_a_torch_nightly_satisfies_a_range_it_lies_in():
    from vllm_doctor.facts.packages import satisfies

    assert satisfies("2.13.0.dev20261101+cu130", "torch>=2.12") is True
    assert satisfies("2.13.0.dev20261101+cu130", "torch<2.13") is False  # before 2.13.0
    assert satisfies("2.13.0+cu130", "torch==2.13.0") is True
    assert satisfies("2.12.1", "torch>=2.13,<2.14") is False
    assert satisfies("not-a-version", "torch>=2.12") is None


def test_environment_facts_keep_their_variable_names():
    from vllm_doctor.facts.collect import _env_from_facts

    facts = Facts.from_flat({"env.VLLM_USE_V1": "1", "env.HF_HUB_OFFLINE": 1, "serve.model": "m"})
    assert _env_from_facts(facts) == {"VLLM_USE_V1": "1", "HF_HUB_OFFLINE": "1"}


def test_a_report_whose_visible_devices_are_mig_ids_is_mig():
    from vllm_doctor.facts.report import parse_report

    reports = Path(__file__).parent / "fixtures" / "reports"
    text = (reports / "h100x8_nvlink_nightly.txt").read_text()
    assert "NCCL_CUMEM_ENABLE=0" in text
    text = text.replace(
        "NCCL_CUMEM_ENABLE=0", "CUDA_VISIBLE_DEVICES=MIG-4f2c7a0e-1b3d-5e6f-8a9b-0c1d2e3f4a5b"
    )
    facts = parse_report(text, "mig-ids")
    assert facts.value("gpu.mig_enabled") is True


@pytest.mark.parametrize(
    "cuda_major, value, possible, links",
    [
        (12, "12.8", ["12.6", "12.8"], True),  # libcudart.so.12: the 13.0 build is out
        (13, "13.0", None, True),  # one CUDA 13 build: that one, decided
        (None, "12.8", ["12.6", "12.8", "13.0"], False),  # major unknown: every build possible
    ],
)
def test_torch_cuda_inferred_from_the_pin_and_the_linked_runtime(
    cuda_major, value, possible, links
):
    from vllm_doctor.facts.stack import _infer_torch_cuda

    facts = Facts()
    _infer_torch_cuda(facts, "2.9.0", cuda_major, "vllm 0.11.0")
    fact = facts.get("torch.cuda_version")
    assert fact.value == value and fact.possible == possible
    assert ("libcudart.so." in fact.detail) is links
    assert "CUDA builds of torch 2.9.0: 12.6, 12.8, 13.0" in fact.detail
