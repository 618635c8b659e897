"""The 2026 corpus's report schema (bench/reports2026/schema.py): every report valid, and the
config_source of a config.json fetched from a stored copy of the served repository checked."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "bench" / "reports2026" / "reports"


# loaded by path under names of their own (bench/ is no package)
schema = load_script(ROOT / "bench" / "reports2026" / "schema.py", "reports2026_schema")


def _reports():
    return sorted(p for p in REPORTS.iterdir() if p.is_dir())


def _doc(directory: Path) -> dict:
    return yaml.safe_load((directory / "report.yaml").read_text(encoding="utf-8"))


def test_every_report_is_valid():
    found = {d.name: schema.problems(_doc(d), d) for d in _reports()}
    assert {name: p for name, p in found.items() if p} == {}


def test_reports_with_a_config_source_carry_the_served_repositorys_config():
    sourced = [d for d in _reports() if "config_source" in _doc(d)]
    assert sourced, "no report carries a config_source"
    for directory in sourced:
        doc = _doc(directory)
        assert "config.json" in doc["inputs"]
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        assert config.get("model_type") or config.get("architectures")
        assert isinstance(doc["config_source"]["retrieved"], dt.date)


def _sourced_report(tmp_path: Path) -> tuple[dict, Path]:
    directory = next(d for d in _reports() if "config_source" in _doc(d))
    target = tmp_path / directory.name
    target.mkdir()
    for name in _doc(directory)["inputs"] + ["report.yaml"]:
        (target / name).write_bytes((directory / name).read_bytes())
    return copy.deepcopy(_doc(directory)), target


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: d["config_source"].update(url="http://example.org"), "config_source.url"),
        (lambda d: d["config_source"].update(retrieved="recently"), "config_source.retrieved"),
        (lambda d: d["config_source"].update(note=" "), "config_source.note"),
        (lambda d: d["config_source"].pop("note"), "config_source: a mapping of exactly"),
        (
            lambda d: d.update(inputs=[n for n in d["inputs"] if n != "config.json"]),
            "config_source: config.json is not among the inputs",
        ),
        (lambda d: d.pop("config_source"), "config_source: a config.json says where it came from"),
    ],
)
def test_a_broken_config_source_is_named(tmp_path, change, problem):
    doc, directory = _sourced_report(tmp_path)
    change(doc)
    assert any(p.startswith(problem) for p in schema.problems(doc, directory))


def test_a_config_json_that_is_no_model_config_is_named(tmp_path):
    doc, directory = _sourced_report(tmp_path)
    (directory / "config.json").write_text('{"hidden_size": 1}', encoding="utf-8")
    assert "config.json: names neither model_type nor architectures" in schema.problems(
        doc, directory
    )
    (directory / "config.json").write_text("{not json", encoding="utf-8")
    assert any(p.startswith("config.json: not JSON") for p in schema.problems(doc, directory))


configs = load_script(ROOT / "bench" / "reports2026" / "configs.py", "reports2026_configs")


@pytest.mark.parametrize(
    "line, repo",
    [
        ("vllm serve Qwen/Qwen3-8B --max-model-len 8192", "Qwen/Qwen3-8B"),
        (
            "VLLM_USE_V1=1 python -m vllm.entrypoints.openai.api_server --model=org/name-1.5",
            "org/name-1.5",
        ),
        ("vllm serve Qwen/Qwen3-8B-GGUF:Q8_0", "Qwen/Qwen3-8B-GGUF"),
        ("vllm serve /models/Qwen3-8B", None),
        ("vllm serve ~/.cache/huggingface/qwen3-27b", None),
        ("vllm serve --port 8000", None),
    ],
)
def test_the_served_repository_is_read_from_the_serve_line(line, repo):
    assert configs.repo_id(configs.serve_model(line)) == repo


def test_configs_md_is_current_and_lists_every_sourced_report():
    text = (ROOT / "bench" / "reports2026" / "configs.md").read_text(encoding="utf-8")
    assert text == configs.document(), "python bench/reports2026/configs.py --write"
    for directory in _reports():
        source = _doc(directory).get("config_source")
        if source:
            assert f"| `{directory.name}` |" in text and source["url"] in text


split = load_script(ROOT / "bench" / "reports2026" / "split.py", "reports2026_split")


def test_which_split_a_thread_is_in_ignores_fragments_and_names_nothing_else():
    doc = {"test": ["t-1"], "train": ["r-1"]}
    sources = {
        "t-1": "https://github.com/o/r/issues/10",
        "r-1": "https://github.com/o/r/issues/11/",
    }
    assert split.which("https://github.com/o/r/issues/10#issuecomment-5", doc, sources) == "test"
    assert split.which("https://github.com/O/r/issues/11", doc, sources) == "train"
    assert split.which("https://github.com/o/r/issues/1", doc, sources) == "not in the corpus"


def test_a_package_message_names_a_cause_as_a_vllm_message_does():
    """causes.yaml's catalogue templates are read from vLLM's messages and from the messages
    of the packages around it (explain --log's package_messages)."""
    measure = load_script(ROOT / "bench" / "reports2026" / "measure.py", "reports2026_measure")
    codes, templates = measure.named_by_explain(
        {
            "known_failures": [{"code": "ENV103"}],
            "vllm_messages": [{"template": "a vLLM message"}],
            "package_messages": [{"template": "flashinfer-cubin version ({*}) does not match"}],
        }
    )
    assert codes == ["ENV103"]
    assert templates == ["a vLLM message", "flashinfer-cubin version ({*}) does not match"]
