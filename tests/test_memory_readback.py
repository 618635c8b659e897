"""A start-up log's printed memory figures read back and compared with the estimate
(`explain --log`, `check --log`), on a real log of the corpus."""

from __future__ import annotations

import json
from pathlib import Path

from doctor_forks import doctor_run
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


def _explain_json(tmp_path: Path, name: str, gpu: str, serve: str, *extra: str) -> dict:
    entry = load_entry(FIXTURES / "memory-logs" / f"{name}.yaml")
    log = tmp_path / f"{name}.log"
    log.write_text(entry["log"], encoding="utf-8")
    if isinstance(entry["config"], str):  # a file the corpus keeps
        config = FIXTURES / entry["config"]
    else:
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps(entry["config"]), encoding="utf-8")
    args = ["explain", "--log", str(log), "--format", "json", "--model-config", str(config)]
    result = CliRunner().invoke(app, [*args, "--gpu", gpu, "--serve", serve, *extra])
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
    assert memory["release"] == "0.33.0"
    assert (
        "version unknown" in memory["release_note"] and "--vllm-version" in memory["release_note"]
    )


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
    command = ["explain", "--log", str(_log(tmp_path))]
    result = doctor_run(*command, "--vllm-version", "banana", timeout=120)
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


TOKENKAKI = "web-tokenkaki-qwen3-8b-a100-40g"  # 0.19.1, TP 1, default utilization 0.9
V19 = ("--vllm-version", "0.19.1")  # the post's release; the log names none


def _rows(memory: dict) -> dict[str, dict]:
    return {row["fact"]: row for row in memory["comparison"]}


def test_a_serve_line_that_differs_from_the_logs_run_is_not_an_estimate_error(tmp_path):
    # the log's whole "non-default args" line sets no utilization: its run had 0.19.1's 0.9
    gpu = "NVIDIA A100-SXM4-40GB"
    half = "vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.5"
    rows = _rows(_explain_json(tmp_path, TOKENKAKI, gpu, half, *V19))
    for fact in ("memory.kv_cache_gib", "memory.kv_cache_tokens", "memory.max_concurrency"):
        assert rows[fact]["error"] is None
        assert "gpu_memory_utilization 0.9, the estimate with 0.5" in rows[fact]["note"]
    assert abs(rows["memory.weights_gib"]["error"]) < 0.05  # the utilization does not move it
    rows = _rows(_explain_json(tmp_path, TOKENKAKI, gpu, "vllm serve Qwen/Qwen3-8B -tp 2", *V19))
    assert rows["memory.weights_gib"]["error"] is None
    assert "tensor_parallel_size 1, the estimate with 2" in rows["memory.weights_gib"]["note"]
    same = _rows(_explain_json(tmp_path, TOKENKAKI, gpu, "vllm serve Qwen/Qwen3-8B", *V19))
    assert (
        abs(same["memory.kv_cache_gib"]["error"]) < 0.10
        and "note" not in same["memory.kv_cache_gib"]
    )


def test_check_log_leaves_out_figures_of_another_run(tmp_path):
    entry = load_entry(FIXTURES / "memory-logs" / f"{TOKENKAKI}.yaml")
    log = tmp_path / "startup.log"
    log.write_text(entry["log"], encoding="utf-8")
    args = ["check", "--log", str(log), "--model-config", str(FIXTURES / entry["config"])]
    args += ["--gpu", "NVIDIA A100-SXM4-40GB", "--format", "json", "--fail-on", "never", *V19]
    result = CliRunner().invoke(
        app, [*args, "--", "vllm", "serve", "Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.5"]
    )
    memory = json.loads(result.stdout)["memory"]
    assert _rows(memory)["memory.kv_cache_gib"]["error"] is None
    assert "KV cache (GiB)" not in memory["estimate"]  # no percentage for it in the line


def test_a_log_line_cut_short_says_nothing_of_the_arguments_it_lost():
    from vllm_doctor.memory.readback import run_args

    whole = "INFO non-default args: {'model': 'm', 'max_num_seqs': 16}\n"
    assert run_args(whole)["tensor_parallel_size"] == 1 and run_args(whole)["max_num_seqs"] == 16
    cut = "INFO non-default args: {'model': 'm', 'max_num_seqs': 16, 'model_t\n"
    assert "tensor_parallel_size" not in run_args(cut) and run_args(cut)["max_num_seqs"] == 16


def test_ranks_that_print_figures_bound_the_logs_world_size():
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.memory.readback import run_args, run_differences

    line = "(VllmWorker TP{r} pid=1) INFO [gpu_model_runner.py:2007] Model loading took 7.1 GiB\n"
    figures = {"weights_gib": 7.1, "run_args": {"world_size_at_least": 2}}
    assert "ranks" not in str(run_differences({**figures, "run_args": {}}, Facts()))
    assert run_args(line.format(r=0) + line.format(r=1)) == {"world_size_at_least": 2}
    why = run_differences(figures, Facts())["weights_gib"]
    assert why == ["the log shows 2 ranks or more, the estimate is for 1"]
    tp2 = Facts()
    tp2.set("serve.tensor_parallel_size", 2, "serve line")
    assert run_differences(figures, tp2) == {}


def test_explain_log_names_the_release_whose_formula_it_applies(tmp_path):
    args = ["explain", "--log", str(_log(tmp_path)), "--model-config", str(CONFIG)]
    args += ["--gpu", "NVIDIA A100 80GB", "--serve", SERVE, "--vllm-version"]
    said = {
        version: next(
            line.strip()
            for line in CliRunner().invoke(app, [*args, version]).stdout.splitlines()
            if "by the formula of" in line
        )
        for version in ("9.9.9", "0.5.0", "0.23.1rc1.dev20+g0d80979", "0.10.1.1")
    }
    assert said["9.9.9"] == (
        "by the formula of vLLM 0.33.0 (the newest the knowledge covers; 9.9.9 is past it)"
    )
    assert said["0.5.0"] == (
        "by the formula of vLLM 0.8.0 (the oldest the knowledge covers; 0.5.0 is before it)"
    )
    assert said["0.23.1rc1.dev20+g0d80979"].startswith("by the formula of vLLM 0.23.0 (")
    assert said["0.10.1.1"] == "by the formula of vLLM 0.10.1.1"


def test_explain_log_refuses_a_bad_serve_line_or_gpu(tmp_path):
    command = ["explain", "--log", str(_log(tmp_path))]
    for bad, said in (
        (["--serve", "not a serve line"], "--serve: not a serve line"),
        (["--serve", "vllm serve 'model"], "cannot split into words"),
        (["--serve", " "], "the serve line is empty"),
        (["--gpu", ""], "'' is not a GPU the GPU table knows"),
    ):
        result = doctor_run(*command, *bad, timeout=120)
        assert result.returncode == 2, bad
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and said in result.stderr
