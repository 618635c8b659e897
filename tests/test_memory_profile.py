"""The profile run's code path per release (vllm_doctor/memory/profile.py) and what it changes in
the estimate: the model runner, the dummy sampler's top-k/top-p path, the CUDA-graph estimate, and
the MXFP4 Triton backend's kept scales (memory/weights.py). Release facts from the wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from vllm_doctor.logreaders.memory_figures import says_flashinfer_sampler
from vllm_doctor.memory import profile as prof
from vllm_doctor.memory import weights as wmod
from vllm_doctor.memory.corpus import entry_facts
from vllm_doctor.memory.facts import compute_memory

CORPUS = Path(__file__).parent / "fixtures" / "memory-logs"
QWEN3 = prof.ModelTraits(architectures=("Qwen3ForCausalLM",))
QWEN3_MOE = prof.ModelTraits(architectures=("Qwen3MoeForCausalLM",), moe=True)
QWEN2 = prof.ModelTraits(architectures=("Qwen2ForCausalLM",))
JAMBA = prof.ModelTraits(architectures=("JambaForCausalLM",), moe=True, hybrid=True)


@pytest.mark.parametrize(
    ("version", "model", "v2"),
    [
        ("0.21.0", QWEN3, False),  # env only
        ("0.22.0", QWEN3, True),  # Qwen3ForCausalLM, dense, unquantized
        ("0.22.0", QWEN2, False),
        ("0.23.0", prof.ModelTraits(("LlamaForCausalLM",), quantized=True), False),
        ("0.24.0", QWEN2, False),  # the list only
        ("0.25.0", QWEN2, True),  # every model that is not MoE
        ("0.27.1", QWEN3_MOE, False),
        ("0.28.0", prof.ModelTraits(("Qwen2MoeForCausalLM",), moe=True), True),  # listed
        ("0.29.0", QWEN3_MOE, True),  # the default for all
    ],
)
def test_model_runner_per_release(version, model, v2):
    assert prof.uses_v2_runner(version, model)[0] is v2


def test_the_variable_overrides_the_runner_choice():
    assert prof.uses_v2_runner("0.20.0", QWEN2, "1")[0] is True
    assert prof.uses_v2_runner("0.33.0", QWEN2, "0")[0] is False


@pytest.mark.parametrize(
    ("version", "kwargs", "path"),
    [
        ("0.10.1.1", {}, prof.SORT),  # flashinfer is an extra of the wheel: not known
        ("0.10.1.1", {"flashinfer_installed": True}, prof.FLASHINFER),
        ("0.13.0", {"flashinfer_installed": True}, prof.SORT),  # opt-in from 0.11.1
        ("0.13.0", {"env": "1"}, prof.FLASHINFER),
        ("0.18.0", {}, prof.TRITON),
        ("0.21.0", {"capability": 90}, prof.FLASHINFER),  # on by default from 0.21.0
        ("0.21.0", {"capability": 70}, prof.TRITON),  # V100: below FlashInfer's 7.5
        ("0.25.0", {"capability": 75}, prof.TRITON),  # the floor is 8.0 from 0.25.0
        ("0.27.1", {"capability": 90, "env": "0"}, prof.TRITON),
        ("0.27.1", {"capability": None, "gpu_names": ["AMD Instinct MI300X"]}, prof.TRITON),
    ],
)
def test_sampler_path_per_release(version, kwargs, path):
    kwargs = {"capability": 90, "gpu_names": ["NVIDIA H100 80GB HBM3"], **kwargs}
    assert prof.sampler_path(version, v2=False, **kwargs)[0] == path


def test_the_v2_runner_samples_the_logits_alone():
    path, _ = prof.sampler_path("0.27.1", v2=True, capability=90, gpu_names=[])
    assert path == prof.LOGITS_ONLY
    assert prof.sampler_bytes_per_entry(path, 2) == 2
    # FlashInfer: bf16 logits, their float32 copy, the top-k masked copy and the softmax
    assert prof.sampler_bytes_per_entry(prof.FLASHINFER, 2) == 14
    assert prof.sampler_bytes_per_entry(prof.SORT, 2) is None  # measured / fitted


def test_no_cuda_graph_estimate_on_the_v2_runner_before_0_29():
    assert prof.graph_estimate_subtracted("0.27.1", v2=False, eager=False)[0]
    assert not prof.graph_estimate_subtracted("0.27.1", v2=True, eager=False)[0]
    assert prof.graph_estimate_subtracted("0.29.0", v2=True, eager=False)[0]
    assert not prof.graph_estimate_subtracted("0.29.0", v2=True, eager=True)[0]


@pytest.mark.parametrize(
    ("version", "env", "subtracted"),
    [
        # vllm/envs.py: absent before 0.18.0, default "0" in 0.18.0–0.19.1, "1" from 0.20.0
        ("0.17.1", "1", False),
        ("0.18.0", None, False),
        ("0.19.1", "1", True),
        ("0.20.0", None, True),
        ("0.20.0", "0", False),
        ("0.33.0", "0", False),
        ("0.33.0", "1", True),
    ],
)
def test_the_cuda_graph_estimate_follows_the_profiler_variable(version, env, subtracted):
    on, how = prof.graph_estimate_subtracted(version, v2=False, eager=False, env=env)
    assert on is subtracted
    if Version(version) >= Version("0.18.0"):
        assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS" + (f"={env}" if env else " unset") in how


def _h100_llama(version: str, prefix: str = "") -> float:
    facts = entry_facts(
        {
            "gpu": "NVIDIA H100 80GB HBM3",
            "gpu_count": 1,
            "vllm_version": version,
            "serve": f"{prefix}vllm serve m --max-num-seqs 256",
            "config": "models/Llama-3.1-8B-Instruct",
        }
    )
    facts.set("release.judged", version, "test")
    compute_memory(facts)
    return facts.value("memory.kv_cache_gib")


def test_the_serve_lines_profiler_variable_changes_the_kv_cache():
    """`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 vllm serve ...` (0.20.0 on: default 1) leaves
    the CUDA-graph estimate in the KV cache; `=1` on 0.19.1 (default 0) takes it out."""
    off = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 "
    on = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 "
    assert _h100_llama("0.33.0", off) > _h100_llama("0.33.0")
    assert _h100_llama("0.33.0", on) == _h100_llama("0.33.0")
    assert _h100_llama("0.19.1", on) < _h100_llama("0.19.1")
    assert _h100_llama("0.19.1", off) == _h100_llama("0.19.1")


def test_the_flashinfer_log_line_decides_the_sampler_of_a_real_log():
    """dennislee22's 0.10.1.1 runs: the single-node ones log FlashInfer's sampler and leave
    more KV cache than the Ray run whose workers lack flashinfer."""
    from vllm_doctor.memory.corpus import load_entry

    entry = load_entry(CORPUS / "dennislee22-qwen2-7b-a100-80g-util025.yaml")
    assert says_flashinfer_sampler(entry["log"])
    with_line = entry_facts(entry)
    with_line.set("release.judged", "0.10.1.1", "test")
    compute_memory(with_line)
    entry["log"] = "\n".join(
        line for line in entry["log"].splitlines() if "topk_topp_sampler" not in line
    )
    without = entry_facts(entry)
    without.set("release.judged", "0.10.1.1", "test")
    compute_memory(without)
    assert "flashinfer" in with_line.get("memory.activation_peak_gib").detail
    # 256 × 151646 float32 logits: 3.5 × 0.145 GiB with FlashInfer, 10 × by sorting
    assert with_line.value("memory.activation_peak_gib") < 0.6
    assert without.value("memory.activation_peak_gib") > 1.2
    assert with_line.value("memory.kv_cache_tokens") > without.value("memory.kv_cache_tokens")


def test_v2_runner_keeps_output_bin_counts_per_sequence_and_vocabulary_entry():
    facts = entry_facts(
        {
            "gpu": "NVIDIA H100 80GB HBM3",
            "gpu_count": 1,
            "vllm_version": "0.27.1",
            "serve": "vllm serve m --max-num-seqs 1024 --max-num-batched-tokens 2048",
            "config": "models/Llama-3.1-8B-Instruct",
        }
    )
    facts.set("release.judged", "0.27.1", "test")
    compute_memory(facts)
    detail = facts.get("memory.activation_peak_gib").detail
    assert "sampler state the runner keeps" in detail  # 1024 × 128256 × 4 B = 0.49 GiB
    assert facts.value("memory.activation_peak_gib") >= 0.49
    assert "profile_cudagraph_memory returns 0" in facts.get("memory.cuda_graph_gib").detail


def test_triton_mxfp4_keeps_the_loaded_scales_until_0_25():
    """gpt-oss-120b on an H100 under 0.14.1 printed "Model loading took 64.38 GiB" (vllm#33155):
    the MXFP4 values plus their scales twice (loaded and swizzled)."""
    cfg = json.loads((CORPUS / "configs" / "gpt-oss-120b" / "config.json").read_text())

    def weights(version: str) -> float:
        backend = wmod.mxfp4_backend(90, version)
        assert backend[0] == "triton"
        est = wmod.from_config(
            cfg,
            cfg,
            tp=1,
            pp=1,
            dtype_bytes=2,
            qcfg=cfg["quantization_config"],
            scheme=None,
            online_quant=None,
            moe_backend=backend,
            version=version,
        )
        return est.bytes_per_gpu / 2**30

    assert abs(weights("0.14.1") - 64.38) / 64.38 < 0.01
    assert weights("0.14.1") - weights("0.25.0") == pytest.approx(3.46, abs=0.05)
    # each expert's [N, K/32] scales padded to N % 256 (HopperMXScaleLayout, num_warps 8)
    assert wmod.hopper_swizzled_scale_bytes(1, 2880, 2880) == 5888 * 90 + 3072 * 90


def test_unified_memory_leaves_the_kv_cache_unknown_but_not_the_weights():
    """A Jetson's KV budget is the system memory cudaMemGetInfo reports, not the module's
    nominal size: the estimate says so instead of taking the smallest module (the kagaho log
    on a Jetson AGX Thor printed 702,800 tokens, the 64 GiB module would give about 300k)."""
    from vllm_doctor.memory.corpus import load_entry

    facts = entry_facts(load_entry(CORPUS / "web-kagaho-llama-3.1-8b-jetson-thor.yaml"))
    facts.set("release.judged", "0.10.2", "test")
    compute_memory(facts)
    assert facts.value("memory.kv_cache_tokens") is None
    assert "unified memory" in facts.why_missing("memory.kv_cache_tokens")
    assert facts.value("memory.weights_gib") == pytest.approx(14.99, abs=0.05)


def test_block_fp8_on_marlin_stores_group_scales_in_the_model_dtype():
    """Below compute capability 8.9 FP8 runs weight-only on Marlin, whose conversion turns the
    128×128 block scales into one bf16 scale per 128 inputs of every output channel: 1/64 B more
    per weight (the 0.19.1 A100 log of Qwen3-Coder-30B-A3B-FP8 loaded 29.54 GiB)."""
    from vllm_doctor.memory.corpus import load_entry

    cfg = load_entry(CORPUS / "web-guardkit-qwen3-30b-a3b-fp8-gb10.yaml")["config"]
    assert cfg["quantization_config"]["weight_block_size"] == [128, 128]

    def weights(marlin: bool) -> float:
        est = wmod.from_config(
            cfg,
            cfg,
            tp=1,
            pp=1,
            dtype_bytes=2,
            qcfg=cfg["quantization_config"],
            scheme=None,
            online_quant=None,
            fp8_marlin=marlin,
        )
        return est.bytes_per_gpu / 2**30

    assert weights(True) - weights(False) == pytest.approx(0.44, abs=0.02)
    assert wmod.fp8_runs_on_marlin(80, "0.19.1")
    assert not wmod.fp8_runs_on_marlin(89, "0.19.1")  # Ada has FP8
    assert not wmod.fp8_runs_on_marlin(80, "0.8.5")  # no block-quant Marlin before 0.9.0


def test_gb10_takes_the_small_batch_defaults_in_every_release():
    """get_batch_defaults keeps GB10 on 2048 tokens / 256 sequences: before 0.33.0 NVML reports
    no memory size for it and the memory reads 0 (the guardkit 0.13.0 log prints
    max_num_batched_tokens=2048); 0.33.0 reads the device properties' total but excludes
    compute capability 12.1 from the large tier (engine/arg_utils.py `is_gb10`)."""
    from vllm_doctor.memory.formula import batch_defaults, formula_for

    names = ["NVIDIA GB10"]
    for version in ("0.8.5", "0.13.0", "0.28.0", "0.32.0", "0.33.0", None):
        assert batch_defaults(121.69, names, formula_for(version)) == (2048, 256), version
    assert batch_defaults(79.18, ["NVIDIA H100 80GB HBM3"], formula_for("0.13.0")) == (8192, 1024)
    assert batch_defaults(121.69, ["NVIDIA GH200 120GB"], formula_for("0.33.0")) == (8192, 1024)


def test_the_fit_leaves_out_unified_memory_logs():
    """On Orin/Thor/Spark vLLM profiles with the system's free memory, so host allocations count
    as non-torch memory: such a log is no observation of the discrete-GPU terms."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "calibrate_memory", root / "tools" / "calibrate_memory.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool
    spec.loader.exec_module(tool)
    base = {"tp": 1, "hidden": 4096, "intermediate": 14336, "vocab": 128256, "layers_gpu": 32}
    logs = [
        tool.Observation(f"log{i}", batched=2048, seqs=256, overhead_gib=1.5, **base)
        for i in range(4)
    ]
    spark = tool.Observation(
        "spark", batched=2048, seqs=256, overhead_gib=6.0, unified_memory=True, **base
    )
    measured = (1.2, 10.0, "test")
    assert tool.fit([*logs, spark], measured)["non_torch"] == tool.fit(logs, measured)["non_torch"]
    assert tool.fit([*logs, spark], measured)["left_out"] == ["spark"]
