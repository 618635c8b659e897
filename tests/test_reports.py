"""Golden outputs of every format, and the structure CI relies on.

Regenerate after an intended change: UPDATE_GOLDEN=1 python -m pytest tests/test_reports.py
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vllm_doctor.commands.check import render_document
from vllm_doctor.commands.suggest import suggest
from vllm_doctor.engine.evaluate import evaluate_rules
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.report.document import CheckDocument, RuleBase

HERE = Path(__file__).parent
RULES_DIR = HERE / "fixtures" / "engine" / "rules"
GOLDEN = HERE / "golden"


def document(fail_on: str = "error") -> CheckDocument:
    facts = Facts()
    facts.set("vllm.version", "0.23.0", Source.REPORT, "vLLM Version")
    facts.set("torch.version", "2.11.0+cu130", Source.REPORT, "PyTorch version")
    facts.set(
        "model.architectures",
        ["DiffusionGemmaForBlockDiffusion"],
        Source.CONFIG,
        "/models/dg/config.json",
    )
    facts.set("serve.tensor_parallel_size", 2, Source.SERVE, "-tp 2")
    facts.set("serve.model", "nvidia/diffusiongemma-26B-A4B-IT-NVFP4", Source.SERVE)
    facts.set(
        "serve.argv",
        ["nvidia/diffusiongemma-26B-A4B-IT-NVFP4", "-tp", "2", "--max-model-len", "32k"],
        Source.SERVE,
    )
    facts.mark_missing("gpu", "NVML not available: libnvidia-ml.so.1 not found")
    facts.mark_missing("topology", "NVML not available: libnvidia-ml.so.1 not found")
    rules = load_rules([RULES_DIR])
    findings = evaluate_rules(rules, facts)
    doc = CheckDocument(facts, findings, fail_on, 3, 0.0)
    doc.rulebase = RuleBase("0.1.0+fixture", 3, "0.33.0")
    suggest(doc, facts, rules)
    return doc


def render(fmt: str, verbose: bool = True) -> str:
    """The report exactly as `check -o FILE` writes it (soft-wrapped text)."""
    return render_document(document(), fmt, verbose=verbose, to_file=True)


@pytest.mark.parametrize(
    "fmt, suffix",
    [
        ("text", "txt"),
        ("json", "json"),
        ("markdown", "md"),
        ("sarif", "sarif"),
        ("junit", "xml"),
        ("github", "github.txt"),
        ("gitlab", "gitlab.json"),
        ("short", "short.txt"),
    ],
)
def test_golden(fmt, suffix, monkeypatch):
    monkeypatch.setenv("GITHUB_WORKSPACE", "/")  # SARIF's %SRCROOT%: the same on every machine
    out = render("text", verbose=False) if fmt == "short" else render(fmt)
    golden = GOLDEN / f"check.{suffix}"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


def test_verdicts_of_the_fixture():
    doc = document()
    assert [f.rule.code for f in doc.applies] == ["MODEL901"]
    assert [f.rule.code for f in doc.undecided] == ["HW901"]
    assert doc.undecided[0].missing[0].reason.startswith("NVML not available")


def test_json_schema_fields():
    data = json.loads(render("json"))
    assert data["schema_version"] == 1
    assert data["summary"]["errors"] == 1 and data["summary"]["failing"] == ["MODEL901"]
    finding = data["findings"][0]
    assert {e["fact"] for e in finding["evidence"]} == {
        "model.architectures",
        "serve.tensor_parallel_size",
    }
    assert finding["evidence"][0]["source"]
    assert data["undecided"][0]["missing"][0]["how_to_supply"]
    assert data["facts"]["schema_version"] == 1


def test_sarif_and_junit_are_well_formed():
    sarif = json.loads(render("sarif"))
    results = sarif["runs"][0]["results"]
    assert results[0]["ruleId"] == "MODEL901" and results[0]["level"] == "error"
    tree = ET.fromstring(render("junit"))
    suite = tree.find("testsuite")
    assert (
        suite.get("failures") == "1" and suite.get("skipped") == "1" and suite.get("tests") == "3"
    )


def test_fail_on_levels():
    assert [f.rule.code for f in document("error").failing()] == ["MODEL901"]
    assert document("never").failing() == []


def test_nan_and_infinity_never_make_invalid_json():
    """Inputs with NaN are refused at the door, but measured values can still be NaN or
    infinite (a probe's max error when its output is NaN, a ratio over zero free memory): every
    JSON format writes them as strings."""
    doc = document()
    doc.facts.set("memory.kv_cache_gib", float("-inf"), Source.DERIVED, "0 bytes free")
    doc.probes = [
        {
            "name": "tp-softembed",
            "status": "fail",
            "metrics": {"max_abs_err": float("nan"), "ratio": float("inf")},
        }
    ]
    doc.applies[0].evidence[0].value = float("nan")

    def strict_constant(name):
        raise AssertionError(f"invalid JSON constant {name}")

    for fmt in ("json", "sarif", "gitlab"):
        text = render_document(doc, fmt)
        json.loads(text, parse_constant=strict_constant)
    data = json.loads(render_document(doc, "json"))
    assert data["probes"][0]["metrics"] == {"max_abs_err": "NaN", "ratio": "Infinity"}
    assert data["facts"]["facts"]["memory.kv_cache_gib"]["value"] == "-Infinity"
    ET.fromstring(render_document(doc, "junit"))


def _shipped_case_finding(code: str):
    """The shipped rule evaluated on the facts of its first facts-only positive case."""
    from vllm_doctor import yaml_io
    from vllm_doctor.engine.cases import INPUT_KEYS, cases_path
    from vllm_doctor.engine.evaluate import evaluate_rule

    rule = next(r for r in load_rules(None) if r.code == code)
    case = next(
        c
        for c in yaml_io.safe_load(cases_path(rule).read_text())["cases"]
        if c["expect"] == "applies"
        and not c.get("log")
        and not any(c.get(k) is not None for k in INPUT_KEYS)
    )
    finding = evaluate_rule(rule, Facts.from_flat(case["facts"]))
    assert finding.verdict == "applies", (code, case["name"])
    return finding


@pytest.mark.parametrize("fail_on, failures", [("error", 1), ("warning", 2), ("info", 3)])
def test_each_severity_has_its_level_in_sarif_and_junit(fail_on, failures):
    # an error (PAR001), a warning (HW001) and an info finding (QUANT002) together: SARIF's
    # level follows the severity (info is SARIF's "note"), and JUnit fails exactly the
    # findings at or above --fail-on
    from vllm_doctor.report import formats

    findings = [_shipped_case_finding(code) for code in ("PAR001", "HW001", "QUANT002")]
    assert [f.severity for f in findings] == ["error", "warning", "info"]
    doc = CheckDocument(Facts(), findings, fail_on, 3, 0.0)
    run = json.loads(formats.render_sarif(doc))["runs"][0]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {"PAR001": "error", "HW001": "warning", "QUANT002": "note"}
    defaults = {r["id"]: r["defaultConfiguration"]["level"] for r in run["tool"]["driver"]["rules"]}
    assert defaults == levels
    for result in run["results"]:
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    suite = ET.fromstring(formats.render_junit(doc)).find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == str(failures)
    failed = {case.get("name").split()[0] for case in suite if case.find("failure") is not None}
    assert len(failed) == failures and ("PAR001" in failed)
