"""The corpus of real vLLM start-up logs (tests/fixtures/memory-logs): every entry is well
formed, cites public sources, has a config.json the doctor's own reader reads, and a log from
which the memory-figure reader gets at least the weights and the KV-cache tokens.

The entries are listed with their sources in tests/fixtures/memory-logs/README.md;
tools/memory_corpus_report.py prints the counts by kind, GPU and release.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.model_source import collect_model
from vllm_doctor.logreaders.memory_figures import read_memory_figures

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "memory-logs"
ENTRIES = sorted(CORPUS.glob("*.yaml"))
KINDS = ["dense", "moe", "mla", "sliding-window", "hybrid", "multimodal", "quantized"]
URL = r"^https://[^\s/]+\.[^\s/]+/\S+$"

SCHEMA = {
    "type": "object",
    "required": [
        "source",
        "model",
        "vllm_version",
        "gpu",
        "gpu_count",
        "serve",
        "engine_args",
        "config",
        "kinds",
        "log",
    ],
    "additionalProperties": False,
    "properties": {
        "source": {"type": "string", "pattern": URL},
        "model": {"type": "string", "pattern": r"^[\w.-]+/[\w.-]+$"},
        "vllm_version": {"type": ["string", "null"], "pattern": r"^\d+\.\d+(\.\d+)*(\.post\d+)?$"},
        "gpu": {"type": "string", "minLength": 2},
        "gpu_count": {"type": "integer", "minimum": 1},
        "serve": {"type": ["string", "null"]},
        "engine_args": {"type": ["object", "null"]},
        "config": {
            "anyOf": [
                {"type": "string", "pattern": r"^[\w./-]+/config\.json$"},
                {"type": "object", "minProperties": 1},
            ]
        },
        # checkpoint: a copy of the checkpoint's config.json; documented: an inline config
        # rebuilt from a citable document of the checkpoint's architecture (config_source)
        "config_origin": {"enum": ["checkpoint", "documented"]},
        "config_source": {"type": "string", "pattern": URL},
        "kinds": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": KINDS}},
        "checkpoint_gib": {"type": "number", "exclusiveMinimum": 0},
        "notes": {"type": "string"},
        "log": {"type": "string", "minLength": 40},
    },
    "if": {"required": ["config_origin"], "properties": {"config_origin": {"const": "documented"}}},
    "then": {"required": ["config_source"], "properties": {"config": {"type": "object"}}},
}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def config_path(entry: dict, tmp_path: Path) -> Path:
    if isinstance(entry["config"], dict):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(entry["config"]), encoding="utf-8")
        return path
    return FIXTURES / entry["config"]


@pytest.mark.parametrize("path", ENTRIES, ids=[p.stem for p in ENTRIES])
def test_entry_schema_and_sources(path: Path) -> None:
    entry = load(path)
    jsonschema.validate(entry, SCHEMA)
    # every URL the notes cite is a full address too
    for url in re.findall(r"https?://\S+", entry.get("notes", "")):
        assert re.match(URL, url.rstrip(".,;)'")), url


@pytest.mark.parametrize("path", ENTRIES, ids=[p.stem for p in ENTRIES])
def test_entry_config_reads_through_the_doctors_reader(path: Path, tmp_path: Path) -> None:
    entry = load(path)
    facts = Facts()
    collect_model(facts, model_config=config_path(entry, tmp_path), cwd=tmp_path)
    for fact in ("model.architectures", "model.num_hidden_layers", "model.num_key_value_heads"):
        assert facts.value(fact) is not None, (fact, facts.missing)
    if "moe" in entry["kinds"]:
        assert facts.value("model.num_experts"), "a MoE entry's config names its experts"


@pytest.mark.parametrize("path", ENTRIES, ids=[p.stem for p in ENTRIES])
def test_entry_log_gives_weights_or_kv_tokens(path: Path) -> None:
    entry = load(path)
    figures = read_memory_figures(entry["log"])
    assert (figures.weights_gib or 0) > 0 or (figures.kv_cache_tokens or 0) > 0, (
        "an entry's log carries the weights or the KV-cache tokens"
    )
    if (
        figures.max_concurrency_tokens
        and entry["engine_args"]
        and "max_model_len" in entry["engine_args"]
    ):
        assert figures.max_concurrency_tokens == entry["engine_args"]["max_model_len"]


def test_each_figure_is_carried_by_enough_entries() -> None:
    """Real logs often carry only one of the two figures (a thread quotes the weights line,
    or only the KV lines); each must still be measured on a good share of the corpus."""
    if not ENTRIES:
        pytest.skip("no entries yet")
    figures = [read_memory_figures(load(path)["log"]) for path in ENTRIES]
    for name in ("weights_gib", "kv_cache_tokens"):
        carried = sum(getattr(f, name) is not None for f in figures)
        assert carried >= 0.4 * len(figures), f"{name} in {carried}/{len(figures)} entries"


def test_every_entry_and_config_is_listed_in_the_readme() -> None:
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for path in ENTRIES:
        assert f"`{path.stem}`" in readme, path.stem
    for config in sorted((CORPUS / "configs").glob("*/config.json")):
        assert f"`{config.parent.name}`" in readme, config.parent.name
