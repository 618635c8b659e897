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
    monkeypatch.setenv("VLLM_DOCTOR_STATE_DIR", str(tmp_path / "state"))
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
    monkeypatch.setenv("VLLM_DOCTOR_STATE_DIR", str(tmp_path / "state"))
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
        [*table.keys(), *(k for k in stack["entries"] if k not in table)],
        wrapped=set(table.keys()),  # end anchors for vLLM's own messages only, as the store
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
    automaton = logmatch.text._LiteralFinder(frozenset(catalogue.anchors()))._scan_small(text)
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


# -- a build is sealed: never trusted for being there (issue 37) ---------------------------------


def _rebuilt_payload(path: Path, change) -> tuple[bytes, bytes]:
    """(header with the old seal, payload of ``change(value)``)."""
    import marshal

    data = path.read_bytes()
    head_end = data.index(b"\n", len(compact._MAGIC)) + 1 + 64
    return data[:head_end], marshal.dumps(change(marshal.loads(data[head_end:])))


def _model001_as_info(value):
    for data in value["files"].values():
        if isinstance(data, dict) and data.get("code") == "MODEL001":
            data["severity"] = "info"
    return value


def test_an_edited_rule_build_is_rebuilt_from_the_shipped_rules(cache):
    loader._load_cached.cache_clear()
    rules = {r.code: r for r in loader.load_rules()}
    assert rules["MODEL001"].severity == "error"
    (built,) = cache.glob("rules-*.marshal")
    head, payload = _rebuilt_payload(built, _model001_as_info)
    built.write_bytes(head + payload)  # the old seal over a new value
    loader._load_cached.cache_clear()
    assert {r.code: r for r in loader.load_rules()}["MODEL001"].severity == "error"
    # forged with a seal of another key (a cache restored from elsewhere): rebuilt too
    head, payload = _rebuilt_payload(built, _model001_as_info)
    forged = compact._seal(
        b"k" * 32, built.name.rsplit("-", 1)[1].removesuffix(".marshal"), payload
    )
    built.write_bytes(head[:-64] + forged + payload)
    loader._load_cached.cache_clear()
    try:
        assert {r.code: r for r in loader.load_rules()}["MODEL001"].severity == "error"
    finally:
        loader._load_cached.cache_clear()


def test_a_build_of_the_wrong_shape_is_rebuilt(cache):
    import marshal

    key = compact.seal_key()
    sources = [("a", b"one")]
    built_from = compact.digest(sources)
    payload = marshal.dumps(["not", "a", "mapping"])
    (cache).mkdir(parents=True, exist_ok=True)
    (cache / f"thing-{built_from}.marshal").write_bytes(
        compact._MAGIC
        + built_from.encode()
        + b"\n"
        + compact._seal(key, built_from, payload)
        + payload
    )
    value = compact.cached("thing", sources, lambda: {"n": 1}, valid=lambda v: isinstance(v, dict))
    assert value == {"n": 1}
    assert compact.cached(
        "thing", sources, lambda: {"n": 2}, valid=lambda v: isinstance(v, dict)
    ) == {"n": 1}


def test_an_unsealed_build_of_an_older_doctor_is_not_read(cache):
    import marshal

    sources = [("a", b"one")]
    cache.mkdir(parents=True)
    (cache / f"thing-{compact.digest(sources)}.marshal").write_bytes(marshal.dumps("planted"))
    assert compact.cached("thing", sources, lambda: "built") == "built"


def test_without_a_private_key_folder_nothing_is_read_back(cache, tmp_path, monkeypatch):
    shared = tmp_path / "shared-state"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("VLLM_DOCTOR_STATE_DIR", str(shared))
    builds = []
    for _ in range(2):
        compact.cached("thing", [("a", b"one")], lambda: builds.append(1) or "v")
    assert builds == [1, 1] and not list(cache.glob("thing-*"))


def test_a_planted_cache_does_not_turn_the_gate(tmp_path):
    """End to end: the DiffusionGemma example exits 1 (MODEL001), whatever the cache holds."""
    import os

    from doctor_forks import doctor_run

    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env.update(
        VLLM_DOCTOR_CACHE_DIR=str(tmp_path / "cache"), VLLM_DOCTOR_STATE_DIR=str(tmp_path / "s")
    )

    def run():
        """`python -P -m vllm_doctor check ...`, forked from the doctor's server: the child
        reads the rules from this cache folder (the server's are another folder's)."""
        return doctor_run(
            "check", "-q", "--example", "diffusion-gemma-tp2", env=env, python_flags=("-P",)
        )

    assert run().returncode == 1
    for built in (tmp_path / "cache").glob("rules-*.marshal"):
        head, payload = _rebuilt_payload(built, _model001_as_info)
        built.write_bytes(head + payload)
    assert run().returncode == 1
    # a value of the wrong type, even sealed with this user's own key: rebuilt, not exit 3
    import marshal

    key = (tmp_path / "s" / "seal.key").read_bytes()
    for built in (tmp_path / "cache").glob("*.marshal"):
        built_from = built.name.rsplit("-", 1)[1].removesuffix(".marshal")
        payload = marshal.dumps([1, 2, 3])
        head = compact._MAGIC + built_from.encode() + b"\n"
        built.write_bytes(head + compact._seal(key, built_from, payload) + payload)
    rebuilt = run()
    assert rebuilt.returncode == 1, rebuilt.stderr
