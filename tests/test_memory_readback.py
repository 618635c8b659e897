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
