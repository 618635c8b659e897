"""The kernels probe's parts that need no GPU: the fatbin reader (on nvcc's own builds, kept in
tests/fixtures/fatbin/ with the commands that made them), the inventory of compiled libraries,
and the child's verdict logic with the driver and torch replaced by stand-ins. The probe's run
on a GPU is recorded in bench/probes/ (device runs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor import fatbin
from vllm_doctor.errors import InputError
from vllm_doctor.probes import kernel_inventory, kernels
from vllm_doctor.probes._common import Ctx

FIX = Path(__file__).parent / "fixtures" / "fatbin"


@pytest.mark.parametrize(
    ("name", "images"),
    [
        ("sm80.o", ["sm_80"]),
        ("sm90-ptx90.o", ["compute_90", "sm_90"]),
        ("sm90a.o", ["sm_90a"]),
        ("sm100-sm120-ptx120.o", ["sm_100", "compute_120", "sm_120"]),
        ("sm80-ptx90-compressed.fatbin", ["sm_80", "compute_90"]),
    ],
)
def test_fatbin_images_as_nvcc_built_them(name, images):
    fatbins = fatbin.read_fatbins(FIX / name)
    assert fatbins and all(f.entries for f in fatbins)
    assert fatbin.images_summary(fatbins) == images


@pytest.mark.parametrize(
    ("name", "runs", "refused"),
    [
        ("sm80.o", [80, 86, 89], [75, 90, 100, 120]),
        ("sm90-ptx90.o", [90, 100, 120, 121], [80, 89]),  # PTX: any newer GPU
        ("sm90a.o", [90], [80, 100, 120]),  # architecture-specific: that GPU only
        ("sm100-sm120-ptx120.o", [100, 103, 120, 121], [80, 90]),
        ("sm80-ptx90-compressed.fatbin", [80, 86, 90, 121], [75]),
    ],
)
def test_fatbin_compatibility_rule(name, runs, refused):
    fatbins = fatbin.read_fatbins(FIX / name)
    for cap in runs:
        assert all(f.runs_on(cap) for f in fatbins), (name, cap)
    for cap in refused:
        assert not any(f.runs_on(cap) for f in fatbins), (name, cap)


def test_fatbin_reader_refuses_what_is_no_library(tmp_path):
    text = tmp_path / "x.so"
    text.write_text("not a library")
    with pytest.raises(fatbin.NotAFatbinFile):
        fatbin.read_fatbins(text)
    empty = tmp_path / "e.so"
    empty.write_bytes(b"")
    with pytest.raises(fatbin.NotAFatbinFile):
        fatbin.read_fatbins(empty)
    # an ELF file without device code (the interpreter itself) has no fatbins
    assert fatbin.read_fatbins(Path(sys.executable).resolve()) == []


def test_fatbin_reader_is_bounded_on_corrupt_input(tmp_path):
    """A file of repeated magic numbers with absurd sizes ends at once, with nothing."""
    bad = tmp_path / "bad.fatbin"
    header = fatbin._HEADER.pack(fatbin.FATBIN_MAGIC, 1, 16, 2**62)
    bad.write_bytes(header * 50_000)
    assert fatbin.read_fatbins(bad) == []


def test_user_extension_is_checked_before_the_run(tmp_path):
    with pytest.raises(InputError, match="no such regular file"):
        kernel_inventory.user_libraries([tmp_path / "missing.so"])
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(InputError, match="not a compiled CUDA library"):
        kernel_inventory.user_libraries([other])
    fake = tmp_path / "fake.so"
    fake.write_text("not ELF")
    with pytest.raises(InputError, match="not an ELF file"):
        kernel_inventory.user_libraries([fake])
    (record,) = kernel_inventory.user_libraries([FIX / "sm80.o"])
    assert record["images"] == ["sm_80"] and record["module"] is None


def test_installed_libraries_found_from_the_record(tmp_path, monkeypatch):
    """A kernel package's compiled modules are listed from its installed RECORD, with the
    module that loads each, without importing anything."""
    site = tmp_path / "site"
    (site / "fakekern").mkdir(parents=True)
    shutil.copy(FIX / "sm90-ptx90.o", site / "fakekern" / "_C.abi3.so")
    shutil.copy(FIX / "sm80.o", site / "fakekern" / "libhelper.so")
    info = site / "fakekern-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakekern\nVersion: 1.2.3\n")
    (info / "RECORD").write_text(
        "fakekern/_C.abi3.so,,\nfakekern/libhelper.so,,\nfakekern-1.2.3.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(kernel_inventory, "KERNEL_PACKAGES", ("fakekern",))
    libs = {Path(r["path"]).name: r for r in kernel_inventory.installed_libraries()}
    assert libs["_C.abi3.so"]["module"] == "fakekern._C"
    assert libs["_C.abi3.so"]["images"] == ["compute_90", "sm_90"]
    assert libs["libhelper.so"]["module"] is None
    assert {r["package"] for r in libs.values()} == {"fakekern"} and "fakekern" not in sys.modules


class FakeDriver:
    """The driver's choice by CUDA's rule, from the images the fatbin headers name."""

    def __init__(self, capability: int):
        self.capability = capability

    def use(self, ordinal: int) -> None:
        pass

    def load(self, image: bytes) -> int:
        with tempfile.NamedTemporaryFile(suffix=".fatbin") as fh:
            fh.write(image)
            fh.flush()
            (one,) = fatbin.read_fatbins(fh.name)
        return 0 if one.runs_on(self.capability) else kernels.NO_BINARY_FOR_GPU

    def error(self, code: int) -> str:
        return f"CUDA_ERROR_NO_BINARY_FOR_GPU ({code}): no kernel image is available for execution on the device"


def run_part(monkeypatch, libraries, capability=90):
    monkeypatch.setattr(
        kernels,
        "gpu_kinds",
        lambda torch: [{"device": 0, "name": "NVIDIA H200", "capability": capability, "count": 4}],
    )
    monkeypatch.setattr(kernels, "_torch_op", lambda torch, device: None)
    monkeypatch.setattr(kernels, "Driver", lambda: FakeDriver(capability))
    ctx = Ctx(
        rank=0,
        world=1,
        local_rank=0,
        device_kind="cuda",
        params={"kernels": {"libraries": libraries}},
        emit=lambda ev: None,
        probe="kernels",
        part="load",
    )
    return kernels.part_load(ctx)


def test_wrong_architecture_library_confirms_no_kernel_image(monkeypatch):
    libs = kernel_inventory.user_libraries([FIX / "sm80.o"])
    res = run_part(monkeypatch, libs)
    assert res["rules_confirmed"] == ["HW201"]
    assert "no kernel image is available" in res["reason"] and "sm_80" in res["reason"]
    (record,) = res["metrics"]["libraries"]
    assert record["load"]["90"]["loaded"] == 0


def test_right_architecture_library_refutes(monkeypatch):
    libs = kernel_inventory.user_libraries([FIX / "sm90-ptx90.o", FIX / "sm90a.o"])
    res = run_part(monkeypatch, libs)
    assert res["status"] == "pass" and res["rules_confirmed"] == []
    assert "HW201" in res["rules_refuted"] and "HW211" in res["rules_refuted"]
    assert "ENV002" not in res["rules_refuted"]  # vLLM's _C was not among what was loaded


def test_import_failure_with_undefined_symbol_is_an_abi_mismatch():
    said = "ImportError: /x/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert kernels._classify_import("vllm._C", said) == "ENV002"
    assert kernels._classify_import("flash_attn_2_cuda", said) == "ENV212"
    assert kernels._classify_import("vllm._C", "ModuleNotFoundError: No module named 'x'") is None


def test_probe_kernels_without_a_gpu_says_why(tmp_path):
    out = doctor_run("probe", "kernels", "--device", "cpu", timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "HW201: could not run: needs a CUDA GPU" in out.stdout


def test_probe_bad_extension_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_doctor",
            "probe",
            "kernels",
            "--device",
            "cpu",
            "--extension",
            str(tmp_path / "none.so"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "no such regular file" in out.stderr
