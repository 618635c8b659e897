"""A start-up log's printed memory figures read back and compared with the estimate
(`explain --log`, `check --log`), on a real log of the corpus."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_doctor.cli import app
from vllm_doctor.memory.corpus import load_entry

FIXTURES = Path(__file__).parent / "fixtures"
ENTRY = FIXTURES / "memory-logs" / "dennislee22-qwen2-7b-a100-80g-util05.yaml"
CONFIG = FIXTURES / "memory-logs" / "configs" / "Qwen2-7B-Instruct"
SERVE = "vllm serve Qwen2-7B-Instruct --max-model-len 16384 --gpu-memory-utilization 0.5"


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "startup.log"
    path.write_text(load_entry(ENTRY)["log"], encoding="utf-8")
    return path


def test_explain_log_reads_the_figures_back_and_compares(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "explain",
            "--log",
            str(_log(tmp_path)),
            "--format",
            "json",
            "--model-config",
            str(CONFIG),
            "--gpu",
            "NVIDIA A100 80GB",
            "--serve",
            SERVE,
        ],
    )
    memory = json.loads(result.stdout)["memory"]
    assert memory["printed"]["kv_cache_tokens"] == 464_848
    assert memory["printed"]["weights_gib"] == 14.2488
    rows = {row["fact"]: row for row in memory["comparison"]}
    assert abs(rows["memory.weights_gib"]["error"]) < 0.05
    assert abs(rows["memory.kv_cache_tokens"]["error"]) < 0.10
    assert memory["estimate"].startswith("KV cache ≈ ")


def test_explain_log_without_the_model_names_what_to_pass(tmp_path):
    result = CliRunner().invoke(app, ["explain", "--log", str(_log(tmp_path))])
    assert "vLLM's memory figures: weights 14.2488 GiB; KV cache 24.83 GiB" in result.stdout
    assert "pass --model-config, --gpu and --serve" in result.stdout


def test_check_log_shows_vllm_figures_beside_the_estimate(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "check",
            "--log",
            str(_log(tmp_path)),
            "--model-config",
            str(CONFIG),
            "--gpu",
            "NVIDIA A100 80GB",
            "--vllm-version",
            "0.10.1.1",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--serve",
            SERVE,
        ],
    )
    memory = json.loads(result.stdout)["memory"]
    assert memory["printed"]["max_concurrency"] == 28.37
    assert "vLLM printed" in memory["estimate"]
    assert {row["fact"] for row in memory["comparison"]} >= {
        "memory.weights_gib",
        "memory.kv_cache_gib",
        "memory.kv_cache_tokens",
    }


def _explain_json(tmp_path: Path, name: str, gpu: str, serve: str) -> dict:
    entry = load_entry(FIXTURES / "memory-logs" / f"{name}.yaml")
    log = tmp_path / f"{name}.log"
    log.write_text(entry["log"], encoding="utf-8")
    if isinstance(entry["config"], str):  # a file the corpus keeps
        config = FIXTURES / entry["config"]
    else:
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps(entry["config"]), encoding="utf-8")
    args = ["explain", "--log", str(log), "--format", "json", "--model-config", str(config)]
    result = CliRunner().invoke(app, [*args, "--gpu", gpu, "--serve", serve])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["memory"]


def test_explain_log_judges_the_release_its_banner_names(tmp_path):
    # a hybrid (Gated DeltaNet) log whose only version is the logo line of a 0.18.1 dev build:
    # judged by 0.18's formula (tokens = num_blocks // groups × block size), not the newest
    memory = _explain_json(
        tmp_path,
        "web-guardkit-qwen3.5-35b-a3b-fp8-gb10",
        "NVIDIA GB10",
        "vllm serve Qwen/Qwen3.5-35B-A3B-FP8 --trust-remote-code --max-model-len 262144 "
        "--gpu-memory-utilization 0.8 --enable-prefix-caching",
    )
    assert memory["release"] == "0.18.0"
    rows = {row["fact"]: row for row in memory["comparison"]}
    assert abs(rows["memory.kv_cache_tokens"]["error"]) < 0.10


def test_explain_log_says_when_the_release_is_unknown(tmp_path):
    # a December 2024 source checkout's log names no version: the newest formula, said so
    memory = _explain_json(
        tmp_path,
        "gh-10927-deepseek-v2-lite-chat-h100",
        "NVIDIA H100 80GB HBM3",
        "vllm serve deepseek-ai/DeepSeek-V2-Lite-Chat --enforce-eager --max-model-len 8192 "
        "--dtype float16",
    )
    assert "version unknown" in memory["release"] and "--vllm-version" in memory["release"]


def test_concurrencies_for_other_request_lengths_are_not_compared(tmp_path):
    args = ["explain", "--log", str(_log(tmp_path)), "--format", "json"]
    args += ["--model-config", str(CONFIG), "--gpu", "NVIDIA A100 80GB"]
    other = SERVE.replace("16384", "8192")
    memory = json.loads(CliRunner().invoke(app, [*args, "--serve", other]).stdout)["memory"]
    row = next(r for r in memory["comparison"] if r["fact"] == "memory.max_concurrency")
    assert row["error"] is None and "16,384 tokens per request" in row["note"]
    same = json.loads(CliRunner().invoke(app, [*args, "--serve", SERVE]).stdout)["memory"]
    row = next(r for r in same["comparison"] if r["fact"] == "memory.max_concurrency")
    assert abs(row["error"]) < 0.10 and "note" not in row


def test_explain_log_refuses_a_version_that_is_none(tmp_path):
    import subprocess
    import sys

    command = [sys.executable, "-m", "vllm_doctor", "explain", "--log", str(_log(tmp_path))]
    result = subprocess.run(
        [*command, "--vllm-version", "banana"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "'banana' is not a version" in result.stderr


def test_without_a_max_model_len_the_estimate_takes_the_logs(tmp_path):
    # the documented GPTQ config has no context length, and the post's serve line no
    # --max-model-len: the log's "Maximum concurrency for 32,768 tokens per request" gives it
    memory = _explain_json(
        tmp_path,
        "web-ddiiwoong-qwen2.5-7b-instruct-gptq-int4-l40s",
        "NVIDIA L40S",
        "vllm serve Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4 --quantization gptq_marlin",
    )
    assert memory["missing"] is None
    assert memory["estimate"].endswith("of 32k")
    rows = {row["fact"]: row for row in memory["comparison"]}
    assert abs(rows["memory.kv_cache_tokens"]["error"]) < 0.10
    assert abs(rows["memory.max_concurrency"]["error"]) < 0.10
