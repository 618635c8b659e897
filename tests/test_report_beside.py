"""What a report shows beside collect-env's keys: the nvidia-smi table (driver, GPU names),
`pip show` blocks, and a kernel release pasted with it (uname, a WSL2 kernel)."""

from __future__ import annotations

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.platform import platform_from_report
from vllm_doctor.facts.report import parse_report

# torch's collect_env where nvidia-smi is not on PATH (a WSL2 distribution, a slim container),
# and the table the reporter pasted after it (the layout of vllm-project/vllm issue 34296)
NO_SMI = """\
PyTorch version: 2.9.0+cu128
Is debug build: False
CUDA used to build PyTorch: 12.8
Is CUDA available: True
GPU models and configuration: Could not collect
Nvidia driver version: Could not collect
"""
SMI = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 575.51.02              Driver Version: 576.02         CUDA Version: 12.9     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        On  |   00000000:65:00.0 Off |                  Off |
| 30%   35C    P8             17W /  450W |   40838MiB /  49140MiB |      1%      Default |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA GeForce RTX 4090        On  |   00000000:B3:00.0 Off |                  Off |
+-----------------------------------------+------------------------+----------------------+
"""


def test_driver_and_gpus_from_a_pasted_nvidia_smi_table():
    facts = parse_report(NO_SMI + "\n" + SMI, "report.txt")
    assert facts.value("driver.version") == "576.02"
    assert "nvidia-smi" in facts.get("driver.version").detail
    assert facts.value("driver.cuda_version") == "12.9"
    assert facts.value("gpu.names") == ["NVIDIA GeForce RTX 4090"] * 2
    assert facts.value("gpu.count") == 2
    assert facts.value("gpu.capabilities") == [89, 89]
    assert facts.get("gpu.names").source == Source.REPORT
    assert "nvidia-smi" in facts.get("gpu.names").detail


def test_the_reports_own_lines_win_over_the_table():
    own = NO_SMI.replace(
        "GPU models and configuration: Could not collect",
        "GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3",
    ).replace("Nvidia driver version: Could not collect", "Nvidia driver version: 580.95.05")
    facts = parse_report(own + "\n" + SMI, "report.txt")
    assert facts.value("driver.version") == "580.95.05"
    assert facts.value("gpu.names") == ["NVIDIA H100 80GB HBM3"]


def test_without_a_table_the_gpus_stay_missing():
    facts = parse_report(NO_SMI, "report.txt")
    assert "gpu.names" not in facts and facts.why_missing("gpu")
    assert "driver.version" not in facts and facts.why_missing("driver.version")


def test_nvidia_smi_l_uuid_is_not_part_of_the_name():
    text = NO_SMI.replace(
        "GPU models and configuration: Could not collect",
        "GPU models and configuration:\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0b3f1a2c-1111-2222-3333-444455556666)",
    )
    facts = parse_report(text, "report.txt")
    assert facts.value("gpu.names") == ["NVIDIA H100 80GB HBM3"]
    assert facts.value("gpu.capabilities") == [90]


def test_pip_show_blocks_give_package_versions():
    text = (
        NO_SMI
        + "\n$ pip show vllm\nName: vllm\nVersion: 0.11.0\nSummary: A high-throughput engine\n\nName: flashinfer-python\nVersion: 0.6.12\n"
    )
    facts = parse_report(text, "report.txt")
    assert facts.value("packages.vllm") == "0.11.0"
    assert facts.value("packages.flashinfer-python") == "0.6.12"
    assert "pip show" in facts.get("packages.flashinfer-python").detail


def kernel_of(text: str) -> Facts:
    facts = Facts()
    platform_from_report(facts, text, "report.txt")
    return facts


def test_wsl2_kernel_pasted_beside_the_report():
    facts = kernel_of(
        NO_SMI
        + "$ uname -a\nLinux DESKTOP-1 5.15.167.4-microsoft-standard-WSL2 #1 SMP Tue Nov 5 00:21:55 UTC 2024 x86_64 GNU/Linux\n"
    )
    assert facts.value("platform.kernel") == "5.15.167.4-microsoft-standard-WSL2"
    assert facts.value("platform.wsl") is True
    assert facts.get("platform.wsl").detail.startswith("pasted with the report")
    prose = kernel_of(NO_SMI + "kernel 6.6.87.2-microsoft-standard-WSL2 on Windows 11\n")
    assert prose.value("platform.wsl") is True


def test_native_kernel_from_uname_and_the_python_platform_line_first():
    native = kernel_of(
        NO_SMI + "Linux gpu-node 6.8.0-1040-nvidia #42-Ubuntu SMP PREEMPT_DYNAMIC x86_64\n"
    )
    assert native.value("platform.kernel") == "6.8.0-1040-nvidia"
    assert native.value("platform.wsl") is False
    both = kernel_of(
        "Python platform: Linux-6.8.0-60-generic-x86_64-with-glibc2.39\n"
        "Linux other 5.15.167.4-microsoft-standard-WSL2 #1 SMP x86_64\n"
    )
    assert both.value("platform.kernel") == "6.8.0-60-generic"
    assert both.value("platform.wsl") is False
    assert kernel_of(NO_SMI).why_missing("platform.wsl")


def test_torch_from_its_package_line_where_the_report_has_no_pytorch_version():
    text = (
        "vLLM Version                 : 0.19.1\n"
        "Nvidia driver version        : 570.86.10\n"
        "[pip3] torch==2.11.0+cu128\n"
        "[pip3] transformers==4.57.1\n"
    )
    facts = parse_report(text, "report.txt")
    assert facts.value("torch.version") == "2.11.0+cu128"
    assert facts.value("torch.cuda_version") == "12.8"
    assert facts.get("torch.version").detail == "[pip3] torch==2.11.0+cu128"
    # a bare version (PyPI's wheel) states no CUDA build
    bare = parse_report(text.replace("+cu128", ""), "report.txt")
    assert bare.value("torch.version") == "2.11.0" and "torch.cuda_version" not in bare
    # the report's own line wins
    own = parse_report("PyTorch version: 2.9.1+cu130\n" + text, "report.txt")
    assert own.value("torch.version") == "2.9.1+cu130"


def test_a_conda_torch_line_is_not_taken_for_a_pypi_wheel():
    base = "vLLM Version                 : 0.19.1\nNvidia driver version        : 570.86.10\n"
    for line in (
        "[conda] pytorch 2.11.0 py3.12_cuda12.8_cudnn9.1.0_0 pytorch",
        "torch                     2.11.0          cuda128_py312h1234abc_300    conda-forge",
    ):
        facts = parse_report(base + line + "\n", "report.txt")
        assert "torch.version" not in facts, line
