"""A dev build is judged over every release it may resemble (knowledge.match_release's
candidates; engine/over_releases.judge_dev_build): a rule holds for it only where it holds for
all of them, and an error never rests on a release the build may not be."""

from __future__ import annotations

import json
from pathlib import Path

from doctor_forks import doctor_run

ROOT = Path(__file__).resolve().parents[1]
# vLLM issue 43381 (train split of bench/reports2026): a main build of 2026-05-21 on WSL2 that
# already had 0.22.0's Model Runner V2 default for Qwen3 and died with "UVA is not available"
WSL_REPORT = ROOT / "bench" / "reports2026" / "reports" / "vllm-43381"
NIGHTLY = "0.20.2rc1.dev562+g1c78f76c2.d20260521"


def check(version: str, serve: str, *more: str) -> dict[str, dict]:
    run = doctor_run(
        "check",
        "--format",
        "json",
        "--offline",
        "--no-config",
        "--fail-on",
        "never",
        "--elsewhere",
        "--serve",
        serve,
        "--vllm-version",
        version,
        *more,
    )
    assert run.returncode == 0, run.stderr
    findings = json.loads(run.stdout)["findings"]
    return {f["code"]: f for f in findings}


def wsl_check(version: str) -> dict[str, dict]:
    serve = (WSL_REPORT / "serve.txt").read_text(encoding="utf-8").strip()
    config = str(WSL_REPORT / "config.json")
    return check(version, serve, "--model-config", config, "--platform", "wsl2")


def test_a_nightly_holding_a_later_releases_default_is_warned_naming_the_releases():
    found = wsl_check(NIGHTLY)["ENV110"]
    assert found["verdict"] == "applies"
    assert found["severity"] == "warning"
    reason = found["missing"][0]["reason"]
    assert "applies in 0.22.0–0.23.0, not in 0.20.1–0.21.0" in reason
    assert "git commit 1c78f76c2" in reason and "vllm --version" in reason
    # the releases at both ends, judged as themselves
    assert "ENV110" not in wsl_check("0.21.0")
    assert wsl_check("0.22.0")["ENV110"]["verdict"] == "applies"


def test_an_error_in_only_some_of_the_releases_is_a_warning_for_a_nightly():
    # --watermark first shipped in 0.24.0: 0.23.0 refuses it, a 0.23.1 nightly may accept it
    line = "vllm serve m --watermark 0.5"
    assert check("0.23.0", line)["ARGS100"]["severity"] == "error"
    found = check("0.23.1rc1.dev20+g0d8097964", line)["ARGS100"]
    assert found["severity"] == "warning"
    assert "applies in 0.23.0, not in 0.24.0–0.26.0" in found["missing"][0]["reason"]
    # a typo no release accepts stays an error for the nightly
    typo = check("0.23.1rc1.dev20+g0d8097964", "vllm serve m --tensor-parallel-sise 2")
    assert typo["ARGS100"]["severity"] == "error"


def test_a_none_default_read_as_off_decides_the_sampler_jit_of_a_real_report():
    # skypilot issue 8733 (train split of bench/reports2026): vLLM 0.14.1 in a container without
    # nvcc; 0.14.1's VLLM_USE_FLASHINFER_SAMPLER is None unless set, and its sampler only
    # truth-tests it (envs table, generated from the wheel): the sampler JIT is off
    run = doctor_run(
        "check",
        "--format",
        "json",
        "--offline",
        "--no-config",
        "--fail-on",
        "never",
        "--elsewhere",
        "--vllm-version",
        "0.14.1",
        "--platform",
        "no-nvcc",
        "--platform",
        "container",
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    facts = doc["facts"]["facts"]
    sampler = facts["release.env.VLLM_USE_FLASHINFER_SAMPLER"]
    assert sampler["value"] is False and "truth test" in sampler["detail"]
    assert facts["release.flashinfer_sampler_jit"]["value"] is False
    assert "ENV170" in doc["not_applicable"]
