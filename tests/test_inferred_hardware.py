"""Hardware facts inferred from names (GPU table, NVIDIA's driver table) and the target
hardware of `--gpu/--gpus/--driver/--cuda`: marked inferred, never over a collected value,
and deciding "does not fit" only where every size the table allows agrees."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.engine.conditions import compile_condition, possible_versions_satisfy
from vllm_doctor.errors import InputError
from vllm_doctor.facts.hardware import (
    TargetHardware,
    apply_target_hardware,
    driver_cuda_version,
    infer_hardware,
    resolve_gpu,
)
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.memory.corpus import entry_facts
from vllm_doctor.memory.facts import compute_memory

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "vllm_doctor" / "examples"
LLAMA = EXAMPLES / "healthy-h100-llama" / "model"  # Llama 3.1 8B config + safetensors index
REPORTS = HERE / "fixtures" / "reports"


def doctor(*args: str):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    environ["HF_HUB_OFFLINE"] = "1"
    return doctor_run(*args, env=environ, timeout=120)


@pytest.mark.parametrize(
    "driver, cuda",
    [
        ("570.86.15", "12.8"),  # the example: nvidia-smi prints CUDA 12.8
        ("580.95.05", "13.0"),
        ("575.57.08", "12.9"),
        ("535.230.02", "12.2"),
        ("550.54.14", "12.4"),
        ("470.256.02", "11.4"),
    ],
)
def test_driver_to_cuda_follows_nvidias_table(driver, cuda):
    assert driver_cuda_version(driver)[0] == cuda


def test_driver_cuda_inferred_and_never_over_a_collected_one():
    facts = Facts.from_flat({"driver.version": "570.86.15"}, Source.REPORT)
    infer_hardware(facts)
    fact = facts.get("driver.cuda_version")
    assert fact.value == "12.8" and fact.inferred and "570.26" in fact.detail
    assert facts.to_dict()["facts"]["driver.cuda_version"]["inferred"] is True
    seen = Facts.from_flat(
        {"driver.version": "570.86.15", "driver.cuda_version": "12.9"}, Source.NVML
    )
    infer_hardware(seen)
    assert seen.get("driver.cuda_version").source == Source.NVML
    assert seen.value("driver.cuda_version") == "12.9"


def test_report_gpus_get_memory_from_the_gpu_table():
    from vllm_doctor.facts.report import parse_report

    facts = parse_report((REPORTS / "rtx5060ti_x2_pcie.txt").read_text(), "r")
    infer_hardware(facts)
    total = facts.get("gpu.memory_total_mib")
    # the RTX 5060 Ti ships with 8 or 16 GiB: the value is the smaller, both stay possible
    assert total.inferred and total.value == 8 * 1024 and total.possible == [8192, 16384]
    assert facts.get("gpu.min_capability").inferred
    assert facts.get("gpu.memory_free_mib").inferred  # assumed idle, said so


def test_does_not_fit_only_when_every_variant_agrees():
    # an A100 ships with 40 or 80 GiB: 8B weights and 300k tokens of context fit the 80 GiB
    # card only
    def verdict(gpu: str, max_model_len: int) -> Facts:
        facts = entry_facts(
            {
                "gpu": gpu,
                "vllm_version": "0.33.0",
                "serve": f"vllm serve m --max-model-len {max_model_len}",
                "config": "models/Llama-3.1-8B-Instruct",
            }
        )
        compute_memory(facts)
        return facts

    facts = verdict("NVIDIA A100", 300_000)
    assert "memory.kv_verdict" not in facts
    assert "the GPU's memory decides" in facts.why_missing("memory.kv_verdict")
    assert "does-not-fit or fits" in facts.why_missing("memory.kv_verdict")
    # the same request on a card whose name settles the size is decided
    assert verdict("NVIDIA A100-SXM4-40GB", 300_000).value("memory.kv_verdict") == "does-not-fit"
    assert verdict("NVIDIA A100-SXM4-80GB", 300_000).value("memory.kv_verdict") == "fits"
    # where both sizes agree, the verdict stands
    assert verdict("NVIDIA A100", 8192).value("memory.kv_verdict") == "fits"


def test_target_hardware_replaces_the_machines_gpus():
    facts = Facts.from_flat(
        {
            "gpu.count": 1,
            "gpu.names": ["Tesla T4"],
            "gpu.min_capability": 75,
            "gpu.memory_total_mib": 15360,
        },
        Source.NVML,
    )
    apply_target_hardware(facts, TargetHardware(gpu="H100 80GB", count=8, driver="570.86.15"))
    infer_hardware(facts)
    assert facts.value("gpu.count") == 8 and facts.value("gpu.min_capability") == 90
    assert facts.get("gpu.min_capability").inferred
    assert facts.value("gpu.memory_total_mib") == 80 * 1024
    assert facts.get("gpu.memory_total_mib").inferred
    assert facts.value("driver.cuda_version") == "12.8"
    assert "links between target GPUs" in facts.why_missing("topology.all_nvlink")
    # the same function serves other readers of a deployment (a manifest's GPU product)
    other = Facts()
    apply_target_hardware(other, TargetHardware(gpu="NVIDIA-L4", count=2, origin="manifest"))
    assert other.get("gpu.count").source == "manifest"


@pytest.mark.parametrize(
    "name, family",
    [
        ("H100 80GB", "H100"),
        ("RTX 3090", "GeForce RTX 3090 / 3090 Ti"),
        ("l40s", "L40S"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("MI300X", "Instinct MI300X"),
    ],
)
def test_gpu_names_resolve(name, family):
    assert resolve_gpu(name).family.name == family


def test_unknown_gpu_names_close_matches():
    with pytest.raises(InputError) as err:
        resolve_gpu("H1OO")
    assert "close matches" in str(err.value) and "H100" in str(err.value)
    result = doctor("check", "--gpu", "RTX 9999", "--", "vllm", "serve", "m")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--gpu" in result.stderr and "not a GPU the GPU table knows" in result.stderr


def test_possible_values_decide_only_when_they_agree():
    facts = Facts()
    facts.infer("torch.cuda_version", "12.4", "pins", possible=["11.8", "12.4", "12.6"])
    below = compile_condition({"fact": "torch.cuda_version", "version": "<12.8"})
    assert below.evaluate(facts).value is True
    cu12 = compile_condition({"fact": "torch.cuda_version", "version": "<12.5"})
    assert cu12.evaluate(facts).value is None
    assert possible_versions_satisfy("<5.21.0,>=5.16.1", ">=5.15.0") is True
    assert possible_versions_satisfy("<5.21.0,>=5.16.1", "<5.5.0") is False
    assert possible_versions_satisfy(">=5.5.3", ">=5.15.0") is None


def test_bundled_healthy_example_passes_strict():
    result = doctor("check", "--example", "healthy-h100-llama", "--strict", "--format", "json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    data = json.loads(result.stdout)
    # open only where a collect-env report cannot tell (the container's identity), never for
    # a fact the example's files could give
    assert all(m.get("unknowable") for f in data["undecided"] for m in f["missing"])
    assert all(f["missing"] for f in data["undecided"])
    memory = data["facts"]["facts"]["gpu.memory_total_mib"]
    assert memory["inferred"] is True and "GPU table" in memory["detail"]
    assert {"MEM001", "MEM002", "MEM003"} <= set(data["not_applicable"])


def test_mem001_decided_for_a_gpu_named_on_the_command_line():
    result = doctor(
        "check",
        "--gpu",
        "RTX 3090",
        "--vllm-version",
        "0.33.0",
        "--model-config",
        str(LLAMA),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "M",
        "--max-model-len",
        "262144",
    )
    data = json.loads(result.stdout)
    mem = next(f for f in data["findings"] if f["code"] == "MEM001")
    assert any("GPU table: RTX 3090" in e["source"] for e in mem["evidence"])
    assert result.returncode == 1


def test_mem001_from_a_config_alone_when_the_kv_cache_exceeds_the_gpu(tmp_path):
    # no checkpoint beside the config: the memory model counts the weights from config.json;
    # 262k tokens of Llama 3.1 8B KV (32 GiB) exceed what a 24 GiB card keeps after them
    config = tmp_path / "config.json"
    config.write_text((LLAMA / "config.json").read_text())
    result = doctor(
        "check",
        "--gpu",
        "RTX 3090",
        "--vllm-version",
        "0.33.0",
        "--model-config",
        str(config),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "M",
        "--max-model-len",
        "262144",
    )
    data = json.loads(result.stdout)
    mem = next(f for f in data["findings"] if f["code"] == "MEM001")
    fits = next(e for e in mem["evidence"] if e["fact"] == "memory.kv_verdict")
    assert fits["value"] == "does-not-fit" and "GPU table: RTX 3090" in fits["source"]
    weights = data["facts"]["facts"]["memory.weights_gib"]
    assert "parameters from config.json" in weights["detail"]
    # a short context on the same card fits
    short = doctor(
        "check",
        "--gpu",
        "RTX 3090",
        "--vllm-version",
        "0.33.0",
        "--model-config",
        str(config),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "M",
        "--max-model-len",
        "8192",
    )
    assert "MEM001" in json.loads(short.stdout)["not_applicable"]


def test_mem001_when_the_kv_cache_exceeds_the_gpu_whatever_the_weights(tmp_path):
    # no checkpoint and no head count to count the weights from (head_dim and the KV heads
    # still give the KV bytes): one 262k-token request (32 GiB) exceeds a 24 GiB card even
    # with no weights at all; MEM003 (no room after the weights) stays undecided
    cfg = json.loads((LLAMA / "config.json").read_text())
    del cfg["num_attention_heads"]
    cfg["head_dim"] = 128
    config = tmp_path / "config.json"
    config.write_text(json.dumps(cfg))
    result = doctor(
        "check",
        "--gpu",
        "RTX 3090",
        "--vllm-version",
        "0.33.0",
        "--model-config",
        str(config),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "M",
        "--max-model-len",
        "262144",
    )
    data = json.loads(result.stdout)
    mem = next(f for f in data["findings"] if f["code"] == "MEM001")
    fits = next(e for e in mem["evidence"] if e["fact"] == "memory.kv_verdict")
    assert "even with no weights" in fits["source"]
    assert "MEM003" in {f["code"] for f in data["undecided"]}
    short = doctor(
        "check",
        "--gpu",
        "RTX 3090",
        "--vllm-version",
        "0.33.0",
        "--model-config",
        str(config),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "M",
        "--max-model-len",
        "8192",
    )
    assert "MEM001" in {f["code"] for f in json.loads(short.stdout)["undecided"]}


def test_mem002_never_warns_from_a_gpu_assumed_idle():
    # 0.995 × 81920 MiB leaves 410 MiB, less than a CUDA context: an idle H100 named by --gpu
    # would be "tight", but its free memory is assumed, not read, so MEM002 is undecided
    result = doctor(
        "check",
        "--gpu",
        "NVIDIA H100 80GB HBM3",
        "--vllm-version",
        "0.33.0",
        "--model-config",
        str(LLAMA),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "M",
        "--max-model-len",
        "32768",
        "--gpu-memory-utilization",
        "0.995",
    )
    data = json.loads(result.stdout)
    assert not any(f["code"] == "MEM002" for f in data["findings"])
    mem = next(f for f in data["undecided"] if f["code"] == "MEM002")
    missing = {m["fact"]: m["reason"] for m in mem["missing"]}
    assert "assumed idle" in missing["derived.free_memory_tight"]
    assert "run on the GPU host" in missing["derived.free_memory_tight"]
    # the figure it rests on says it is assumed wherever it is shown
    facts = data["facts"]["facts"]
    free = facts["gpu.memory_free_mib"]
    assert free["inferred"] is True and "assumed idle" in free["detail"]
    below = facts["derived.free_memory_below_utilization"]
    assert below["value"] is False and "(assumed idle)" in below["detail"]
