"""The memory probe: its arithmetic (capture sizes, vLLM's graph estimate, the activation fit),
the honest skip where no GPU is, its text output, and the measured table beside its raw output."""

import io
import json
import os
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.probes import memory
from vllm_doctor.probes.registry import BY_NAME
from vllm_doctor.probes.render import render_text
from vllm_doctor.probes.result import merge_rank_results
from vllm_doctor.probes.runner import resolve

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "memory"
TABLE = ROOT / "vllm_doctor" / "knowledge" / "data" / "memory_probe.json"
MIB = 1 << 20


def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return doctor_run("probe", *args, env=env, timeout=120)  # forked from the doctor's server


def test_capture_sizes_follow_vllm_defaults():
    sizes = memory.capture_sizes(256, 8192)
    # 1, 2, 4; 8..248 by 8 (31 sizes); 256..512 by 16 (17 sizes)
    assert len(sizes) == 51 and sizes[:4] == [1, 2, 4, 8] and sizes[-3:] == [480, 496, 512]
    assert 248 in sizes and 252 not in sizes and 264 not in sizes
    assert memory.capture_sizes(1024, 8192) == sizes  # the 512 ceiling
    assert memory.capture_sizes(8, 8192) == [1, 2, 4, 8, 16]  # 2 × max_num_seqs
    small_budget = memory.capture_sizes(256, 300)  # max_num_batched_tokens caps and is captured
    assert small_budget[-3:] == [272, 288, 300] and 256 in small_budget
    assert memory.capture_sizes(200, 8192)[-1] == 400 and 200 in memory.capture_sizes(200, 8192)


def test_vllm_graph_estimate_is_first_plus_second_times_the_rest():
    assert memory.vllm_graph_estimate([100 * MIB, 3 * MIB, 2 * MIB], 51) == 100 * MIB + 3 * MIB * 50
    # vLLM takes at least 1 MiB per later graph
    assert memory.vllm_graph_estimate([100 * MIB, 0], 5) == 100 * MIB + 4 * MIB
    assert memory.vllm_graph_estimate([7 * MIB], 1) == 7 * MIB
    assert memory.vllm_graph_estimate([], 4) == 0


def test_linear_fit():
    intercept, slope = memory.linear_fit([(2, 1.5), (4, 2.5), (8, 4.5)])
    assert intercept == pytest.approx(0.5) and slope == pytest.approx(0.5)
    assert memory.linear_fit([(3, 7.0)]) == (7.0, 0.0)


def test_model_shape_takes_the_config_and_fills_the_rest():
    shape, source = memory.model_shape({})
    assert shape == memory.DEFAULT_MODEL and "default" in source
    shape, source = memory.model_shape(
        {
            "model": {
                "hidden_size": 2048,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "vocab_size": True,
            }
        }
    )
    assert source == "model config"
    assert shape["intermediate_size"] == 7168 and shape["head_dim"] == 128
    assert shape["vocab_size"] == memory.DEFAULT_MODEL["vocab_size"]  # a bool is no size
    shape, _ = memory.model_shape({"model": {"num_attention_heads": 12, "num_key_value_heads": 5}})
    assert shape["num_key_value_heads"] == 12  # no grouping divides: one KV head per head


def test_memory_runs_only_when_named_and_has_a_fresh_part():
    spec = BY_NAME["memory"]
    assert spec.on_request and spec.needs_cuda and not spec.rules
    assert [p.name for p in spec.parts] == ["fresh"] and spec.parts[0].needs_cuda
    assert "memory" not in [s.name for s in resolve(None)]
    assert [s.name for s in resolve(["memory"])] == ["memory"]


def test_without_a_gpu_the_probe_says_it_could_not_run():
    proc = cli("memory", "--device", "cpu", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)["results"]
    assert [r["name"] for r in res] == ["memory"]
    assert res[0]["status"] == "skip"
    assert res[0]["verdict"].startswith("could not run: needs a CUDA GPU")
    listing = cli("--list")
    assert "memory" in listing.stdout and "measures; runs when named" in listing.stdout


def _measured_result():
    fig = memory.figure
    part = {
        "status": "pass",
        "reason": "",
        "metrics": {
            "figures": [
                fig("cuda_context", 512 * MIB, "the context", memory.HARDWARE),
                fig("cublas_workspace", 32 * MIB, "cuBLAS workspaces", memory.TORCH),
            ]
        },
    }
    rank = {
        "status": "pass",
        "reason": "one NCCL communicator of 1 rank(s): 0 MiB on this rank",
        "metrics": {
            "figures": [
                fig("nccl_communicator", 0, "one communicator", memory.HARDWARE, world_size=1)
            ]
        },
    }
    return merge_rank_results("memory", {0: rank}, {"fresh": part})


def test_text_output_shows_each_figure_with_its_tag():
    res = _measured_result()
    assert res.verdict() == "measured"
    out = io.StringIO()
    render_text([res], {"tp": 1, "device": "cuda"}, file=out)
    text = out.getvalue()
    assert "probe measured:" in text
    assert "[hardware] cuda_context: 512 MiB — the context" in text
    assert "[torch] cublas_workspace: 32 MiB — cuBLAS workspaces" in text
    assert "[hardware] nccl_communicator: 0 MiB" in text


def test_committed_table_is_the_device_runs_output():
    """knowledge/data/memory_probe.json holds exactly what table_entry reads from the raw JSON
    of the device runs committed in bench/memory (one per GPU)."""
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    assert table["kind"] == "memory_probe" and table["format"] == 1 and table["gpus"]
    for gpu, entry in table["gpus"].items():
        raw = json.loads((BENCH / entry["raw"]).read_text(encoding="utf-8"))
        expected = memory.table_entry(raw)
        assert expected["gpu"] == gpu
        assert {k: v for k, v in entry.items() if k != "raw"} == expected
        assert entry["cuda_context_gib"] > 0 and entry["total_gib"] > 0
        assert entry["activation"]["points"] and entry["cuda_graph"]["full"]["sizes"] > 1
