"""derived.cuda_compiler_matches_headers and ENV013: the pip CUDA compiler against the pip
runtime headers, on a real report of the corpus (a train report: ls1intum/edutelligence pull
request 687, https://github.com/ls1intum/edutelligence/pull/687)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from vllm_doctor.cli import app
from vllm_doctor.facts.derived import compute_derived
from vllm_doctor.facts.model import Facts, Source

REPORT = (
    Path(__file__).resolve().parents[1] / "bench/reports2026/reports/ls1intum-edutelligence-687"
)


def shown_packages() -> dict[str, str]:
    report = yaml.safe_load((REPORT / "report.yaml").read_text(encoding="utf-8"))
    return {name: str(v) for name, v in report["check"]["packages"].items()}


def run(*args: str, exit_code: int = 0) -> dict:
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == exit_code, done.output
    return json.loads(done.stdout)


def check_env013(packages: dict[str, str]) -> dict:
    words = [w for name, v in packages.items() for w in ("--package", f"{name}=={v}")]
    doc = run(
        "check",
        "--format",
        "json",
        "--offline",
        "--no-config",
        "--fail-on",
        "never",
        "--select",
        "ENV013",
        *words,
    )
    for key in ("findings", "undecided"):
        for finding in doc[key]:
            if finding["code"] == "ENV013":
                return finding
    return {"verdict": "not-applies"}


def test_the_reports_pip_toolkit_draws_env013_naming_both_versions():
    packages = shown_packages()
    assert packages == {"nvidia-cuda-nvcc": "13.2.86", "nvidia-cuda-runtime": "13.0"}
    finding = check_env013(packages)
    assert finding["verdict"] == "applies" and finding["severity"] == "warning"
    derived = next(
        e for e in finding["evidence"] if e["fact"] == "derived.cuda_compiler_matches_headers"
    )
    assert derived["value"] is False
    assert "nvidia-cuda-nvcc 13.2.86 (compiler 13.2)" in derived["source"]
    assert "nvidia-cuda-runtime 13.0 (headers 13.0)" in derived["source"]


def test_the_pull_requests_fix_pins_nvcc_to_the_runtimes_minor():
    finding = check_env013({"nvidia-cuda-nvcc": "13.0.88", "nvidia-cuda-runtime": "13.0.96"})
    assert finding["verdict"] == "not-applies"


@pytest.mark.parametrize(
    ("nvcc", "runtime", "same"),
    [
        ("13.2.86", "13.0", False),
        ("13.0.88", "13.0.96", True),
        ("13.4.46rc1", "13.4.1", True),
        ("13.10.1", "13.1.0", False),
    ],
)
def test_major_minor_compared_as_versions(nvcc, runtime, same):
    facts = Facts()
    facts.set("packages.nvidia-cuda-nvcc", nvcc, Source.USER)
    facts.set("packages.nvidia-cuda-runtime", runtime, Source.USER)
    compute_derived(facts, only=("derived.cuda_compiler_matches_headers",))
    assert facts.value("derived.cuda_compiler_matches_headers") is same


def test_an_unknown_runtime_leaves_it_open_and_names_why():
    facts = Facts()
    facts.set("packages.nvidia-cuda-nvcc", "13.2.86", Source.USER)
    facts.mark_missing("packages.nvidia-cuda-runtime", "the report lists no CUDA runtime")
    compute_derived(facts, only=("derived.cuda_compiler_matches_headers",))
    assert "derived.cuda_compiler_matches_headers" not in facts
    assert "the report lists no CUDA runtime" in facts.why_missing(
        "derived.cuda_compiler_matches_headers"
    )


def test_explain_names_env013_on_the_reports_log():
    # exit 1: the log names a known failure
    doc = run("explain", "--log", str(REPORT / "log.txt"), "--format", "json", exit_code=1)
    assert "ENV013" in [f["code"] for f in doc["known_failures"]]
