"""The CUDA release of the judged vLLM wheel and of the installed build (facts/cuda_build.py)
over the shipped kernel tables read from the real wheels, and rule HW142."""

from __future__ import annotations

import pytest
from judging import facts_with as judged_facts
from judging import verdict

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED
from vllm_doctor.facts.cuda_build import cuda12_images, cuda_major_of_isa, published_cuda
from vllm_doctor.facts.model import Facts
from vllm_doctor.knowledge import load

# an FP8 model's serve line: HW142-HW144 judge FP8/NVFP4 CUTLASS kernels
FP8_SERVE = "vllm serve Qwen/Qwen3.6-27B-FP8"


def facts_with(values: dict) -> Facts:
    return judged_facts(values, FP8_SERVE)


@pytest.mark.parametrize(("isa", "cuda"), [("8.8", 12), ("9.0", 13), ("7.8", 11), ("x", None)])
def test_ptx_isa_names_its_cuda_major(isa, cuda):
    assert cuda_major_of_isa(isa) == cuda


def test_published_wheels_switch_to_cuda_13_at_0_20_0():
    table = load("kernel_images")
    assert published_cuda(table.at("0.19.1"), "aarch64") == 12
    assert published_cuda(table.at("0.20.0"), "aarch64") == 13
    assert published_cuda(table.at("0.26.0"), "x86_64") == 13


def test_cuda_12_builds_are_read_from_the_newest_cuda_12_wheel():
    release, images = cuda12_images("aarch64")
    assert release == "0.19.1"
    assert "sm_120a" in images
    assert not any(i.startswith(("sm_121", "sm_120f")) for i in images)
    # the 10.x family has family images in CUDA 12 builds too: a B300 is not judged here
    assert "sm_100f" in images


def test_gb10_with_a_cu129_build_of_0_26_0_lists_the_family_only_objects():
    facts = facts_with(
        {
            "vllm.version": "0.26.0",
            "vllm.machine": "aarch64",
            "torch.cuda_version": "12.9",
            "gpu.capabilities": [121],
            "gpu.min_capability": 121,
        }
    )
    assert facts.value("release.kernels.published_cuda") == 13
    listed = facts.value("release.kernels.cuda12_build_family_only")
    assert any("cutlass_3x_gemm_fp8_blockwise" in item and "sm_120f" in item for item in listed)
    assert all("judged for sm_121" in item for item in listed)
    assert facts.value("release.kernels.cuda12_build_lacks_image") is True
    assert verdict("HW142", facts) == APPLIES


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ({"torch.cuda_version": "13.0", "gpu.capabilities": [121]}, "the published build"),
        ({"torch.cuda_version": "12.9", "gpu.capabilities": [120]}, "sm_120a runs on 12.0"),
        ({"torch.cuda_version": "12.9", "gpu.capabilities": [103]}, "CUDA 12 has sm_100f"),
    ],
)
def test_no_lacking_objects_where_the_cuda_12_build_runs(values, why):
    facts = facts_with({"vllm.version": "0.26.0", "vllm.machine": "aarch64", **values})
    assert facts.value("release.kernels.cuda12_build_family_only") == [], why
    assert verdict("HW142", facts) == NOT_APPLIES


def test_nightly_between_releases_decides_where_they_agree():
    facts = facts_with(
        {
            "vllm.version": "0.21.1rc1.dev169+ga6682d1d2",
            "torch.version": "2.11.0+cu129",
            "torch.cuda_version": "12.9",
            "gpu.names": ["NVIDIA GB10"],
            "gpu.capabilities": [121],
            "gpu.min_capability": 121,
        }
    )
    # the objects differ between 0.21.0 and the later releases; that some lack an image does not
    assert facts.value("release.kernels.cuda12_build_family_only") is None
    assert facts.value("release.kernels.cuda12_build_lacks_image") is True
    assert verdict("HW142", facts) == APPLIES


def test_torch_not_stated_is_the_release_pin_cuda_13_build():
    """Without torch in the inputs, the torch the release pins (its PyPI build, CUDA 13) stands
    for it: the published build, nothing to warn about."""
    facts = facts_with(
        {"vllm.version": "0.26.0", "vllm.machine": "aarch64", "gpu.capabilities": [121]}
    )
    assert facts.get("torch.cuda_version").inferred
    assert facts.value("release.kernels.cuda12_build_lacks_image") is False
    assert verdict("HW142", facts) == NOT_APPLIES


@pytest.mark.parametrize(
    ("version", "torch_cuda", "capability", "runs"),
    [
        ("0.20.0", "13.0", 121, True),  # the published CUDA 13 wheel: sm_120f + enable_sm120_only
        ("0.21.0", "13.0", 121, True),
        ("0.22.0", "13.0", 121, False),  # enable_sm120_family
        ("0.18.0", "13.0", 121, True),  # a CUDA 13 build of a CUDA 12 wheel compiles sm_120f
        ("0.18.0", "12.9", 121, False),  # sm_120a: no image at all (HW101's case)
        ("0.15.1", "13.0", 121, False),  # before the wrapper
        ("0.21.0", "13.0", 120, False),  # the guard admits 12.0
    ],
)
def test_exact_arch_guard_read_from_the_kernel_names(version, torch_cuda, capability, runs):
    facts = facts_with(
        {
            "vllm.version": version,
            "vllm.machine": "aarch64",
            "torch.cuda_version": torch_cuda,
            "gpu.capabilities": [capability],
            "gpu.min_capability": capability,
        }
    )
    assert facts.value("release.kernels.exact_arch_guard_runs") is runs
    listed = facts.value("release.kernels.exact_arch_guard")
    assert bool(listed) is runs
    assert all("enable_sm120_only" in item for item in listed)
    assert verdict("HW143", facts) == (APPLIES if runs else NOT_APPLIES)


def test_family_only_follows_the_installed_cuda_build():
    """HW101's objects: 0.18.0's published wheel is a CUDA 12 build (sm_120a, nothing for a
    12.1 GB10); with torch +cu130 the installed build is a CUDA 13 one, whose sm_120f runs."""
    values = {"vllm.version": "0.18.0", "vllm.machine": "aarch64", "gpu.capabilities": [121]}
    cu129 = facts_with({**values, "torch.cuda_version": "12.9"})
    cu130 = facts_with({**values, "torch.cuda_version": "13.0"})
    assert any("sm_120a" in item for item in cu129.value("release.kernels.family_only"))
    assert cu130.value("release.kernels.family_only") == []


@pytest.mark.parametrize(
    ("version", "capability", "driver", "torch_cuda", "named"),
    [
        ("0.11.2", 90, "12.4", "12.8", "_vllm_fa2_C"),  # PTX ISA 8.7 (CUDA 12.8) on CUDA 12.4
        ("0.11.2", 90, "12.8", "12.8", None),
        ("0.11.2", 89, "12.4", "12.8", None),  # sm_89 machine code everywhere
        ("0.19.1", 120, "12.8", "12.9", "marlin"),  # PTX ISA 8.8 (CUDA 12.9)
        # torch cu129 beside 0.21.0 (published for CUDA 13.0): the PyPI wheel (CUDA 13 PTX)
        # or a cu129 build (CUDA 12.9 PTX) disagree on a 12.9 driver
        ("0.21.0", 121, "12.9", "12.9", "open"),
        # the variant's label names the build: its PTX is CUDA 12.9's
        ("0.21.0+cu129", 121, "12.9", "12.9", None),
        ("0.21.0+cu130", 121, "12.9", "12.9", "fa2"),
        # torch's stated CUDA 12.6: the installed vLLM may be the published CUDA 12.8 build or
        # one built for 12.6, which disagree on a 12.6 driver
        ("0.11.2", 90, "12.6", "12.6", "open"),
    ],
)
def test_ptx_beyond_driver_from_the_ptx_isa(version, capability, driver, torch_cuda, named):
    facts = facts_with(
        {
            "vllm.version": version,
            "vllm.machine": "x86_64",
            "torch.cuda_version": torch_cuda,
            "driver.cuda_version": driver,
            "gpu.capabilities": [capability],
            "gpu.min_capability": capability,
        }
    )
    if named == "open":  # the published build's PTX is beyond the driver, torch's is not
        assert facts.value("release.kernels.ptx_beyond_driver_any") is None
        assert f"torch is a CUDA {torch_cuda} build" in facts.why_missing(
            "release.kernels.ptx_beyond_driver_any"
        )
        assert verdict("HW144", facts) == UNDECIDED
        return
    listed = facts.value("release.kernels.ptx_beyond_driver")
    assert bool(listed) is (named is not None)
    if named:
        assert any(named in item.lower() or named in item for item in listed)
        assert all(f"the driver supports CUDA {driver}" in item for item in listed)
    assert verdict("HW144", facts) == (APPLIES if named else NOT_APPLIES)


def test_ptx_beyond_driver_needs_the_driver_cuda():
    facts = facts_with(
        {"vllm.version": "0.11.2", "vllm.machine": "x86_64", "gpu.capabilities": [90]}
    )
    assert facts.value("release.kernels.ptx_beyond_driver_any") is None
    assert verdict("HW144", facts) == UNDECIDED


@pytest.mark.parametrize(
    ("version", "torch_cuda", "lacking"),
    [
        ("0.26.0+cu129", None, True),  # the variant's label names a CUDA 12 build
        ("0.26.0+cu130", "12.9", False),  # the label wins over torch's CUDA
        ("0.26.0", "12.9", True),  # torch's CUDA stands for the build's
    ],
)
def test_the_build_cuda_from_the_vllm_label_else_torch(version, torch_cuda, lacking):
    values = {
        "vllm.version": version,
        "vllm.machine": "aarch64",
        "gpu.capabilities": [121],
        "gpu.min_capability": 121,
    }
    if torch_cuda:
        values["torch.cuda_version"] = torch_cuda
    facts = facts_with(values)
    assert facts.value("release.kernels.cuda12_build_lacks_image") is lacking
