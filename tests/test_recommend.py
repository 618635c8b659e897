"""`check --recommend`: the newest covered release that runs on the driver and GPUs, the oldest
at or above the judged one with no error for the serve line, and why the others are passed
over."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from doctor_forks import doctor_run

from vllm_doctor import knowledge

ROOT = Path(__file__).resolve().parents[1]
# a real report: 2 × RTX 3090 on driver 535.129.03 (CUDA 12.2), vllm-project/vllm#4383
REPORT_535 = ROOT / "tests" / "fixtures" / "reports" / "rtx3090_x2_driver535.txt"
QWEN3_8B = ROOT / "tests" / "fixtures" / "memory-logs" / "configs" / "Qwen3-8B"


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor_run("check", "--offline", *args, timeout=240, cwd=ROOT)


def newest_release_on_cuda_major(major: int) -> str:
    """From the release knowledge, not from the doctor's answer: the newest covered release
    whose compiled extensions link the CUDA runtime of ``major``."""
    pins = knowledge.load("pins")
    return [r for r in knowledge.covered_releases() if pins.at(r)["cuda"]["major"] == major][-1]


def test_driver_535_names_the_newest_release_that_runs_and_why_newer_ones_do_not():
    serve = ["--", "vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2"]
    options = ["--report", str(REPORT_535), "--model-config", str(QWEN3_8B), "--recommend"]
    data = json.loads(doctor(*options, "-f", "json", *serve).stdout)
    rec = data["recommend"]
    newest = newest_release_on_cuda_major(12)
    assert rec["newest_running"] == newest
    releases = knowledge.covered_releases()
    first_cuda13 = releases[releases.index(newest) + 1]
    [blocked] = rec["not_running"]
    assert blocked["releases"] == f"{first_cuda13}–{releases[-1]}"
    assert blocked["errors"] == ["ENV001"]  # the driver's CUDA 12.2 is older than CUDA 13
    assert "driver.cuda_version = 12.2" in blocked["because"]["ENV001"]
    assert "torch.cuda_version = 13.0" in blocked["because"]["ENV001"]
    assert rec["torch"] == "each release's pin"  # the report's torch 2.2.1 is not kept
    text = doctor(*options, "-q", *serve).stdout
    assert f"runs here: vLLM {newest}, the newest release that runs on this driver" in text
    assert f"not {first_cuda13}–{releases[-1]}: ENV001 (" in text


def test_diffusion_gemma_is_cleared_from_0_25_0():
    run = doctor("--example", "diffusion-gemma-tp2", "--recommend", "-f", "json")
    assert run.returncode == 1, run.stderr  # MODEL001 still applies to the judged build
    rec = json.loads(run.stdout)["recommend"]
    assert rec["clears"] == {"MODEL001": "0.25.0"}
    assert rec["oldest_clearing"] == "0.25.0"
    assert rec["skipped"] == [
        {
            "releases": "0.24.0",
            "errors": ["MODEL001"],
            "because": {
                "MODEL001": "model.architectures = DiffusionGemmaForBlockDiffusion, "
                "serve.tensor_parallel_size = 2"
            },
        }
    ]
    text = doctor("--example", "diffusion-gemma-tp2", "--recommend", "-q").stdout
    assert "MODEL001 is cleared from 0.25.0" in text
    assert "vLLM 0.25.0, the oldest release at or above 0.23.1rc1.dev20+g0d8097964" in text


def test_a_torch_that_is_kept_bounds_the_releases():
    data = json.loads(
        doctor(
            "--report",
            str(REPORT_535),
            "--torch-version",
            "2.6.0",
            "--recommend",
            "-f",
            "json",
            "--",
            "vllm",
            "serve",
            "org/x",
        ).stdout
    )
    rec = data["recommend"]
    pins = knowledge.load("pins")
    on_26 = [r for r in knowledge.covered_releases() if pins.at(r)["torch"]["pin"] == "2.6.0"]
    assert rec["torch"] == "2.6.0" and rec["newest_running"] == on_26[-1]
    assert rec["not_running"][0]["errors"] == ["ENV101"]


def test_without_recommend_there_is_no_recommend_block():
    data = json.loads(doctor("--example", "healthy-h100-llama", "-f", "json").stdout)
    assert "recommend" not in data
