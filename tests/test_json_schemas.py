"""The JSON Schemas of docs/schemas/ against real outputs of every format that writes JSON:
`check --format json` (every bundled example, a manifest's targets, a Hub that cannot be
reached, computed commands, --recommend, --log, --package, a hybrid model's memory figures),
`fleet --format json`, `--format gitlab` (check, manifest, fleet), `explain --log`, `facts`,
`facts --schema`, `rules list` and `probe` (a CPU run here, and the documents the GPU machines
wrote, bench/probes/verdicts-json-*). SARIF is checked against OASIS's schema in
tests/test_gate.py."""

from __future__ import annotations

import json
import os
import socket
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from doctor_forks import doctor_run
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "docs" / "schemas"
EXAMPLES = ROOT / "vllm_doctor" / "examples"
REPORTS = ROOT / "tests" / "fixtures" / "reports"
CONFIGS = ROOT / "tests" / "fixtures" / "memory-logs" / "configs"
MANIFESTS = ROOT / "tests" / "fixtures" / "manifests" / "corpus"
CALIBRATION = ROOT / "tests" / "fixtures" / "calibration" / "configs"
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
DEVICE_RUNS = sorted((ROOT / "bench" / "probes").glob("verdicts-json-*/*.json"))


@lru_cache(maxsize=1)
def schemas() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.schema.json")}


def validate(name: str, document: object) -> None:
    found = schemas()
    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in found.values()
    )
    validator = jsonschema.Draft202012Validator(found[name], registry=registry)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    assert error is None, f"{list(error.absolute_path)}: {error.message[:400]}"


def doctor_json(*args: str, env: dict[str, str] | None = None) -> Any:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_DOCTOR_")}
    environ.update({"HF_HUB_OFFLINE": "1"}, **(env or {}))
    run = doctor_run(*args, timeout=300, cwd=ROOT, env=environ)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def test_the_schemas_are_valid_and_published():
    assert set(schemas()) == {
        "check.schema.json",
        "explain-log.schema.json",
        "fact-paths.schema.json",
        "facts.schema.json",
        "gitlab.schema.json",
        "probe.schema.json",
        "rules.schema.json",
    }
    for schema in schemas().values():
        jsonschema.Draft202012Validator.check_schema(schema)
    text = (ROOT / "docs" / "json-output.md").read_text()
    for name in schemas():
        assert f"schemas/{name}" in text, name


@pytest.mark.parametrize("example", ["diffusion-gemma-tp2", "gemma4-mtp-tp2", "healthy-h100-llama"])
def test_check_of_each_example(example):
    data = doctor_json("check", "--example", example, "-f", "json", "--recommend")
    validate("check.schema.json", data)
    assert {"inputs", "next_step"} <= set(data["summary"]) and "recommend" in data


def test_check_with_computed_commands_and_a_what_if():
    data = doctor_json(
        "check",
        "--gpu",
        "4090",
        "--gpus",
        "1",
        "--model-config",
        str(CONFIGS / "Qwen3-8B"),
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--max-model-len",
        "131072",
    )
    validate("check.schema.json", data)
    assert any(s["command"] for f in data["findings"] for s in f["suggestions"])


def test_check_with_the_hub_unreachable(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    data = doctor_json(
        "check",
        "--gpu",
        "A100 40GB",
        "--gpus",
        "2",
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "meta-llama/Llama-3.3-70B-Instruct",
        "-tp",
        "2",
        env={"HF_HUB_OFFLINE": "", "HF_ENDPOINT": url, "HF_HOME": str(tmp_path)},
    )
    validate("check.schema.json", data)
    assert data["summary"]["next_step"]["input"] == "model"


def test_check_of_a_manifest_and_of_a_report_without_vllm():
    wrapper = doctor_json("check", "--manifest", str(MANIFESTS / "lws-gpu-vllm.yaml"), "-f", "json")
    assert "targets" in wrapper
    validate("check.schema.json", wrapper)
    report = doctor_json(
        "check",
        "--report",
        str(REPORTS / "rtx3090_x2_driver535.txt"),
        "--recommend",
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "-tp",
        "2",
    )
    validate("check.schema.json", report)


def test_explain_log_and_facts():
    validate(
        "explain-log.schema.json",
        doctor_json(
            "explain", "--log", str(EXAMPLES / "diffusion-gemma-tp2" / "crash.log"), "-f", "json"
        ),
    )
    validate("facts.schema.json", doctor_json("facts", "--format", "json"))
    validate(
        "facts.schema.json",
        doctor_json(
            "facts",
            "--report",
            str(REPORTS / "h100x8_nvlink_nightly.txt"),
            "--gpu",
            "H100",
            "--format",
            "json",
        ),
    )


@pytest.mark.parametrize("path", DEVICE_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_documents_the_gpu_machines_wrote(path):
    document = json.loads(path.read_text())
    validate(
        "check.schema.json" if path.name.startswith("check") else "probe.schema.json", document
    )


def test_a_probe_run_here():
    pytest.importorskip("torch")
    validate(
        "probe.schema.json",
        doctor_json("probe", "tp-softembed", "--device", "cpu", "--tp", "2", "--format", "json"),
    )


def test_check_with_a_package_what_if_and_a_hybrid_models_memory():
    package = doctor_json(
        "check",
        "--vllm-version",
        "0.20.0",
        "--package",
        "flashinfer-python==0.2.0",
        "--package",
        "transformers==4.40.0",
        "--gpu",
        "H100 80GB",
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
    )
    validate("check.schema.json", package)
    assert (
        package["facts"]["facts"]["packages.flashinfer-python"]["source"] == "command-line override"
    )
    hybrid = doctor_json(
        "check",
        "--gpu",
        "H100 80GB",
        "--gpus",
        "1",
        "--vllm-version",
        "0.24.0",
        "--model-config",
        str(CALIBRATION / "nvidia--Qwen3.6-27B-NVFP4"),
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "nvidia/Qwen3.6-27B-NVFP4",
        "--max-model-len",
        "132000",
    )
    validate("check.schema.json", hybrid)
    assert "memory.mamba_blocks_verdict" in hybrid["facts"]["facts"]


def _fleet_documents(tmp_path: Path) -> Path:
    """Two nodes' facts documents: the real 4 x H200 host's, and the same host with another
    torch (a node the fleet tells apart)."""
    folder = tmp_path / "nodes"
    folder.mkdir()
    facts = json.loads((HOSTS / "h200x4-facts.json").read_text())
    (folder / "node-a.json").write_text(json.dumps(facts))
    facts["facts"]["torch.version"]["value"] = "2.10.0"
    (folder / "node-b.json").write_text(json.dumps(facts))
    return folder


def test_fleet_json_and_gitlab(tmp_path):
    folder = _fleet_documents(tmp_path)
    serve = ("--", "vllm", "serve", "Qwen/Qwen3-8B", "-tp", "4")
    fleet = doctor_json("fleet", "--facts", str(folder), "-f", "json", *serve)
    validate("check.schema.json", fleet)
    assert [n["label"] for n in fleet["fleet"]["nodes"]] == ["node-a", "node-b"]
    assert {t.get("node", {}).get("label") for t in fleet["targets"]} >= {"node-a", "node-b"}
    gitlab = doctor_json("fleet", "--facts", str(folder), "-f", "gitlab", *serve)
    validate("gitlab.schema.json", gitlab)


def test_gitlab_of_a_failing_check_and_of_a_manifest():
    failing = doctor_json("check", "--example", "diffusion-gemma-tp2", "-f", "gitlab")
    # MODEL001 (the error its log shows), then the warnings of a nightly that may be any of
    # 0.23.0-0.26.0: a torch/NCCL pair outside torch's pin, an architecture 0.23.0 lacks
    assert [i["check_name"] for i in failing] == ["MODEL001", "ENV102", "MODEL100"]
    validate("gitlab.schema.json", failing)
    manifest = doctor_json(
        "check", "--manifest", str(MANIFESTS / "lws-gpu-vllm.yaml"), "-f", "gitlab", "--strict"
    )
    validate("gitlab.schema.json", manifest)
    assert manifest, "the strict gate fails on the manifest's undecided errors"


def test_rules_list_and_the_fact_paths():
    from vllm_doctor.engine.rule import (
        CATEGORIES,
        COMPUTABLE_OPTIONS,
        CONFIDENCES,
        FIX_STATUSES,
        PHASES,
        SEVERITIES,
        STATUSES,
    )

    rules = doctor_json("rules", "list", "--format", "json")
    validate("rules.schema.json", rules)
    assert len(rules) == len({r["code"] for r in rules}) > 0
    # the schema's vocabularies are the rule loader's
    item = schemas()["rules.schema.json"]["items"]["properties"]
    assert item["status"]["enum"] == list(STATUSES)
    assert item["severity"]["enum"] == list(SEVERITIES)
    assert item["confidence"]["enum"] == list(CONFIDENCES)
    assert item["phase"]["enum"] == list(PHASES)
    assert item["fix"]["properties"]["status"]["enum"] == list(FIX_STATUSES)
    compute = item["workarounds"]["items"]["properties"]["serve"]["properties"]["compute"]
    assert compute["items"]["enum"] == list(COMPUTABLE_OPTIONS)
    assert all(
        f"|{c}|" in item["code"]["pattern"].replace("(", "|").replace(")", "|") for c in CATEGORIES
    )
    paths = doctor_json("facts", "--schema", "--format", "json")
    validate("fact-paths.schema.json", paths)
    assert "vllm.version" in {p["path"] for p in paths}
