"""tools/gen_stack_knowledge.py, tools/stack_readers.py and the kernel_images extractor on
small wheels built here (the real runs read the package index's wheels; docs/knowledge.md)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from packaging.version import Version

from vllm_doctor.knowledge import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "tests"))
import gen_stack_knowledge as gen  # noqa: E402
import stack_readers  # noqa: E402
from test_fatbin import _container, _elf, _entry  # noqa: E402

ENV_PY = """
import os
flashinfer_version = "0.6.12"

def _get_cubin_dir():
    import flashinfer_cubin
    flashinfer_cubin_version = flashinfer_cubin.__version__
    if (
        not os.getenv("FLASHINFER_DISABLE_VERSION_CHECK")
        and flashinfer_version != flashinfer_cubin_version
    ):
        raise RuntimeError(
            f"flashinfer-cubin version ({flashinfer_cubin_version}) does not match "
            f"flashinfer version ({flashinfer_version}). "
            "Please install the same version of both packages."
        )

def get_cuda_path(cuda_home):
    if not os.path.exists(cuda_home):
        raise RuntimeError(f"Could not find nvcc and default cuda_home='{cuda_home}' doesn't exist")
"""
METADATA = """Metadata-Version: 2.1
Name: flashinfer-python
Version: {version}
Requires-Python: >=3.10
Requires-Dist: nvidia-cutlass-dsl>=4.5.0
Requires-Dist: torch
Requires-Dist: cuda-python>=13.0; extra == "nvep"
"""


def fake_wheel(folder: Path, version: str, env_py: str = ENV_PY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"flashinfer_python-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("flashinfer/__init__.py", "")
        archive.writestr("flashinfer/jit/env.py", env_py)
        archive.writestr(
            "flashinfer/data/cutlass/tool.py", 'raise ValueError("vendored message here")'
        )
        kernels = _elf({".nv_fatbin": _container(_entry(2, 90, 0x100000, b"x" * 8))})
        archive.writestr("flashinfer/_kernels.cpython-312-x86_64-linux-gnu.so", kernels)
        archive.writestr(
            f"flashinfer_python-{version}.dist-info/METADATA", METADATA.format(version=version)
        )
    return path


def test_reader_finds_requirements_checks_images_and_messages(tmp_path):
    reading = stack_readers.read(fake_wheel(tmp_path, "0.6.12"), "0.6.12")
    assert reading["requires"]["nvidia-cutlass-dsl"] == {
        "spec": ">=4.5.0",
        "extra": None,
        "marker": None,
    }
    assert reading["requires"]["cuda-python"]["extra"] == "nvep"
    check = reading["checks"]["flashinfer-cubin"]
    assert check["match"] == "equal"
    assert check["bypass"] == ["FLASHINFER_DISABLE_VERSION_CHECK"]
    assert check["file"] == "flashinfer/jit/env.py"
    assert check["message"].startswith("flashinfer-cubin version ({*}) does not match")
    assert reading["images"]["flashinfer._kernels"]["groups"][0]["images"] == ["sm_90a"]
    keys = set(reading["messages"])
    assert "RuntimeError: Could not find nvcc and default cuda_home='{*}' doesn't exist" in keys
    assert reading["messages"][
        "RuntimeError: flashinfer-cubin version ({*}) does not match flashinfer version ({*}). "
        "Please install the same version of both packages."
    ]["sites"][0][:2] == ["flashinfer/jit/env.py", "_get_cubin_dir"]
    assert not any("vendored message" in k for k in keys)  # flashinfer/data/ is not its own
    assert reading["python"] == ">=3.10"


CAUGHT_PY = ENV_PY.replace("def _get_cubin_dir():", "def _check():").replace(
    "\ndef get_cuda_path",
    "\ndef _get_cubin_dir():\n    try:\n        _check()\n"
    "    except RuntimeError as error:\n        print(error)\n\ndef get_cuda_path",
)


def test_a_caught_check_is_not_fatal(tmp_path):
    fatal = stack_readers.read(fake_wheel(tmp_path / "a", "0.6.12"), "0.6.12")["checks"]
    caught = stack_readers.read(fake_wheel(tmp_path / "b", "0.7.2", CAUGHT_PY), "0.7.2")
    assert fatal["flashinfer-cubin"]["fatal"] is True
    assert caught["checks"]["flashinfer-cubin"]["fatal"] is False


def test_write_folds_versions_and_merges_messages(tmp_path):
    readings = {}
    for version in ("0.6.11", "0.6.12"):
        reading = stack_readers.read(fake_wheel(tmp_path / "w", version), version)
        reading.update({"wheel": f"w-{version}.whl", "version": version})
        readings[version] = reading
    out = tmp_path / "out" / "stack"
    gen.write({"flashinfer-python": readings}, out)
    data = json.loads((out / "flashinfer-python.json").read_text())
    table = Table("stack/flashinfer-python", data)
    assert table.releases == ["0.6.11", "0.6.12"]
    spans = table.spans("check:flashinfer-cubin")
    assert [(s.first, s.last) for s in spans] == [("0.6.11", "0.6.12")]
    errors = json.loads((out.parent / "stack_errors.json").read_text())
    assert errors["packages"] == {"flashinfer-python": ["0.6.11", "0.6.12"]}
    nvcc = next(k for k in errors["entries"] if "Could not find nvcc" in k)
    (span,) = errors["entries"][nvcc]["flashinfer-python"]
    assert (span["first"], span["last"]) == ("0.6.11", "0.6.12")
    assert span["sites"][0][0] == "flashinfer/jit/env.py"


def test_cubin_family_keeps_one_key_across_builds():
    assert gen._family("flashinfer_cubin/cubins/batched_gemm-0d28130-add42d1") == (
        "flashinfer_cubin/cubins/batched_gemm"
    )
    assert (
        stack_readers._cubin_family(
            "flashinfer_cubin/cubins/10f64528a1172dae8e29601a3b99ab9dc78d37be/fmha/trtllm-gen/k.cubin"
        )
        == "flashinfer_cubin/cubins/fmha/trtllm-gen"
    )


def test_wanted_versions_follow_the_requirements(monkeypatch):
    monkeypatch.setattr(gen, "vllm_specs", lambda dist: {"==0.6.12", ">=0.6.13,<0.6.15"})
    index = [Version(v) for v in ("0.6.11", "0.6.12", "0.6.13", "0.6.14", "0.6.15")]
    companion = gen.Companion("test")
    chosen = gen.wanted_versions("flashinfer-python", companion, {}, index)
    assert [str(v) for v in chosen] == ["0.6.12", "0.6.13", "0.6.14"]
    # a partner checked at import: every version of the package it pairs with
    paired = gen.Companion("pair", required_by=(), same_versions_as=("flashinfer-python",))
    readings = {"flashinfer-python": {"0.6.12": {}, "0.6.14": {}}}
    assert [str(v) for v in gen.wanted_versions("flashinfer-cubin", paired, readings, index)] == [
        "0.6.12",
        "0.6.14",
    ]
    # required by another companion: that companion's readings choose
    torch_readings = {"torch": {"2.9.0": {"requires": {"triton": {"spec": "==3.5.0"}}}}}
    by_torch = gen.Companion("t", required_by=("torch",))
    assert [
        str(v)
        for v in gen.wanted_versions(
            "triton", by_torch, torch_readings, [Version("3.4.0"), Version("3.5.0")]
        )
    ] == ["3.5.0"]


def test_kernel_images_extractor_keeps_a_reading_per_wheel(tmp_path):
    import importlib.util

    from wheelsrc import ReleaseSource

    spec = importlib.util.spec_from_file_location(
        "extractors_kernel_images", REPO / "tools" / "extractors" / "kernel_images.py"
    )
    extractor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extractor)
    so = _elf({".nv_fatbin": _container(_entry(2, 80, 0, b"x" * 8), _entry(1, 80, 0, b"p"))})
    for machine, folder in (("x86_64", tmp_path), ("aarch64", tmp_path / "aarch64")):
        folder.mkdir(exist_ok=True)
        with zipfile.ZipFile(folder / f"vllm-0.9.0-cp38-abi3-manylinux1_{machine}.whl", "w") as z:
            z.writestr("vllm/_C.abi3.so", so)
            z.writestr("vllm/cumem_allocator.abi3.so", _elf({".text": b"\x90"}))
    release = ReleaseSource(
        Version("0.9.0"), tmp_path / "vllm-0.9.0-cp38-abi3-manylinux1_x86_64.whl"
    )
    values = extractor.extract(release)
    assert set(values) == {"vllm._C@x86_64", "vllm._C@aarch64"}
    assert values["vllm._C@x86_64"]["groups"][0]["images"] == ["sm_80", "compute_80"]
    # the wheels may go once read: the readings kept answer
    for wheel in tmp_path.rglob("*.whl"):
        wheel.unlink()
    (tmp_path / "src" / "0.9.0" / "vllm").mkdir(parents=True)
    again = extractor.extract(ReleaseSource(Version("0.9.0"), tmp_path / "src" / "0.9.0"))
    assert again == values


def test_companion_requirements_are_read_as_vllms_own():
    """A companion wheel's Requires-Dist through the dependencies extractor's table: the
    specifier, the extra and the other markers apart; a requirement of every install wins over
    an extra's; a line packaging cannot read is passed over."""
    meta = (
        "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.6.14\n"
        "Requires-Dist: torch>=2.9\n"
        'Requires-Dist: nvidia-cutlass-dsl==4.5.2; extra == "cute"\n'
        'Requires-Dist: nvidia-cutlass-dsl>=4.4; platform_machine == "x86_64"\n'
        "Requires-Dist: not a requirement (\n"
    )
    table = stack_readers.requirements(meta)
    assert table["torch"] == {"spec": ">=2.9", "extra": None, "marker": None}
    assert table["nvidia-cutlass-dsl"] == {
        "spec": ">=4.4",
        "extra": None,
        "marker": 'platform_machine == "x86_64"',
    }
    assert set(table) == {"torch", "nvidia-cutlass-dsl"}


def test_ptxas_reader_reads_release_and_gpu_names(tmp_path):
    """A bundled ptxas: its CUDA release and the GPU names of its tables, also where the linker
    shares a name with a longer string ("%s on sm_89"); CUDA 1.x's sm_11 is left out, and a
    ptxas outside a bin/ folder is not read."""
    binary = (
        b"\x7fELF\x00Cuda compilation tools, release 12.8, V12.8.93\x00"
        b"sm_90a\x00%s on sm_89\x00compute_120a\x00sm_100\x00sm_11\x00"
    )
    path = tmp_path / "triton-3.5.1-cp312-cp312-manylinux_2_27_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("triton/backends/nvidia/bin/ptxas", binary)
        archive.writestr("triton/backends/nvidia/bin/ptxas-blackwell", b"\x00sm_121a\x00")
        archive.writestr("triton/tools/ptxas", b"\x00sm_75\x00")
    with zipfile.ZipFile(path) as archive:
        found = stack_readers.ptxas(archive)
    assert found == {
        "triton/backends/nvidia/bin/ptxas": {
            "cuda": "12.8.93",
            "gpu_names": ["sm_89", "sm_90a", "sm_100", "sm_120a"],
        },
        "triton/backends/nvidia/bin/ptxas-blackwell": {"cuda": None, "gpu_names": ["sm_121a"]},
    }
    reading = {
        "requires": {},
        "checks": {},
        "images": {},
        "ptxas": found,
        "wheel": path.name,
    }
    values = gen.values_of(reading)
    assert values["ptxas:triton/backends/nvidia/bin/ptxas"]["cuda"] == "12.8.93"
