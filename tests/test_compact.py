"""The compact builds: read back only for the exact source bytes they were made from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vllm_doctor import compact
from vllm_doctor.engine import loader, logmatch
from vllm_doctor.knowledge import DATA_DIR, load


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_built_once_then_read_back(cache):
    builds = []

    def build():
        builds.append(1)
        return {"n": len(builds)}

    assert compact.cached("thing", [("a", b"one")], build) == {"n": 1}
    assert compact.cached("thing", [("a", b"one")], build) == {"n": 1}
    assert builds == [1]
    assert len(list(cache.glob("thing-*.marshal"))) == 1


def test_changed_source_is_built_again_and_the_stale_build_dropped(cache):
    assert compact.cached("thing", [("a", b"one")], lambda: "from one") == "from one"
    assert compact.cached("thing", [("a", b"two")], lambda: "from two") == "from two"
    assert [p.name for p in cache.glob("thing-*.marshal")] == [
        f"thing-{compact.digest([('a', b'two')])}.marshal"
    ]


def test_corrupt_build_is_replaced(cache):
    compact.cached("thing", [("a", b"one")], lambda: [1, 2])
    (built,) = cache.glob("thing-*.marshal")
    built.write_bytes(b"\x00garbage")
    assert compact.cached("thing", [("a", b"one")], lambda: [3]) == [3]
    assert compact.cached("thing", [("a", b"one")], lambda: [4]) == [3]


def test_unwritable_cache_still_answers(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("VLLM_DOCTOR_CACHE_DIR", str(blocker / "cache"))
    assert compact.cached("thing", [("a", b"one")], lambda: "built") == "built"


def test_compact_catalogue_equals_the_table(cache):
    logmatch.load_catalogue.cache_clear()
    try:
        built = logmatch.load_catalogue()  # first use: builds
        logmatch.load_catalogue.cache_clear()
        read = logmatch.load_catalogue()  # read back from the compact file
    finally:
        logmatch.load_catalogue.cache_clear()
    table = load("errors")
    # the messages of the packages around vLLM (stack_errors.json) join vLLM's own
    stack = json.loads((DATA_DIR / "stack_errors.json").read_text())
    fresh = logmatch.Catalogue.build(
        [*table.keys(), *(k for k in stack["entries"] if k not in table)]
    )
    package_key = next(k for k in stack["entries"] if k not in table)
    for catalogue in (built, read):
        assert catalogue.keys == fresh.keys
        assert catalogue.parts == fresh.parts
        assert catalogue.by_anchor == fresh.by_anchor
        assert catalogue.prefixes == fresh.prefixes
        key = fresh.keys[123]
        assert catalogue.table.spans(key) == table.spans(key)
        assert catalogue.table.releases == table.releases
        assert catalogue.packages[package_key] == stack["entries"][package_key]
        assert catalogue.package_versions == stack["packages"]


def test_small_log_scan_finds_what_the_automaton_finds(cache):
    catalogue = logmatch.load_catalogue()
    text = (
        Path(__file__).parent.joinpath("..", "bench", "explain", "logs-3", "31480.log").read_text()
        * 3
    )
    small = logmatch.scan_log(text, (), catalogue)
    automaton = logmatch._LiteralFinder(frozenset(catalogue.anchors()))._scan_small(text)
    assert small.hits == automaton and small.hits


def test_edited_rule_file_is_read_afresh(cache, tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(loader.default_rules_dir(), rules)
    first, problems = loader.validate_dir(rules, strict=False)
    assert not problems
    path = rules / "env" / "ENV210.yaml"
    path.write_text(
        path.read_text().replace("summary: 'A CUDA library", "summary: 'Edited: a CUDA library")
    )
    again, problems = loader.validate_dir(rules, strict=False)
    assert not problems
    summary = {r.code: r.summary for r in again}["ENV210"]
    assert summary.startswith("Edited: a CUDA library")
    assert len(again) == len(first)


def test_cached_signature_plans_match_fresh_compilation(cache):
    rules, _ = loader.validate_dir(loader.default_rules_dir(), strict=False)
    for rule in rules:
        for signature in rule.signatures:
            fresh = logmatch.compile_signature(signature.pattern)
            cached = signature.compiled()
            assert [(p.piece, p.literal, p.gap_before) for p in cached.parts] == [
                (p.piece, p.literal, p.gap_before) for p in fresh.parts
            ]
