"""torch's CUDA build against the GPU: the architectures each CUDA release compiles for
(knowledge/data/cuda_toolkits.json, tools/cuda_toolkits.py), the facts
``release.kernels.torch_toolkit*`` (facts/torch_toolkit.py), HW140/HW141, and torch's aarch64
images judged on an aarch64 host (facts/release_stack.py)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from doctor_forks import doctor_run
from judging import facts_with, verdict
from scripts import load_script

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED
from vllm_doctor.facts.torch_toolkit import toolkit_releases
from vllm_doctor.knowledge import stack

REPO = Path(__file__).resolve().parent.parent


def gpu(name: str, capability: int) -> dict:
    return {"gpu.names": [name], "gpu.capabilities": [capability], "gpu.min_capability": capability}


# -- the knowledge ------------------------------------------------------------------------------


def test_each_cuda_release_read_names_its_architectures_in_order():
    releases = toolkit_releases()
    assert {"11.8", "12.6", "12.8", "12.9", "13.0"} <= set(releases)
    for cuda, value in releases.items():
        archs = [int(a.removeprefix("compute_").rstrip("af")) for a in value["archs"]]
        assert archs == sorted(archs), cuda
        assert value["ptxas"].startswith(cuda + "."), (cuda, value["ptxas"])


def test_cuda_releases_add_and_drop_architectures_as_nvidia_documents():
    releases = toolkit_releases()

    def archs(cuda: str) -> set[str]:
        return set(releases[cuda]["archs"])

    assert "compute_120" not in archs("12.6") and "compute_120" in archs("12.8")
    assert "compute_121" not in archs("12.8") and "compute_121" in archs("12.9")
    assert "compute_110" not in archs("12.9") and "compute_110" in archs("13.0")
    assert "compute_70" in archs("12.9") and "compute_70" not in archs("13.0")
    assert min(archs("13.0"), key=lambda a: int(a[8:].rstrip("af"))) == "compute_75"


def test_reader_takes_the_release_line_and_the_virtual_architectures():
    cuda_toolkits = load_script(REPO / "tools" / "cuda_toolkits.py", "cuda_toolkits")
    binary = (
        b"\x00Cuda compilation tools, release 12.8, V12.8.93\x00"
        b"sm_20\x00compute_90a\x00compute_75\x00%s on compute_120\x00compute_100a\x00sm_37\x00"
    )
    found = cuda_toolkits.read_ptxas(binary)
    assert found == {
        "cuda": "12.8",
        "ptxas": "12.8.93",
        "archs": ["compute_75", "compute_90a", "compute_100a", "compute_120"],
    }
    assert cuda_toolkits.read_ptxas(b"no release line\x00compute_90\x00") is None


def test_reader_finds_the_ptxas_of_a_wheel(tmp_path):
    cuda_toolkits = load_script(REPO / "tools" / "cuda_toolkits.py", "cuda_toolkits")
    wheel = tmp_path / "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("nvidia/cu13/bin/nvcc.profile", "compute_50\x00")
        archive.writestr(
            "nvidia/cu13/bin/ptxas",
            b"Cuda compilation tools, release 13.0, V13.0.88\x00compute_110f\x00compute_75\x00",
        )
    reading = cuda_toolkits.read_wheel(wheel)
    assert reading["cuda"] == "13.0" and reading["archs"] == ["compute_75", "compute_110f"]
    table = cuda_toolkits.table({"13.0.88": reading})
    assert table["releases"]["13.0"]["wheel"] == wheel.name


def test_torch_aarch64_builds_read_are_cpu_builds_to_2_10_and_cuda_13_from_2_11():
    assert (stack.at("torch", "2.9.1")["cuda@aarch64"] or {}).get("version") is None
    keys = stack.at("torch", "2.11.0")
    assert keys["cuda@aarch64"]["version"] == "13.0"
    images = {
        i for g in keys["images:torch/lib/libtorch_cuda.so@aarch64"]["groups"] for i in g["images"]
    }
    assert "sm_110" in images and "sm_75" not in images  # Thor yes, Turing no


# -- the facts and rules ------------------------------------------------------------------------


def test_volta_under_cuda_13_has_no_image_at_all():
    facts = facts_with(
        {**gpu("Tesla V100-SXM2-32GB", 70), "torch.version": "2.9.0+cu130",
         "torch.cuda_version": "13.0"}
    )  # fmt: skip
    no_image = facts.value("release.kernels.torch_toolkit_no_image")
    assert len(no_image) == 1
    assert no_image[0].startswith(
        "sm_70: torch 2.9.0+cu130 is built with CUDA 13.0 (compute_75 … 121f)"
    )
    assert facts.value("release.kernels.torch_toolkit_ptx_only") == []
    assert verdict("HW140", facts) == APPLIES
    assert verdict("HW141", facts) == NOT_APPLIES


@pytest.mark.parametrize(
    ("name", "capability", "torch", "cuda", "ptx_only"),
    [
        ("NVIDIA Thor", 110, "2.9.1+cu128", "12.8", True),  # CUDA 12.8 knows sm_101, not 110
        ("NVIDIA Thor", 110, "2.11.0+cu130", "13.0", False),
        ("NVIDIA GB10", 121, "2.9.1+cu128", "12.8", False),  # sm_120 machine code runs on 12.1
        ("NVIDIA H100 80GB HBM3", 90, "2.7.1+cu118", "11.8", False),
    ],
)
def test_a_gpu_newer_than_the_build_s_cuda_release(name, capability, torch, cuda, ptx_only):
    facts = facts_with(
        {**gpu(name, capability), "torch.version": torch, "torch.cuda_version": cuda}
    )
    found = facts.value("release.kernels.torch_toolkit_ptx_only")
    assert bool(found) is ptx_only
    if ptx_only:
        assert "carries no PTX" in found[0]  # PyTorch's builds read have none
    assert verdict("HW141", facts) == (APPLIES if ptx_only else NOT_APPLIES)


def test_an_inferred_build_only_warns_and_says_so():
    facts = facts_with({**gpu("Tesla V100-SXM2-32GB", 70), "vllm.version": "0.20.0"})
    cuda = facts.get("torch.cuda_version")
    assert cuda is not None and cuda.inferred
    assert facts.value("release.kernels.torch_toolkit_no_image") == []
    warned = " | ".join(facts.value("release.kernels.torch_toolkit_ptx_only"))
    assert "inferred" in warned


def test_an_inferred_build_on_a_jetson_module_is_not_judged():
    facts = facts_with({**gpu("NVIDIA Jetson AGX Thor", 110), "vllm.version": "0.19.0"})
    assert facts.value("release.kernels.torch_toolkit_ptx_only") is None
    assert "NVIDIA's own torch builds" in facts.why_missing(
        "release.kernels.torch_toolkit_ptx_only"
    )
    assert verdict("HW141", facts) == UNDECIDED


def test_check_with_the_vllm_version_unknown_judges_no_pinned_torch():
    """Each covered release tried in turn for an unknown vLLM version pins a torch of its own:
    a what-if, not the build in hand (vLLM 0.8.x's torch 2.6.0 has nothing for a GB10)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "CUDA_"))}
    proc = doctor_run(
        "check", "--offline", "--no-config", "--format", "json", "--gpu", "GB10",
        "--fail-on", "never", env=environ, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "HW141" not in {f["code"] for f in report["findings"]}
    assert "HW141" in {f["code"] for f in report["undecided"]} | set(report["not_applicable"])


def test_a_cuda_release_not_read_cannot_decide():
    facts = facts_with(
        {**gpu("NVIDIA H100 80GB HBM3", 90), "torch.version": "2.20.0+cu150",
         "torch.cuda_version": "15.0"}
    )  # fmt: skip
    assert facts.value("release.kernels.torch_toolkit_no_image") is None
    assert "15.0" in facts.why_missing("release.kernels.torch_toolkit_no_image")


def test_torch_images_on_an_aarch64_host_are_the_aarch64_build_s():
    """torch 2.11.0's PyPI x86_64 build has no sm_110; its aarch64 build, which a Thor host
    installs, has: no finding there, and HW100 does not apply."""
    facts = facts_with(
        {**gpu("NVIDIA Thor", 110), "vllm.version": "0.24.0", "torch.version": "2.11.0",
         "torch.cuda_version": "13.0", "vllm.machine": "aarch64"}
    )  # fmt: skip
    companions = facts.value("release.kernels.companions")
    assert companions["torch 2.11.0 torch/lib/libtorch_cuda.so"] == "sass"
    assert not any(
        s.startswith("torch ") for s in facts.value("release.kernels.companions_without_image")
    )


def test_torch_images_with_the_machine_unknown_are_judged_where_both_builds_agree():
    facts = facts_with(
        {**gpu("Tesla T4", 75), "vllm.version": "0.24.0", "torch.version": "2.11.0",
         "torch.cuda_version": "13.0"}
    )  # fmt: skip
    state = facts.value("release.kernels.companions")["torch 2.11.0 torch/lib/libtorch_cuda.so"]
    assert state.startswith("unknown (") and "aarch64: none" in state and "x86_64: sass" in state


def test_check_defers_to_env003_where_the_curated_rule_speaks(tmp_path):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "CUDA_"))}
    proc = doctor_run(
        "check", "--offline", "--no-config", "--format", "json", "--gpu", "V100",
        "--torch-version", "2.9.0+cu130", "--fail-on", "never", env=environ, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    findings = {f["code"]: f["verdict"] for f in report["findings"]}
    assert findings["ENV003"] == APPLIES
    assert "HW140" not in findings and "HW140" in report["not_applicable"]
