"""`vllm-doctor facts --schema` and docs/facts.md: every fact of facts/schema.py, with the
modules that write it and whether it can be inferred, checked against the collectors' code."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from doctor_forks import doctor_run

from vllm_doctor.facts.schema import FACTS, INFERABLE, spec_for, writers
from vllm_doctor.facts.schema_doc import REGENERATE, schema_markdown

PACKAGE = Path(__file__).resolve().parents[1] / "vllm_doctor"
DOC = PACKAGE.parent / "docs" / "facts.md"


def doctor(*argv: str) -> subprocess.CompletedProcess:
    return doctor_run(*argv, timeout=120)


def test_docs_facts_md_is_generated_from_the_schema():
    assert DOC.read_text() == schema_markdown().rstrip("\n") + "\n", (
        f"docs/facts.md is stale: {REGENERATE}"
    )
    assert doctor("facts", "--schema", "--format", "markdown").stdout == DOC.read_text()


def test_schema_lists_every_fact_in_text_and_json():
    listed = json.loads(doctor("facts", "--schema", "--format", "json").stdout)
    assert [row["path"] for row in listed] == list(FACTS)
    by_path = {row["path"]: row for row in listed}
    assert by_path["gpu.min_capability"]["can_be_inferred"] is True
    assert by_path["serve.flags"]["written_by"] == ["serveline/line.py"]
    assert by_path["release.quant.method"]["written_by"] == ["facts/release_kernels.py"]
    text = doctor("facts", "--schema").stdout
    for path, spec in FACTS.items():
        assert re.search(rf"^  {re.escape(path)}  \[{spec.type}", text, re.MULTILINE), path
    bad = doctor("facts", "--schema", "--format", "sarif")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_every_fact_is_named_in_a_module_that_writes_it():
    sources = {}
    unwritten = []
    for path in FACTS:
        named = writers(path)
        assert named, f"{path}: no writer in WRITERS"
        # a `*` fact is written under its prefix (packages.<name>, env.<NAME>)
        needle = path.split("*")[0] if "*" in path else path
        key = f'"{needle.rsplit(".", 1)[-1]}":'  # or a table keyed by its name (_FACT_OPTIONS)
        texts = [sources.setdefault(w, (PACKAGE / w).read_text()) for w in named]
        if not any(f'"{needle}' in t or f"'{needle}" in t or key in t for t in texts):
            unwritten.append(f"{path} (looked in {', '.join(named)})")
    assert unwritten == []


def test_inferable_matches_what_the_collectors_infer():
    inferred = set()
    for module in PACKAGE.rglob("*.py"):
        text = module.read_text()
        inferred.update(re.findall(r'\.infer\(\s*"([a-z_.]+)"', text))
        inferred.update(re.findall(r'\.set\(\s*"([a-z_.]+)",[^\n]*Source\.INFERRED\b', text))
    assert inferred, "no inference found: the patterns no longer match the code"
    listed = {p for p in INFERABLE if "*" not in p}
    patterns = {p for p in INFERABLE if "*" in p}
    assert {p for p in inferred if spec_for(p) is None} == set()
    missing = {
        p
        for p in inferred
        if p not in listed and not any(spec_for(p) is FACTS[q] for q in patterns)
    }
    assert missing == set(), f"inferred but not in INFERABLE: {missing}"
    assert listed - inferred == set(), "in INFERABLE but inferred nowhere"


def test_serve_flags_description_says_how_negations_are_recorded():
    # the trap a naive rule falls in (tests/test_rule_case_inputs.py shows it)
    assert "--no-enable-eplb gives enable-eplb" in FACTS["serve.flags"].description


def test_json_output_md_names_every_memory_fact():
    text = (PACKAGE.parent / "docs" / "json-output.md").read_text(encoding="utf-8")
    memory = [path for path in FACTS if path.startswith("memory.")]
    assert "memory.kv_cache_gib" in memory and "memory.weights_gib" in memory
    assert [path for path in memory if f"`{path}`" not in text] == []
