"""What a release takes as a unified-memory GPU's free memory: the uma_memory extractor on
small fake release trees (excerpts of the real MemorySnapshot.measure and platforms, release
named beside each) and the release.uma_free_memory fact from the shipped table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.hardware import TargetHardware

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from release_tree import release  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "test_uma_extractor", REPO / "tools" / "extractors" / "uma_memory.py"
)
uma = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uma)

# vllm/utils/mem_utils.py of 0.19.1 (trimmed)
MEM_UTILS_0191 = """
import psutil
import torch
class MemorySnapshot:
    def measure(self):
        device = self.device_
        self.free_memory, self.total_memory = current_platform.mem_get_info(device)
        shared_sysmem_device_mem_sms = ((8, 7), (11, 0), (12, 1))  # Orin, Thor, Spark
        if (
            current_platform.is_cuda()
            and current_platform.get_device_capability(device.index)
            in shared_sysmem_device_mem_sms
        ):
            self.free_memory = psutil.virtual_memory().available
"""
# vllm/utils/mem_utils.py and the platforms of 0.20.0 (trimmed)
MEM_UTILS_020 = """
import psutil
class MemorySnapshot:
    def measure(self):
        self.free_memory, self.total_memory = current_platform.mem_get_info(device)
        if current_platform.is_integrated_gpu(device.index):
            self.free_memory = psutil.virtual_memory().available
"""
INTERFACE_020 = """
class Platform:
    @classmethod
    def is_integrated_gpu(cls, device_id: int = 0) -> bool:
        return False
"""
CUDA_020 = """
class CudaPlatformBase(Platform):
    @classmethod
    def is_integrated_gpu(cls, device_id: int = 0) -> bool:
        return bool(torch.cuda.get_device_properties(device_id).is_integrated)
"""
ROCM_020 = """
class RocmPlatform(Platform):
    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return "AMD"
"""


def test_extractor_reads_the_capability_list(tmp_path):
    out = uma.extract(release(tmp_path, "0.19.1", {"utils/mem_utils.py": MEM_UTILS_0191}))
    assert out["cuda"] == {"when": "capability", "capabilities": [[8, 7], [11, 0], [12, 1]]}
    assert out["@snapshot"]["where"] == "vllm/utils/mem_utils.py:MemorySnapshot.measure"
    assert "rocm" not in out


def test_extractor_reads_the_platform_overrides(tmp_path):
    out = uma.extract(
        release(
            tmp_path,
            "0.20.0",
            {
                "utils/mem_utils.py": MEM_UTILS_020,
                "platforms/interface.py": INTERFACE_020,
                "platforms/cuda.py": CUDA_020,
                "platforms/rocm.py": ROCM_020,
            },
        )
    )
    assert out["cuda"]["when"] == "integrated"
    assert "is_integrated" in out["cuda"]["reads"]
    assert "rocm" not in out and "interface" not in out  # the base's False is no override
    assert out["@snapshot"]["test"] == "current_platform.is_integrated_gpu(device.index)"


def test_extractor_without_a_snapshot_says_so(tmp_path):
    source = release(tmp_path, "0.8.0", {"utils.py": "x = 1\n"})
    assert uma.extract(source) == {}
    assert source.problems


def facts_for(gpu: str, version: str | None):
    return collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.95",
            vllm_version=version,
            target=TargetHardware(gpu=gpu, count=1),
            probe_machine=False,
            environ={},
            offline=True,
        )
    )


@pytest.mark.parametrize(
    ("gpu", "version", "expected"),
    [
        ("Radeon 8060S", "0.22.0", "device_free"),  # RocmPlatform keeps the base's False
        ("Radeon 8060S", "0.19.1", "device_free"),
        ("GB10", "0.22.0", "os_available"),  # CudaPlatform.is_integrated_gpu
        ("GB10", "0.19.1", "os_available"),  # capability 12.1 in the fixed list
        ("GB10", "0.10.0", "device_free"),  # no unified-memory branch yet
    ],
)
def test_free_memory_on_unified_memory_gpus(gpu, version, expected):
    facts = facts_for(gpu, version)
    assert facts.value("release.uma_free_memory") == expected
    assert "MemorySnapshot.measure" in facts.get("release.uma_free_memory").detail


def test_dedicated_memory_gpu_has_none():
    facts = facts_for("H100", "0.22.0")
    assert "release.uma_free_memory" not in facts
    assert not facts.why_missing("release.uma_free_memory")


def test_release_not_known():
    facts = facts_for("Radeon 8060S", None)
    assert "release.uma_free_memory" not in facts
    assert facts.why_missing("release.uma_free_memory")
