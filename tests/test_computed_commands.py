"""Corrected commands with computed values: the longest --max-model-len that fits (as people
write it), a tensor-parallel size that divides the heads and fits the GPUs, an FP8 KV-cache
dtype the GPU takes — each judged before it is printed; the facts a workaround names are
printed as values, never as placeholders."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.commands.suggest import COMPUTERS, _round_lengths
from vllm_doctor.engine.loader import shipped_codes, validate_dir
from vllm_doctor.engine.rule import COMPUTABLE_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "fixtures" / "memory-logs" / "configs"
REPORTS = ROOT / "tests" / "fixtures" / "reports"


def check_json(*args: str) -> dict:
    run = doctor_run("check", "--offline", "--format", "json", *args, timeout=180, cwd=ROOT)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def suggestions(data: dict, code: str) -> list[dict]:
    finding = next(f for f in data["findings"] if f["code"] == code)
    return finding["suggestions"]


def errors_of(data: dict) -> list[str]:
    return [f["code"] for f in data["findings"] if f["severity"] == "error"]


def rerun(options: list[str], command: str) -> dict:
    """The handed-over command checked again with the same options."""
    return check_json(*options, "--", *shlex.split(command))


def test_qwen3_8b_at_128k_on_a_4090_gets_32768():
    """Issue 34: Qwen3-8B at --max-model-len 131072 on an RTX 4090 draws ARGS002 (the model
    has 40960) and MEM001 (about 35k tokens of KV cache): both hand over 32768."""
    options = ["--gpu", "4090", "--gpus", "1", "--model-config", str(CONFIGS / "Qwen3-8B")]
    data = check_json(*options, "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "131072")
    assert {"ARGS002", "MEM001"} <= set(errors_of(data))
    tokens = data["facts"]["facts"]["memory.kv_cache_tokens"]["value"]
    assert 32768 < tokens < 49152  # "about 35k tokens fit"
    expected = "vllm serve Qwen/Qwen3-8B --max-model-len 32768"
    for code in ("ARGS002", "MEM001"):
        [lower] = [s for s in suggestions(data, code) if s["title"].startswith("Lower")]
        assert lower["command"] == expected, lower
    mem001 = suggestions(data, "MEM001")[0]
    assert f"about {tokens:,} tokens" in mem001["title"]  # the value, not memory.kv_cache_tokens
    # the command handed over draws no error
    assert errors_of(rerun(options, expected)) == []


@pytest.mark.parametrize(
    "gpus, tp, code, expected",
    [
        ("4", "3", "PAR001", "-tp 4"),  # 32 heads: 3 divides nothing, 4 fits the four GPUs
        ("2", "4", "HW005", "-tp 2"),  # four ranks on two GPUs
    ],
)
def test_a_tensor_parallel_size_that_divides_the_heads_and_fits(gpus, tp, code, expected):
    options = [
        "--gpu",
        "A100 80GB",
        "--gpus",
        gpus,
        "--model-config",
        str(CONFIGS / "Llama-3.1-8B"),
    ]
    data = check_json(*options, "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "-tp", tp)
    commands = [s["command"] for s in suggestions(data, code) if s["command"]]
    assert commands[0] == f"vllm serve meta-llama/Llama-3.1-8B {expected}"
    assert errors_of(rerun(options, commands[0])) == []


def test_weights_that_fill_one_gpu_are_spread_over_two():
    options = [
        "--gpu",
        "A100 80GB",
        "--gpus",
        "4",
        "--model-config",
        str(CONFIGS / "Llama-3.1-Nemotron-70B-Instruct-HF"),
    ]
    serve = [
        "vllm",
        "serve",
        "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
        "--max-model-len",
        "8192",
    ]
    data = check_json(*options, "--", *serve)
    [spread] = [s for s in suggestions(data, "MEM003") if s["title"].startswith("Spread")]
    assert spread["command"] == shlex.join(serve) + " --tensor-parallel-size 2"
    assert errors_of(rerun(options, spread["command"])) == []


def test_no_tensor_parallel_size_is_invented_without_the_gpu_count():
    data = check_json(
        "--gpu",
        "RTX 4090",
        "--model-config",
        str(CONFIGS / "Llama-3.1-8B"),
        "--",
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-8B",
        "-tp",
        "3",
    )
    [divide] = [
        s for s in suggestions(data, "PAR001") if "divides the attention heads" in s["title"]
    ]
    assert divide["command"] is None
    assert "how many GPUs the target has is not known (--gpus N)" in divide["title"]


def test_placeholders_are_printed_as_values():
    torch = check_json(
        "--vllm-version", "0.24.0", "--torch-version", "2.9.0", "--", "vllm", "serve", "org/x"
    )
    [pin] = suggestions(torch, "ENV101")
    assert "Install torch 2.11.0" in pin["title"] and "pip install torch==2.11.0" in pin["title"]
    transformers = check_json(
        "--report",
        str(REPORTS / "rocm_mi300x.txt"),
        "--vllm-version",
        "0.24.0",
        "--",
        "vllm",
        "serve",
        "org/x",
    )
    [spec] = suggestions(transformers, "ENV100")
    assert "pip install 'transformers>=5.5.3'" in spec["title"]
    for data in (torch, transformers):
        for finding in data["findings"]:
            titles = [w["title"] for w in finding["workarounds"]]
            titles += [s["title"] for s in finding["suggestions"]]
            for title in titles:
                assert "<spec>" not in title and "(release." not in title, title
                assert not re.search(r"\{[a-z_]+\.", title), title


def test_every_placeholder_of_the_rule_base_names_a_fact(tmp_path):
    """rules validate refuses a placeholder that names no fact and an option the doctor does
    not compute."""
    rules = tmp_path / "rules" / "par"
    rules.mkdir(parents=True)
    for name in ("PAR001.yaml", "PAR001.cases.yaml"):
        shutil.copy(ROOT / "rules" / "par" / name, rules / name)
    text = (rules / "PAR001.yaml").read_text()
    assert "{model.num_attention_heads|" in text and "compute: [tensor-parallel-size]" in text
    assert validate_dir(tmp_path / "rules", other_codes=shipped_codes())[1] == []
    bad = text.replace("{model.num_attention_heads|", "{model.no_such_fact|").replace(
        "compute: [tensor-parallel-size]", "compute: [max-num-seqs]"
    )
    (rules / "PAR001.yaml").write_text(bad)
    problems = " ".join(validate_dir(tmp_path / "rules", other_codes=shipped_codes())[1])
    assert "{model.no_such_fact}" in problems and "max-num-seqs" not in COMPUTABLE_OPTIONS
    assert "lists options the doctor computes" in problems


def test_each_computable_option_has_its_computation():
    assert set(COMPUTERS) == set(COMPUTABLE_OPTIONS)


def test_lengths_are_rounded_as_people_write_them():
    assert _round_lengths(35888)[:4] == [32768, 24576, 16384, 12288]
    assert _round_lengths(131072)[0] == 131072 and _round_lengths(1023) == []
