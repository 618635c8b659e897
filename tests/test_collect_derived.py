"""Environment facts (prefixes, redaction) and derived facts (free memory, divisibility)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_doctor.engine.over_releases import facts_for_release
from vllm_doctor.facts.derived import compute_derived
from vllm_doctor.facts.environment import REDACTED, collect_environment
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.model_source import collect_model

MODELS = Path(__file__).parent / "fixtures" / "models"


def test_environment_prefixes_and_redaction():
    environ = {
        "VLLM_ATTENTION_BACKEND": "FLASHINFER",
        "NCCL_P2P_DISABLE": "1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "HF_TOKEN": "hf_secret",
        "VLLM_API_KEY": "sk-1",
        "HF_HUB_OFFLINE": "1",
        "NCCL_IB_PASSWORD": "x",
        "VLLM_SECRET_THING": "y",
        "HOME": "/root",
        "PATH": "/bin",
        "OPENAI_API_KEY": "never-collected",
    }
    facts = Facts()
    collect_environment(facts, environ)
    env = {p[4:]: f.value for p, f in facts.area("env")}
    assert env["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert env["HF_HUB_OFFLINE"] == "1"
    for secret in ("HF_TOKEN", "VLLM_API_KEY", "NCCL_IB_PASSWORD", "VLLM_SECRET_THING"):
        assert env[secret] == REDACTED
    assert "HOME" not in env and "PATH" not in env and "OPENAI_API_KEY" not in env
    assert "hf_secret" not in facts.to_json()
    assert facts.get("env.NCCL_P2P_DISABLE").source == Source.ENV


def model_facts(name: str, **serve) -> Facts:
    facts = Facts()
    collect_model(facts, MODELS / name)
    for key, value in serve.items():
        facts.set(f"serve.{key}", value, Source.SERVE)
    return facts


def add_gpus(facts: Facts, total_mib: int, free_mib: list[int], cuda: str = "12.8") -> None:
    devices = [
        {"index": i, "memory_total_mib": total_mib, "memory_free_mib": f}
        for i, f in enumerate(free_mib)
    ]
    facts.set("gpu.devices", devices, Source.NVML)
    facts.set("gpu.memory_total_mib", total_mib, Source.NVML)
    facts.set("gpu.memory_free_mib", min(free_mib), Source.NVML)
    facts.set("driver.cuda_version", cuda, Source.NVML)


def test_divisibility_and_driver_facts():
    facts = model_facts(
        "Llama-3.1-8B-Instruct",
        tensor_parallel_size=2,
        max_model_len=8192,
        gpu_memory_utilization=0.9,
    )
    add_gpus(facts, 24564, [24000, 24100])
    facts.set("torch.cuda_version", "12.8", Source.MACHINE)
    compute_derived(facts)
    assert facts.value("derived.free_memory_below_utilization") is False
    assert facts.value("derived.tp_divides_heads") is True
    assert facts.value("derived.tp_divides_kv_heads") is True
    assert facts.value("derived.driver_supports_torch_cuda") is True
    assert facts.get("derived.tp_divides_heads").source == Source.DERIVED
    # the memory estimate is the memory model's (memory.*), not a derived fact
    assert not any(p.startswith("derived.kv_bytes") for p in [*facts.values, *facts.missing])


def test_tp_that_does_not_divide_heads():
    facts = model_facts("Qwen3-30B-A3B", tensor_parallel_size=3)
    compute_derived(facts)
    assert facts.value("derived.tp_divides_heads") is False  # 32 heads
    assert facts.value("derived.tp_divides_kv_heads") is False  # 4 KV heads
    facts = model_facts("Qwen3-30B-A3B", tensor_parallel_size=8)
    compute_derived(facts)
    assert facts.value("derived.tp_divides_kv_heads") is True  # 8 % 4 == 0: heads replicated


def test_free_memory_below_utilization_names_the_gpu():
    facts = model_facts(
        "Llama-3.1-8B-Instruct", tensor_parallel_size=2, gpu_memory_utilization=0.95
    )
    add_gpus(facts, 81559, [80000, 60000])
    compute_derived(facts)
    assert facts.value("derived.free_memory_below_utilization") is True
    assert "GPU 1" in facts.get("derived.free_memory_below_utilization").detail


def test_free_memory_uses_the_release_default_without_serve_line():
    # 75000 of 81559 MiB free (92.0 %): enough for 0.9 (up to 0.19.1), not for 0.92 (from
    # 0.20.0, vllm/config/cache.py CacheConfig.gpu_memory_utilization)
    facts = Facts()
    add_gpus(facts, 81559, [75000])
    compute_derived(facts)
    assert "derived.free_memory_below_utilization" not in facts
    assert facts.why_missing("derived.free_memory_below_utilization").startswith(
        "needs vllm.version: every GPU has at least total × 0.9 free"
    )
    # judged over the covered releases, each release's own default
    for release, below in (("0.19.1", False), ("0.20.0", True)):
        judged = facts_for_release(facts, release)
        assert judged.value("derived.free_memory_below_utilization") is below
    for version, below in (("0.19.1", False), ("0.20.0", True), ("0.23.1rc1.dev20", True)):
        facts.set("vllm.version", version, Source.MACHINE)
        compute_derived(facts)
        assert facts.value("derived.free_memory_below_utilization") is below
        detail = facts.get("derived.free_memory_below_utilization").detail
        assert f"vLLM {version}'s default" in detail
    # both defaults agree: decided without the version
    idle = Facts()
    add_gpus(idle, 81559, [81000])
    compute_derived(idle)
    assert idle.value("derived.free_memory_below_utilization") is False


def test_driver_older_than_torch_cuda():
    facts = Facts()
    facts.set("driver.cuda_version", "12.8", Source.NVML)
    facts.set("torch.cuda_version", "13.0", Source.MACHINE)
    compute_derived(facts)
    assert facts.value("derived.driver_supports_torch_cuda") is False
    facts.set("driver.cuda_version", "12.10", Source.NVML)
    facts.set("torch.cuda_version", "12.9", Source.MACHINE)
    compute_derived(facts)
    assert facts.value("derived.driver_supports_torch_cuda") is True  # 12.10 > 12.9


def test_missing_inputs_are_named():
    facts = Facts()
    facts.mark_missing("gpu", "NVML library not found")
    facts.mark_missing("serve", "pass the serve line")
    facts.mark_missing("model", "no model given")
    compute_derived(facts)
    assert not any(p.startswith("derived.") for p in facts.values)
    assert facts.why_missing("derived.tp_divides_heads").startswith(
        "needs model.num_attention_heads: no model given"
    )
    assert facts.why_missing("derived.free_memory_below_utilization").startswith(
        "needs gpu.memory_total_mib: NVML library not found"
    )
    assert facts.why_missing("derived.driver_supports_torch_cuda").startswith(
        "needs driver.cuda_version"
    )


def test_divisibility_needs_the_serve_line():
    facts = model_facts("Qwen3-32B")
    facts.mark_missing("serve", "pass the serve line")
    compute_derived(facts)
    assert "serve.tensor_parallel_size" in facts.why_missing("derived.tp_divides_heads")


def test_recomputing_replaces_old_values():
    facts = model_facts("Qwen3-32B", tensor_parallel_size=2)
    compute_derived(facts)
    assert facts.value("derived.tp_divides_heads") is True
    facts.set("serve.tensor_parallel_size", 3, Source.USER)
    compute_derived(facts)
    assert facts.value("derived.tp_divides_heads") is False


def test_expert_parallel_size():
    facts = model_facts(
        "Qwen3-30B-A3B", tensor_parallel_size=2, data_parallel_size=3, enable_expert_parallel=True
    )
    compute_derived(facts)
    assert facts.value("derived.expert_parallel_size") == 6
    facts.set("serve.enable_expert_parallel", False, Source.SERVE)
    compute_derived(facts)
    assert facts.value("derived.expert_parallel_size") == 1
    facts = model_facts("Qwen3-30B-A3B")
    facts.mark_missing("serve", "pass the serve line")
    compute_derived(facts)
    assert "serve.enable_expert_parallel" in facts.why_missing("derived.expert_parallel_size")


@pytest.mark.parametrize(
    "model, requested, above",
    [
        ("Llama-3.1-8B-Instruct", 131072, False),  # llama3 RoPE type: not scaled further
        ("Llama-3.1-8B-Instruct", 262144, True),
        ("Qwen3-32B", 40960, False),
        ("Qwen3-32B", 65536, True),
        ("DeepSeek-V3.2", 163840, False),  # YaRN: 4096 × 40
        ("gpt-oss-120b", 131073, True),  # YaRN: 4096 × 32
    ],
)
def test_max_model_len_above_model(model, requested, above):
    facts = model_facts(model, max_model_len=requested)
    compute_derived(facts)
    assert facts.value("derived.max_model_len_above_model") is above


def test_hf_overrides_rope_scaling_raise_the_limit():
    facts = model_facts(
        "Qwen3-32B",
        max_model_len=131072,
        hf_overrides={
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            }
        },
    )
    compute_derived(facts)
    assert facts.value("derived.max_model_len_above_model") is False
    assert "yarn factor 4" in facts.get("derived.max_model_len_above_model").detail


def test_max_model_len_without_config_file_uses_the_fact():
    facts = Facts()
    facts.set("model.max_position_embeddings", 4096, Source.REPORT)
    facts.set("serve.max_model_len", 8192, Source.SERVE)
    compute_derived(facts)
    assert facts.value("derived.max_model_len_above_model") is True
    facts = Facts()
    facts.mark_missing("model", "model config not found")
    facts.set("serve.max_model_len", 8192, Source.SERVE)
    compute_derived(facts)
    assert facts.why_missing("derived.max_model_len_above_model").startswith(
        "needs model.max_position_embeddings: model config not found"
    )


def test_free_memory_that_covers_the_request_by_less_than_a_cuda_context_is_tight():
    # 0.9 × 81559 = 73403 MiB; vLLM checks after creating its CUDA context (0.51 GiB measured
    # by the memory probe on an H100), which the doctor's NVML reading does not hold yet
    facts = model_facts("Llama-3.1-8B-Instruct", gpu_memory_utilization=0.9)
    add_gpus(facts, 81559, [73600])
    compute_derived(facts)
    assert facts.value("derived.free_memory_below_utilization") is False
    assert facts.value("derived.free_memory_tight") is True
    assert "CUDA context (518 MiB" in facts.get("derived.free_memory_tight").detail
    facts = model_facts("Llama-3.1-8B-Instruct", gpu_memory_utilization=0.9)
    add_gpus(facts, 81559, [74000])
    compute_derived(facts)
    assert facts.value("derived.free_memory_tight") is False


def test_an_assumed_idle_gpu_decides_only_that_free_memory_suffices():
    from vllm_doctor.facts.derived import ASSUMED_IDLE
    from vllm_doctor.facts.hardware import infer_gpu_memory

    def named_h100(utilization: float) -> Facts:
        facts = model_facts("Llama-3.1-8B-Instruct", gpu_memory_utilization=utilization)
        facts.set("gpu.names", ["NVIDIA H100 80GB HBM3"], Source.USER)
        infer_gpu_memory(facts)  # 81920 MiB total, free assumed = total
        compute_derived(facts)
        return facts

    # 0.995 × 81920 leaves 410 MiB, within a CUDA context: not decided on an assumed figure
    facts = named_h100(0.995)
    assert "derived.free_memory_tight" not in facts
    assert facts.why_missing("derived.free_memory_tight") == (
        f"needs gpu.memory_free_mib: {ASSUMED_IDLE}"
    )
    below = facts.get("derived.free_memory_below_utilization")
    assert below.value is False and "(assumed idle)" in below.detail
    # the same figure read from NVML decides
    facts.set("gpu.memory_free_mib", 81920, Source.NVML)
    compute_derived(facts)
    assert facts.value("derived.free_memory_tight") is True
    # room beyond a context even on the assumed figure: decided "no", said to be assumed
    facts = named_h100(0.9)
    tight = facts.get("derived.free_memory_tight")
    assert tight.value is False and "(assumed idle)" in tight.detail
