"""The knowledge tables' span layout and the release a version is judged by."""

import json

import pytest

from vllm_doctor import knowledge
from vllm_doctor.knowledge import Table, match_release
from vllm_doctor.knowledge.ranges import dump, fold, table

RELEASES = ("0.8.0", "0.9.0", "0.10.0", "0.10.1")


def test_fold_merges_consecutive_equal_values_and_splits_on_change_or_gap():
    per = {
        "0.8.0": {"a": 1, "b": {"x": 1}},
        "0.9.0": {"a": 1, "b": {"x": 2}},
        "0.10.0": {"b": {"x": 2}},
        "0.10.1": {"a": 1, "b": {"x": 2}},
    }
    releases, entries = fold(per)
    assert releases == list(RELEASES)
    assert entries["a"] == [
        {"first": "0.8.0", "last": "0.9.0", "value": 1},
        {"first": "0.10.1", "last": "0.10.1", "value": 1},
    ]
    assert entries["b"] == [
        {"first": "0.8.0", "last": "0.8.0", "value": {"x": 1}},
        {"first": "0.9.0", "last": "0.10.1", "value": {"x": 2}},
    ]


def test_table_lookups_round_trip_through_dump():
    data = json.loads(
        dump(table("t", {"0.8.0": {"a": 1}, "0.9.0": {"a": 2, "c": 3}, "0.10.0": {"a": 2}}))
    )
    t = Table("t", data)
    assert t.get("a", "0.8.0").value == 1 and t.get("a", "0.10.0").value == 2
    assert t.get("c", "0.10.0") is None and t.get("c", "0.9.0").value == 3
    assert t.at("0.9.0") == {"a": 2, "c": 3}
    assert t.first_release("c") == "0.9.0" and t.last_release("c") == "0.9.0"
    assert t.first_release("zzz") is None


@pytest.mark.parametrize(
    "version,release,exact",
    [
        ("0.10.0", "0.10.0", True),
        ("0.10.0+cu126", "0.10.0", False),
        ("0.9.1rc1.dev20+g0d80979", "0.9.0", False),  # between 0.9.0 and 0.10.0
        ("0.10.1rc1.dev20+g0d80979", None, False),  # after the newest covered series
        ("0.11.0.dev3", None, False),
        ("0.9.5", None, False),  # not a covered release, not a dev build
        ("0.7.3", None, False),  # older than coverage
        ("0.12.0", None, False),  # newer than coverage
        ("banana", None, False),
    ],
)
def test_match_release(version, release, exact):
    m = match_release(version, RELEASES)
    assert (m.release, m.exact) == (release, exact)
    if release is None:
        assert m.note


def test_missing_table_is_a_knowledge_error():
    with pytest.raises(knowledge.KnowledgeError):
        knowledge.load("no-such-table")


def test_a_dev_build_lies_between_its_release_and_the_next_minor_series():
    m = match_release("0.9.1rc1.dev20+g0d80979", RELEASES)
    assert (m.release, m.upper) == ("0.9.0", "0.10.0")
    assert match_release("0.10.0", RELEASES).upper is None


def test_a_dated_build_resembles_every_release_up_to_the_series_after_the_one_built_after_it():
    from vllm_doctor.knowledge import covered_releases, match_release

    releases = tuple(covered_releases())
    # a main build of 2026-05-21 (after 0.21.0 was built on 2026-05-15, before 0.22.0 on
    # 2026-05-29): 0.22.0 is the first release built after it; main may already hold the code
    # of 0.23.0's series (0.22.0's branch was cut before the wheel was built)
    dated = match_release("0.20.2rc1.dev562+g1c78f76c2.d20260521", releases)
    assert dated.release == "0.20.1"
    assert dated.candidates == ("0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0")
    assert dated.upper == dated.candidates[-1]
    assert "built 2026-05-21" in dated.note and "git commit 1c78f76c2" in dated.note
    assert dated.commit == "1c78f76c2"
    # without the day: main keeps the base's number past the next minor release (the build
    # above was made after 0.21.0), so the second minor series after the base bounds it,
    # and the series after that may already be in main
    plain = match_release("0.20.2rc1.dev562+g1c78f76c2", releases)
    assert plain.candidates[0] == "0.20.1" and plain.candidates[-1] == "0.23.0"
    assert "0.22.0" in plain.candidates
    # built two days before 0.23.0 (2026-06-15): up to the series after it
    early = match_release("0.22.1rc1.dev499+g470229c37.d20260613", releases)
    assert (early.release, early.upper) == ("0.22.0", "0.24.0")
    # a release is exactly itself: no candidates to judge over
    assert match_release("0.21.0", releases).candidates == ()
