"""The `vllm collect-env` report parser: both layouts, wrappers, GPUs, links, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.report import (
    CAPABILITY_DETAIL,
    base_release,
    capability_from_name,
    parse_report,
)
from vllm_doctor.facts.schema import is_known_path

FIXTURES = Path(__file__).parent / "fixtures" / "reports"


def load(name: str) -> Facts:
    path = FIXTURES / name
    return parse_report(path.read_text(encoding="utf-8"), str(path))


# expected facts per fixture (only the interesting ones; every key must match exactly)
EXPECTED = {
    "h100x8_nvlink_nightly.txt": {
        "vllm.version": "0.29.1rc1.dev350+gd5f0a6e82",
        "vllm.git_sha": "d5f0a6e82",
        "vllm.is_dev": True,
        "vllm.base_release": "0.29.0",
        "torch.version": "2.13.0+cu130",
        "torch.cuda_version": "13.0",
        "driver.version": "580.95.05",
        "gpu.count": 8,
        "gpu.min_capability": 90,
        "gpu.max_capability": 90,
        "topology.all_nvlink": True,
        "topology.worst_link": "NV18",
        "packages.torch": "2.13.0+cu130",
        "packages.flashinfer-python": "0.6.18",
        "packages.nvidia-nccl-cu13": "2.28.3",
        "env.NCCL_CUMEM_ENABLE": "0",
        "gpu.mig_enabled": False,
    },
    "rtx5060ti_x2_pcie.txt": {
        "vllm.version": "0.23.1rc1.dev20+g0d8097964",
        "vllm.git_sha": "0d8097964",
        "vllm.base_release": "0.23.0",
        "vllm.is_dev": True,
        "torch.version": "2.11.0+cu130",
        "torch.cuda_version": "13.0",
        "gpu.count": 2,
        "gpu.names": ["NVIDIA GeForce RTX 5060 Ti", "NVIDIA GeForce RTX 5060 Ti"],
        "gpu.min_capability": 120,
        "topology.all_nvlink": False,
        "topology.worst_link": "PHB",
        "topology.links": [{"a": 0, "b": 1, "link": "PHB"}],
        "env.VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "env.NCCL_P2P_DISABLE": "1",
    },
    "t4_old_layout.txt": {
        "vllm.version": "0.6.3.post1",
        "vllm.is_dev": False,
        "vllm.base_release": "0.6.3.post1",
        "torch.version": "2.4.0+cu121",
        "torch.cuda_version": "12.1",
        "driver.version": "535.183.01",
        "gpu.count": 1,
        "gpu.names": ["Tesla T4"],
        "gpu.capabilities": [75],
        "topology.links": [],
        "packages.torch": "2.4.0",
        "packages.nvidia-cublas-cu12": "12.1.3.1",
        "env.CUDA_VISIBLE_DEVICES": "0",
        "env.HF_TOKEN": "<redacted>",
    },
    "rocm_mi300x.txt": {
        "vllm.version": "0.11.1.dev0+gb8b302cde.d20251030",
        "vllm.git_sha": "b8b302cde",
        "vllm.build_date": "20251030",
        "vllm.base_release": "0.11.0",
        "torch.version": "2.9.0a0+git1c57644",
        "gpu.names": ["AMD Instinct MI300X"],
        "gpu.count": 4,
        "topology.worst_link": "XGMI",
        "topology.all_nvlink": False,
        "env.VLLM_ROCM_USE_AITER": "1",
    },
    "a100x4_markdown_wrapped.md": {
        "vllm.version": "0.11.2",
        "vllm.is_dev": False,
        "vllm.base_release": "0.11.2",
        "vllm.cuda_archs": "8.0 8.6 8.9 9.0 10.0 12.0+PTX",
        "torch.cuda_version": "12.8",
        "driver.version": "570.133.20",
        "driver.cuda_version": "12.8",
        "gpu.count": 4,
        "gpu.min_capability": 80,
        "topology.all_nvlink": False,
        "topology.worst_link": "SYS",
        "env.VLLM_ATTENTION_BACKEND": "FLASHINFER",
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_facts(name):
    facts = load(name)
    for path, value in EXPECTED[name].items():
        assert facts.value(path) == value, path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_fact_is_a_known_path_from_the_report(name):
    facts = load(name)
    assert facts.values, "no facts"
    for path, fact in facts.values.items():
        assert is_known_path(path), path
        # the report's own lines, or what the GPU table infers from its GPU names
        assert fact.source == Source.REPORT or (
            fact.inferred and path.startswith("gpu.") and "GPU table" in fact.detail
        ), path
        assert fact.detail, path
    for path in facts.missing:
        assert is_known_path(path) or "." not in path, path
    json.loads(facts.to_json())  # serialisable


def test_topology_pairs_of_the_a100_box():
    facts = load("a100x4_markdown_wrapped.md")
    links = {(x["a"], x["b"]): x["link"] for x in facts.value("topology.links")}
    assert links == {
        (0, 1): "NV12",
        (0, 2): "SYS",
        (0, 3): "SYS",
        (1, 2): "SYS",
        (1, 3): "SYS",
        (2, 3): "NODE",
    }


def test_eight_gpu_matrix_has_all_pairs():
    links = load("h100x8_nvlink_nightly.txt").value("topology.links")
    assert len(links) == 28
    assert {x["link"] for x in links} == {"NV18"}


def test_capability_is_marked_as_inferred():
    facts = load("h100x8_nvlink_nightly.txt")
    fact = facts.get("gpu.min_capability")
    assert fact.inferred and fact.detail == (
        "GPU table (knowledge/data/gpus.json): NVIDIA H100 80GB HBM3"
    )
    device = facts.value("gpu.devices")[3]
    assert device == {
        "index": 3,
        "name": "NVIDIA H100 80GB HBM3",
        "capability": 90,
        "capability_source": CAPABILITY_DETAIL,
        "family": "H100",
        "memory_gib_nominal": 80,
    }


def test_rocm_report_has_no_capability_and_says_why():
    facts = load("rocm_mi300x.txt")
    assert "gpu.min_capability" not in facts
    assert "gfx942" in facts.why_missing("gpu.min_capability")
    assert "ROCm" in facts.why_missing("torch.cuda_version")
    assert facts.why_missing("driver.version")


def test_cuda_archs_not_set_is_missing_with_reason():
    facts = load("rtx5060ti_x2_pcie.txt")
    assert "vllm.cuda_archs" not in facts
    assert "Not Set" in facts.why_missing("vllm.cuda_archs")


def test_single_gpu_has_no_link_facts():
    facts = load("t4_old_layout.txt")
    assert facts.value("topology.links") == []
    assert "topology.worst_link" not in facts
    assert facts.why_missing("topology.all_nvlink")


def test_wrapped_report_equals_bare_report():
    bare = (FIXTURES / "rtx5060ti_x2_pcie.txt").read_text()
    wrapped = (
        "### Your current environment\n\n<details>\n<summary>The output of "
        "<code>python collect_env.py</code></summary>\n\n```text\n"
        + bare
        + "\n```\n\n</details>\n\n### 🐛 Describe the bug\nIt crashes: see below.\n"
    )
    quoted = "\n".join("> " + line for line in bare.splitlines())
    base = parse_report(bare, "bare").values
    for variant in (wrapped, quoted, bare.replace("\n", "\r\n")):
        assert parse_report(variant, "variant").values == base


def test_topology_with_spaces_instead_of_tabs():
    text = (FIXTURES / "h100x8_nvlink_nightly.txt").read_text().replace("\t", "    ")
    facts = parse_report(text, "spaces")
    assert len(facts.value("topology.links")) == 28
    assert facts.value("topology.all_nvlink") is True


def test_bytes_input_is_decoded():
    data = (FIXTURES / "t4_old_layout.txt").read_bytes()
    assert parse_report(data, "bytes").value("gpu.count") == 1


def test_mig_and_unknown_gpu_names():
    text = """PyTorch version: 2.6.0+cu124
CUDA used to build PyTorch: 12.4
GPU models and configuration:
GPU 0: NVIDIA A100-SXM4-80GB
  MIG 3g.40gb     Device  0:
GPU 1: NVIDIA Zorblax 9000

Nvidia driver version: 550.54.15
vLLM Version: 0.8.5
"""
    facts = parse_report(text, "mig")
    assert facts.value("gpu.count") == 2
    assert facts.value("gpu.mig_enabled") is True
    assert "Zorblax" in facts.why_missing("gpu.min_capability")
    assert facts.value("gpu.devices")[0]["capability"] == 80
    assert "capability" not in facts.value("gpu.devices")[1]


def test_dev_version_na_is_missing():
    facts = parse_report("PyTorch version: 2.6.0\nvLLM Version: N/A (dev)\n", "dev")
    assert "vllm.version" not in facts
    assert "N/A" in facts.why_missing("vllm.version")


def test_local_build_with_date():
    text = (
        "vLLM Version                 : 0.25.2.dev0+g752a3a504.d20260720 "
        "(git sha: 752a3a504, date: 20260720)\nPyTorch version              : 2.11.0\n"
    )
    facts = parse_report(text, "local")
    assert facts.value("vllm.git_sha") == "752a3a504"
    assert facts.value("vllm.build_date") == "20260720"
    assert facts.value("vllm.base_release") == "0.25.1"
    assert facts.value("vllm.is_dev") is True


def test_smi_banner_gives_driver_cuda():
    text = (
        "PyTorch version: 2.6.0+cu124\nNvidia driver version: 570.86.10\n"
        "| NVIDIA-SMI 570.86.10   Driver Version: 570.86.10   CUDA Version: 12.8  |\n"
    )
    assert parse_report(text, "smi").value("driver.cuda_version") == "12.8"


def test_conda_lines_fill_packages_pip_does_not_list():
    text = (
        "PyTorch version: 2.6.0\nVersions of relevant libraries:\n[pip3] torch==2.6.0\n"
        "[conda] torch                     2.5.0     pypi_0    pypi\n"
        "[conda] numpy                     1.26.4    pypi_0    pypi\n"
    )
    facts = parse_report(text, "conda")
    assert facts.value("packages.torch") == "2.6.0"
    assert facts.value("packages.numpy") == "1.26.4"


def test_package_names_are_canonical():
    text = (
        "PyTorch version: 2.6.0\n[pip3] Flashinfer_Python==0.2.5\n[pip3] nvidia.nccl-cu12==2.21.5\n"
    )
    facts = parse_report(text, "names")
    assert facts.value("packages.flashinfer-python") == "0.2.5"
    assert facts.value("packages.nvidia-nccl-cu12") == "2.21.5"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n  ",
        "hello\x00world",
        "INFO 05-12 10:00:00 [api_server.py:1] vLLM API server version 0.9.1\nTraceback ...\n",
        "Architecture: x86_64\nCPU(s): 32\nModel name: AMD EPYC\n",
        "# just a README\n\nNothing to see: here.\n",
    ],
)
def test_not_a_report(text):
    with pytest.raises(InputError) as err:
        parse_report(text, "input.txt")
    assert err.value.source == "input.txt"
    assert "does not look like a `vllm collect-env` report" in err.value.problem


def test_undecodable_bytes():
    with pytest.raises(InputError, match="not UTF-8"):
        parse_report(b"\xff\xfe\xfa PyTorch version: 2.6", "blob")
    with pytest.raises(InputError, match="NUL"):
        parse_report(b"PyTorch version: 2.6\x00\x00", "blob")


@pytest.mark.parametrize(
    "name, capability",
    [
        ("NVIDIA H100 80GB HBM3", 90),
        ("NVIDIA H100 PCIe", 90),
        ("NVIDIA H200", 90),
        ("NVIDIA H20", 90),
        ("NVIDIA H800", 90),
        ("NVIDIA GH200 480GB", 90),
        ("NVIDIA B200", 100),
        ("NVIDIA GB200", 100),
        ("NVIDIA B300 SXM6 AC", 103),
        ("NVIDIA GB300", 103),
        ("NVIDIA GB10", 121),
        ("NVIDIA A100-SXM4-80GB", 80),
        ("NVIDIA A100 80GB PCIe", 80),
        ("NVIDIA A800-SXM4-80GB", 80),
        ("NVIDIA A30", 80),
        ("NVIDIA A10", 86),
        ("NVIDIA A10G", 86),
        ("NVIDIA A40", 86),
        ("NVIDIA L4", 89),
        ("NVIDIA L40", 89),
        ("NVIDIA L40S", 89),
        ("NVIDIA L20", 89),
        ("NVIDIA GeForce RTX 3090", 86),
        ("NVIDIA GeForce RTX 4090", 89),
        ("NVIDIA GeForce RTX 5090", 120),
        ("NVIDIA GeForce RTX 5060 Ti", 120),
        ("NVIDIA RTX A6000", 86),
        ("NVIDIA RTX 6000 Ada Generation", 89),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 120),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 120),
        ("Quadro RTX 6000", 75),
        ("Tesla T4", 75),
        ("Tesla V100-SXM2-32GB", 70),
        ("Tesla P100-PCIE-16GB", 60),
        ("NVIDIA GeForce GTX 1080 Ti", 61),
        ("NVIDIA GeForce RTX 2080 Ti", 75),
        ("AMD Instinct MI300X", None),
        ("Zorblax", None),
    ],
)
def test_capability_table(name, capability):
    assert capability_from_name(name) == capability


@pytest.mark.parametrize(
    "version, base",
    [
        ("0.23.1rc1.dev20+g0d8097964", "0.23.0"),
        ("0.25.2.dev0+g752a3a504.d20260720", "0.25.1"),
        ("0.10.1.dev5", "0.10.0"),
        ("0.34.0.dev5+gabc1234", "0.33.0"),
        ("0.34.2.dev1", "0.34.1"),
        ("0.25.1", "0.25.1"),
        ("0.25.1+cu128", "0.25.1"),
        ("0.6.3.post1", "0.6.3.post1"),
        ("0.11.0rc2", "0.10.2"),
        ("not-a-version", None),
    ],
)
def test_base_release(version, base):
    assert base_release(version) == base


def test_cuda_visible_devices_limits_gpus_and_links():
    text = (FIXTURES / "h100x8_nvlink_nightly.txt").read_text()
    text = text.replace("NCCL_CUMEM_ENABLE=0", "CUDA_VISIBLE_DEVICES=5,2\nNCCL_CUMEM_ENABLE=0")
    facts = parse_report(text, "visible")
    assert facts.value("gpu.visible_devices") == "5,2"
    assert facts.value("gpu.count") == 2
    assert [d["index"] for d in facts.value("gpu.devices")] == [5, 2]
    assert facts.value("topology.links") == [{"a": 2, "b": 5, "link": "NV18"}]
    assert "CUDA_VISIBLE_DEVICES=5,2" in facts.get("gpu.count").detail


def test_cuda_visible_devices_by_uuid_keeps_the_list():
    text = (FIXTURES / "h100x8_nvlink_nightly.txt").read_text()
    text = text.replace("NCCL_CUMEM_ENABLE=0", "CUDA_VISIBLE_DEVICES=GPU-1a2b,GPU-3c4d")
    facts = parse_report(text, "uuid")
    assert facts.value("gpu.count") == 8
    assert any("not GPU indices" in note for note in facts.notes)


def test_no_visible_gpu():
    text = (
        (FIXTURES / "rtx5060ti_x2_pcie.txt")
        .read_text()
        .replace("CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=")
    )
    facts = parse_report(text, "none")
    assert facts.value("gpu.count") == 0
    assert facts.why_missing("gpu.min_capability") == "no GPU is visible"
