"""The GPU table: real device names, as NVML, torch and collect-env print them, resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllm_doctor.facts.report import CAPABILITY_DETAIL, parse_report
from vllm_doctor.knowledge import gpus

REPORTS = Path(__file__).parent / "fixtures" / "reports"
ROCM_PLATFORM = Path("/work/wheels/src/0.33.0/vllm/platforms/rocm.py")

# (name as a real device prints it, capability or gfx, memory GiB or None when the name and
# the family leave it open)
NVIDIA_NAMES = [
    ("Tesla V100S-PCIE-32GB", 70, 32),
    ("Tesla V100-SXM2-16GB", 70, 16),
    ("Tesla V100-SXM2-32GB", 70, 32),
    ("Tesla V100-PCIE-32GB", 70, 32),
    ("Tesla V100-SXM3-32GB", 70, 32),
    ("Tesla P100-PCIE-16GB", 60, 16),
    ("Tesla P100-PCIE-12GB", 60, 12),
    ("Tesla P100-SXM2-16GB", 60, 16),
    ("Tesla P40", 61, 24),
    ("Tesla P4", 61, 8),
    ("Tesla T4", 75, 16),
    ("NVIDIA A100-SXM4-40GB", 80, 40),
    ("NVIDIA A100-SXM4-80GB", 80, 80),
    ("NVIDIA A100-PCIE-40GB", 80, 40),
    ("NVIDIA A100 80GB PCIe", 80, 80),
    ("NVIDIA A100-SXM4-80GB MIG 1g.10gb", 80, 80),
    ("NVIDIA A800-SXM4-80GB", 80, 80),
    ("NVIDIA A800 80GB PCIe", 80, 80),
    ("NVIDIA A30", 80, 24),
    ("NVIDIA A10", 86, 24),
    ("NVIDIA A10G", 86, 24),
    ("NVIDIA A40", 86, 48),
    ("NVIDIA A16", 86, 16),
    ("NVIDIA A2", 86, 16),
    ("NVIDIA H100 80GB HBM3", 90, 80),
    ("NVIDIA H100 PCIe", 90, 80),  # 80 GB HBM2e only (product brief PB-11133-001)
    ("NVIDIA H100 NVL", 90, 94),
    ("NVIDIA H800", 90, 80),
    ("NVIDIA H20", 90, None),
    ("NVIDIA H200", 90, 141),
    ("NVIDIA H200 NVL", 90, 141),
    ("NVIDIA GH200 480GB", 90, None),
    ("NVIDIA GH200 144G HBM3e", 90, None),
    ("NVIDIA B200", 100, None),
    ("NVIDIA GB200", 100, 186),
    ("NVIDIA B300 SXM6 AC", 103, 288),
    ("NVIDIA GB300", 103, 288),
    ("NVIDIA GB10", 121, 128),
    ("NVIDIA L40S", 89, 48),
    ("NVIDIA L40", 89, 48),
    ("NVIDIA L4", 89, 24),
    ("NVIDIA L20", 89, 48),
    ("NVIDIA GeForce RTX 4090", 89, 24),
    ("NVIDIA GeForce RTX 4090 D", 89, 24),
    ("NVIDIA GeForce RTX 4080 SUPER", 89, 16),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", 89, 16),
    ("NVIDIA GeForce RTX 4060 Ti", 89, None),
    ("NVIDIA GeForce RTX 3090", 86, 24),
    ("NVIDIA GeForce RTX 3090 Ti", 86, 24),
    ("NVIDIA GeForce RTX 3080 Ti", 86, 12),
    ("NVIDIA GeForce RTX 3060", 86, None),
    ("NVIDIA GeForce RTX 2080 Ti", 75, None),
    ("NVIDIA GeForce GTX 1080 Ti", 61, None),
    ("NVIDIA GeForce GTX 1660 SUPER", 75, None),
    ("NVIDIA TITAN RTX", 75, 24),
    ("NVIDIA TITAN V", 70, None),
    ("NVIDIA TITAN Xp", 61, 12),
    ("Quadro RTX 8000", 75, 48),
    ("Quadro RTX 6000", 75, 24),
    ("Quadro GV100", 70, 32),
    ("Quadro P6000", 61, None),
    ("NVIDIA RTX A6000", 86, 48),
    ("NVIDIA RTX A5000", 86, 24),
    ("NVIDIA RTX A4000", 86, 16),
    ("NVIDIA RTX 6000 Ada Generation", 89, 48),
    ("NVIDIA RTX 4000 SFF Ada Generation", 89, 20),
    ("NVIDIA RTX 2000 Ada Generation", 89, 16),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 120, 96),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 120, 96),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 120, 96),
    ("NVIDIA GeForce RTX 5090", 120, 32),
    ("NVIDIA GeForce RTX 5060 Ti", 120, None),
    ("NVIDIA GeForce RTX 5070 Ti", 120, 16),
    ("NVIDIA Jetson AGX Orin", 87, None),
    ("Orin", 87, None),
    ("NVIDIA Thor", 110, None),
    ("Xavier", 72, None),
    ("NVIDIA Tegra X2", 62, None),
    ("Tesla K80", 37, 24),
]
AMD_NAMES = [
    ("AMD Instinct MI300X", "gfx942", 192),
    ("AMD_Instinct_MI300X", "gfx942", 192),
    ("AMD Instinct MI300A", "gfx942", 128),
    ("AMD Instinct MI308X", "gfx942", 192),
    ("AMD Instinct MI325X", "gfx942", 256),
    ("AMD Instinct MI250X/MI250", "gfx90a", 128),
    ("AMD Instinct MI210", "gfx90a", 64),
    ("AMD Instinct MI355X", "gfx950", 288),
    ("AMD Radeon RX 7900 XTX", "gfx1100", 24),
    ("AMD_Radeon_RX7900XTX", "gfx1100", 24),
    ("AMD Radeon PRO W7900", "gfx1100", 48),
    ("AMD Radeon RX 7800 XT", "gfx1101", None),
    ("AMD_Radeon_8060S", "gfx1151", None),
    ("AMD_Radeon_890M", "gfx1150", None),
    ("AMD Radeon RX 9070 XT", "gfx1201", 16),
    ("AMD_Radeon_R9700", "gfx1201", 32),
    ("AMD Radeon AI PRO R9700", "gfx1201", 32),
    ("AMD Radeon RX 9060 XT", "gfx1200", None),
]


@pytest.mark.parametrize("name, capability, memory", NVIDIA_NAMES)
def test_nvidia_names_resolve(name, capability, memory):
    match = gpus.lookup(name)
    assert match is not None and match.family.vendor == "nvidia"
    assert match.capability == capability and match.gfx is None
    assert match.memory_gib == memory


@pytest.mark.parametrize("name, gfx, memory", AMD_NAMES)
def test_amd_names_resolve(name, gfx, memory):
    match = gpus.lookup(name)
    assert match is not None and match.family.vendor == "amd"
    assert match.gfx == gfx and match.capability is None and match.memory_gib == memory


@pytest.mark.parametrize("name", ["Zorblax 9000", "NVIDIA Graphics Device", "cpu", ""])
def test_unknown_names_stay_unknown(name):
    assert gpus.lookup(name) is None


def test_every_entry_is_sourced_and_valid():
    data = json.loads(gpus.DATA.read_text(encoding="utf-8"))
    for entry in data["families"]:
        re.compile(entry["match"])
        assert entry["source"].startswith("https://"), entry
        assert entry["vendor"] in ("nvidia", "amd")
        assert entry["segment"] in ("datacenter", "workstation", "consumer", "embedded")
        if entry["vendor"] == "nvidia":
            assert isinstance(entry["capability"], int) and 30 <= entry["capability"] <= 130
        else:
            assert entry["gfx"] in data["amd_targets"], entry
    # each NVIDIA architecture since Pascal, each segment, is in it
    archs = {(e["arch"], e["segment"]) for e in data["families"] if e["vendor"] == "nvidia"}
    for arch in ("Pascal", "Volta", "Ampere", "Blackwell"):  # TX2, Xavier, Orin, Thor
        assert (arch, "embedded") in archs, arch
    for arch in ("Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"):
        assert (arch, "datacenter") in archs, arch
    for arch in ("Pascal", "Turing", "Ampere", "Ada Lovelace", "Blackwell"):
        assert (arch, "workstation") in archs and (arch, "consumer") in archs, arch


# vLLM's checks of gfx targets in vllm/platforms/rocm.py of 0.33.0, committed so that the
# comparison runs everywhere (tests/fixtures/vllm-source); where the wheels are unpacked the
# fixture is compared with the release's file
ROCM_FIXTURE = Path(__file__).parent / "fixtures" / "vllm-source" / "rocm-gfx-lines-0.33.0.json"
_GFX_QUOTED = re.compile(r'"(gfx(?:9[0-9a-f]{2}|1[0-9]{3}))"')
_GFX_COMMENT = re.compile(r"# (gfx1[0-9]{3})")


def _gfx_lines(text: str) -> dict[str, str]:
    """Line number → stripped text of each line of rocm.py that names a gfx target."""
    return {
        str(number): line.strip()
        for number, line in enumerate(text.splitlines(), 1)
        if _GFX_QUOTED.search(line) or _GFX_COMMENT.search(line)
    }


def test_amd_targets_are_those_vllm_checks_for():
    fixture = json.loads(ROCM_FIXTURE.read_text(encoding="utf-8"))
    assert (fixture["release"], fixture["path"]) == ("0.33.0", "vllm/platforms/rocm.py")
    source = "\n".join(fixture["lines"].values())
    checked = set(_GFX_QUOTED.findall(source)) | set(_GFX_COMMENT.findall(source))
    assert {"gfx942", "gfx950", "gfx1201", "gfx1151"} <= checked
    assert checked <= set(gpus.amd_targets()), checked - set(gpus.amd_targets())
    # every target the table lists has at least one product in it, gfx1250 aside (vLLM
    # checks for it, no product name is stated in its source)
    listed = {e["gfx"] for e in json.loads(gpus.DATA.read_text())["families"] if "gfx" in e}
    assert set(gpus.amd_targets()) - listed <= {"gfx1250"}


@pytest.mark.skipif(not ROCM_PLATFORM.is_file(), reason="needs the unpacked vLLM wheels")
def test_the_rocm_fixture_is_the_release_file():
    fixture = json.loads(ROCM_FIXTURE.read_text(encoding="utf-8"))
    assert _gfx_lines(ROCM_PLATFORM.read_text(encoding="utf-8")) == fixture["lines"]


@pytest.mark.parametrize(
    "report, capabilities",
    [
        ("a100x4_markdown_wrapped.md", [80] * 4),
        ("h100x8_nvlink_nightly.txt", [90] * 8),
        ("rtx5060ti_x2_pcie.txt", [120, 120]),
        ("t4_old_layout.txt", [75]),
    ],
)
def test_real_reports_resolve_through_the_table(report, capabilities):
    facts = parse_report((REPORTS / report).read_bytes(), report)
    assert facts.value("gpu.capabilities") == capabilities
    fact = facts.get("gpu.min_capability")
    assert fact.inferred and "GPU table (knowledge/data/gpus.json)" in fact.detail
    for device in facts.value("gpu.devices"):
        assert device["family"] and device["capability_source"] == CAPABILITY_DETAIL


def test_rocm_report_names_the_target_and_no_cuda_capability():
    facts = parse_report((REPORTS / "rocm_mi300x.txt").read_bytes(), "rocm_mi300x.txt")
    device = facts.value("gpu.devices")[0]
    assert device["arch"] == "gfx942" and device["family"] == "Instinct MI300X"
    assert device["memory_gib_nominal"] == 192
    assert "gpu.min_capability" not in facts and facts.why_missing("gpu.min_capability")


def test_v100s_report_decides_bfloat16(tmp_path):
    # The case: a report's V100S had no known capability, so --dtype bfloat16 on it
    # stayed undecided. Through the table it is Volta (7.0): HW003 applies.
    text = (
        (REPORTS / "t4_old_layout.txt")
        .read_text(encoding="utf-8")
        .replace("Tesla T4", "Tesla V100S-PCIE-32GB")
    )
    facts = parse_report(text, "v100s.txt")
    assert facts.value("gpu.min_capability") == 70
    from vllm_doctor.engine.evaluate import APPLIES, evaluate_rule
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.facts.model import Source
    from vllm_doctor.serve_args import parse_serve_argv

    parse_serve_argv(["vllm", "serve", "org/m", "--dtype", "bfloat16"]).to_facts(
        facts, Source.SERVE, {}
    )
    hw003 = next(
        r for r in load_rules([Path(__file__).resolve().parents[1] / "rules"]) if r.code == "HW003"
    )
    assert evaluate_rule(hw003, facts).verdict == APPLIES


@pytest.mark.parametrize(
    ("name", "machine"),
    [
        ("NVIDIA GB10", "aarch64"),
        ("NVIDIA GH200 480GB", "aarch64"),
        ("NVIDIA Thor", "aarch64"),
        ("Orin (nvgpu)", "aarch64"),
        ("NVIDIA H100 80GB HBM3", None),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", None),
    ],
)
def test_machine_of_gpus_sold_in_one_kind_of_system(name, machine):
    """Grace superchips, DGX Spark and Jetson modules are aarch64 systems; a PCIe or SXM GPU
    goes into hosts of either kind, so the table says nothing."""
    found = gpus.lookup(name)
    assert found is not None
    assert found.family.machine == machine
