"""Probe results: merging ranks and parts, JSON shape, the rule -> probe map."""

import json

from vllm_doctor.probes import PROBE_NAMES, PROBES, PROBES_FOR_RULE, ProbeResult
from vllm_doctor.probes.registry import BY_NAME
from vllm_doctor.probes.result import merge_rank_results, worst


def rank(status, reason="", confirmed=(), refuted=(), **metrics):
    return {
        "status": status,
        "reason": reason,
        "metrics": metrics,
        "rules_confirmed": list(confirmed),
        "rules_refuted": list(refuted),
        "duration_s": 0.1,
    }


def test_worst_orders_statuses():
    assert worst(["pass", "skip"]) == "pass"
    assert worst(["pass", "warn", "fail"]) == "fail"
    assert worst(["fail", "timeout"]) == "timeout"
    assert worst(["timeout", "error", "pass"]) == "error"
    assert worst([]) == "skip"


def test_merge_takes_worst_rank_and_keeps_every_rank():
    res = merge_rank_results(
        "p", {0: rank("pass", "fine", ["A"], x=1), 1: rank("fail", "bad rows", ["B"], x=2)}
    )
    assert res.status == "fail"
    assert res.reason == "rank 1: bad rows"
    assert res.metrics == {"x": 1}  # the lowest rank's numbers
    assert [r["rank"] for r in res.ranks] == [0, 1]
    assert res.ranks[1]["metrics"] == {"x": 2}
    assert res.rules_confirmed == ["A", "B"]


def test_refuted_rules_never_include_confirmed_ones():
    res = merge_rank_results(
        "p", {0: rank("pass", confirmed=["R1"]), 1: rank("pass", refuted=["R1", "R2"])}
    )
    assert res.rules_confirmed == ["R1"]
    assert res.rules_refuted == ["R2"]


def test_failed_part_turns_pass_into_warn_with_its_reason():
    res = merge_rank_results(
        "p",
        {0: rank("pass", "main ok")},
        {"compile": {"status": "timeout", "reason": "too slow", "metrics": {"t": 3}}},
    )
    assert res.status == "warn"
    assert "compile sub-check: too slow" in res.reason
    assert res.metrics["compile"]["t"] == 3 and res.metrics["compile"]["status"] == "timeout"


def test_part_confirming_a_rule_adds_it():
    res = merge_rank_results(
        "p",
        {0: rank("pass")},
        {"transient": {"status": "pass", "metrics": {}, "rules_confirmed": ["SPEC001"]}},
    )
    assert res.status == "pass"
    assert res.rules_confirmed == ["SPEC001"]


def test_part_does_not_hide_a_failing_rank():
    res = merge_rank_results(
        "p",
        {0: rank("fail", "wrong sum")},
        {"c": {"status": "error", "reason": "died", "metrics": {}}},
    )
    assert res.status == "fail"
    assert res.reason == "wrong sum"


def test_to_dict_is_json_and_round_trips():
    res = ProbeResult(
        "p",
        "pass",
        "r",
        1.23456,
        {"a": float("nan"), "b": (1, 2)},
        [{"rank": 0}],
        ["X"],
        [],
        ["line"],
    )
    data = res.to_dict()
    text = json.dumps(data)
    back = ProbeResult.from_dict(json.loads(text))
    assert back.name == "p" and back.metrics["b"] == [1, 2] and back.duration_s == 1.2346
    for key in (
        "name",
        "status",
        "reason",
        "duration_s",
        "metrics",
        "ranks",
        "rules_confirmed",
        "rules_refuted",
        "log_tail",
    ):
        assert key in data


def test_rule_map_names_the_probes_of_the_seed_rules():
    expected = {
        "MODEL001": "tp-softembed",
        "MODEL002": "pp-handoff",
        "SPEC001": "cudagraph-replay",
        "SPEC002": "padded-batch",
        "SPEC003": "padded-batch",
        "QUANT001": "fp8-scaled-mm-3d",
        "QUANT002": "fp8-scaled-mm-3d",
        "HW001": "p2p-nccl",
        "HW201": "kernels",
        "HW211": "kernels",
        "ENV002": "kernels",
        "ENV212": "kernels",
    }
    for code, probe in expected.items():
        assert probe in PROBES_FOR_RULE[code]
    assert all(not n.startswith("selftest") for n in PROBE_NAMES)
    measuring = {p.name for p in PROBES if p.on_request}
    # the probes that measure (memory, the collectives' bandwidth) run on request and confirm
    # no rule
    assert measuring == {"memory", "collectives"}
    assert not any(BY_NAME[name].rules for name in measuring)
    assert set(PROBE_NAMES) - measuring == set(expected.values())
