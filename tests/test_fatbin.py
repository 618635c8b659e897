"""tools/fatbin.py (the images of fat binaries and cubins, read in Python) and the
compatibility rules of vllm_doctor/knowledge/cuda_images.py."""

from __future__ import annotations

import struct
import sys
import zipfile
from pathlib import Path

import pytest

from vllm_doctor.knowledge import cuda_images

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "fatbin"
sys.path.insert(0, str(REPO / "tools"))
import fatbin  # noqa: E402


def _entry(kind: int, arch: int, flags: int, payload: bytes, isa=(0, 0)) -> bytes:
    header = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind, 0x0101, 64, len(payload), len(payload), 0, isa[1], isa[0], arch, 0, 0,
        flags, 0, len(payload),
    )  # fmt: skip
    return header + payload


def _container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body


def _elf(sections: dict[str, bytes]) -> bytes:
    """A minimal 64-bit little-endian ELF holding these sections."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body = b""
    offsets = {}
    for name, data in sections.items():
        offsets[name] = 64 + len(body)
        body += data
    strtab_at = 64 + len(body)
    body += names
    shoff = 64 + len(body)
    header = bytearray(64)
    header[:8] = b"\x7fELF\x02\x01\x01\x00"
    struct.pack_into("<HH", header, 0x10, 3, 62)
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, len(sections) + 2, len(sections) + 1)
    table = bytes(64)  # the null section
    at = 1
    for name, data in sections.items():
        table += struct.pack("<IIQQQQ", at, 1, 0, 0, offsets[name], len(data)) + bytes(24)
        at += len(name) + 1
    table += struct.pack("<IIQQQQ", at, 3, 0, 0, strtab_at, len(names)) + bytes(24)
    return bytes(header) + body + table


def test_images_from_synthetic_fat_binary():
    ptx = b".version 9.0\n.target sm_80\n.visible .entry _Z6kernelPf(\n"
    blob = _container(
        _entry(fatbin.KIND_ELF, 90, fatbin.FLAG_ARCH_SPECIFIC, b"x" * 8),
        _entry(fatbin.KIND_ELF, 120, fatbin.FLAG_FAMILY_SPECIFIC, b"y" * 8),
        _entry(fatbin.KIND_PTX, 80, 0, ptx, isa=(9, 0)),
    ) + _container(_entry(fatbin.KIND_ELF, 75, 0, b"z" * 8))
    found = list(fatbin.containers(_elf({".nv_fatbin": blob}), with_kernels=True))
    assert [c.images for c in found] == [("compute_80", "sm_90a", "sm_120f"), ("sm_75",)]
    assert found[0].ptx_isa == "9.0" and found[1].ptx_isa is None
    # the ELF payloads here are not ELF files: the PTX entry names the kernel
    assert found[0].kernels == ["_Z6kernelPf"]
    groups = fatbin.group(iter(found))
    assert {tuple(g["images"]): g["objects"] for g in groups} == {
        ("compute_80", "sm_90a", "sm_120f"): 1,
        ("sm_75",): 1,
    }


def test_ptx_entry_names_its_kernels():
    ptx = b".version 8.8\n.target sm_90\n.visible .entry _ZN4vllm15rms_norm_kernelIfEEvPf(\n"
    blob = _container(_entry(fatbin.KIND_PTX, 90, 0, ptx, isa=(8, 8)))
    (container,) = fatbin.containers_in(blob, with_kernels=True)
    assert container.kernels == ["_ZN4vllm15rms_norm_kernelIfEEvPf"]
    assert fatbin.readable(container.kernels[0]) == "vllm::rms_norm_kernel"


def test_no_fat_binary_section_gives_nothing():
    assert list(fatbin.containers(_elf({".text": b"\x90" * 16}))) == []
    with pytest.raises(fatbin.FatbinError):
        fatbin.elf_sections(b"not an elf file" * 8)


def test_lz4_block_with_overlapping_match():
    # literals "ab", then a match of 6 bytes at distance 2: "ababab", then literal "c"
    block = bytes([0x22]) + b"ab" + struct.pack("<H", 2) + bytes([0x10]) + b"c"
    assert fatbin._lz4_block(block) == b"abababab" + b"c"


def test_real_vllm_extension_fat_binary():
    """vLLM 0.26.0's FlashMLA extension: sm_90a and sm_100f machine code (zstd)."""
    blob = (FIXTURES / "vllm-0.26.0-_flashmla_extension_C.nv_fatbin").read_bytes()
    found = list(fatbin.containers_in(blob, with_kernels=fatbin.has_zstandard()))
    assert [c.images for c in found] == [("sm_90a", "sm_100f"), ("sm_90a", "sm_100f")]
    if fatbin.has_zstandard():
        names = {fatbin.readable(k) for c in found for k in c.kernels}
        assert "get_mla_metadata_kernel" in names
        assert "flash::flash_fwd_splitkv_mla_combine_kernel" in names


def test_real_flashinfer_cubin():
    data = (FIXTURES / "flashinfer-cubin-0.6.12-gemm-sm100f.cubin").read_bytes()
    assert fatbin.cubin_image(data) == "sm_100f"
    assert fatbin.cubin_image(b"\x7fELF" + bytes(60)) is None  # not a CUDA ELF


def test_large_member_is_read_through_a_file(tmp_path, monkeypatch):
    wheel = tmp_path / "x.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/lib.so", _elf({".nv_fatbin": _container(_entry(2, 89, 0, b"q"))}))
    monkeypatch.setattr(fatbin, "IN_MEMORY", 10)
    with zipfile.ZipFile(wheel) as archive, fatbin.member(archive, "pkg/lib.so") as data:
        assert [c.images for c in fatbin.containers(data)] == [("sm_89",)]


@pytest.mark.parametrize(
    ("symbol", "name"),
    [
        ("_ZN7cutlass13device_kernelIN4vllm24cutlass_3x_gemm_sm90_fp8IiEEEEvNT_6ParamsE",
         "cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8>"),
        ("_Z19fused_a_gemm_kernelILi1EEvP13__nv_bfloat16", "fused_a_gemm_kernel"),
        ("_ZN6marlin6MarlinILl1EEEvPK4int4", "marlin::Marlin"),
        ("plain_c_kernel", "plain_c_kernel"),
    ],
)  # fmt: skip
def test_readable_kernel_names(symbol, name):
    assert fatbin.readable(symbol) == name


@pytest.mark.parametrize(
    ("image", "capability", "runs"),
    [
        ("sm_120", 121, True),  # plain SASS: same major, newer minor
        ("sm_120", 100, False),
        ("sm_120a", 121, False),  # architecture-specific: that capability only
        ("sm_120a", 120, True),
        ("sm_120f", 121, True),  # family-specific: the family from that minor on
        ("sm_100f", 103, True),
        ("sm_100f", 110, False),
        ("sm_121", 120, False),
        ("compute_80", 121, True),  # plain PTX: every newer GPU through the driver
        ("compute_90", 89, False),
        ("compute_90a", 100, False),
        ("compute_100f", 103, True),
    ],
)
def test_compatibility(image, capability, runs):
    parsed = cuda_images.parse(image)
    assert parsed is not None and str(parsed) == image
    assert cuda_images.runs_on(parsed, capability) is runs


def test_best_image():
    assert cuda_images.best(["sm_80", "compute_80", "sm_120f"], 121) == cuda_images.SASS
    assert cuda_images.best(["sm_80", "compute_80"], 121) == cuda_images.PTX
    assert cuda_images.best(["sm_90a", "sm_100f"], 121) == cuda_images.NONE
    assert cuda_images.parse("gfx942") is None


@pytest.mark.parametrize("name", ["sm80.o", "sm90-ptx90.o", "sm90a.o", "sm100-sm120-ptx120.o"])
def test_generator_reader_agrees_with_the_probes_reader(name):
    """The tables' reader and the kernels probe's (vllm_doctor/fatbin.py) on nvcc's builds."""
    from vllm_doctor import fatbin as probe_reader

    path = FIXTURES / name
    ours = sorted({i for c in fatbin.containers(path.read_bytes()) for i in c.images})
    theirs = sorted(probe_reader.images_summary(probe_reader.read_fatbins(path)))
    assert ours == theirs and ours
