"""Which GPU architectures a compiled CUDA library carries, read from its fatbins (no CUDA, no
cuobjdump, no import): the ELF ``.nv_fatbin`` section of a shared object or object file, or a
bare fatbin file, holds one or more fatbins; each fatbin lists entries of SASS (a cubin for one
``sm_XX``) or PTX (for one ``compute_XX``, compiled by the driver at load time).

The layout (``fatbinary_section.h`` of the CUDA toolkit for the outer header; the entry header
as nvcc 12-13 write it, checked against nvcc's own builds in tests/fixtures/fatbin/):

* fatbin header, 16 bytes: magic ``0xBA55ED50``, version (u16), header size (u16), size of
  the entries that follow (u64);
* entry header: kind (u16: 1 PTX, 2 ELF/SASS), a u16, header size (u32), payload size (u64),
  compressed size (u32), a u32, minor and major version (u16 each), architecture (u32, ``90``
  for sm_90), then the object name's offset and length (u32 each) and the flags (u64): bit
  ``0x8000`` or ``0x2000`` a compressed payload, bit ``0x100000`` an architecture-specific
  build (``sm_90a``, which runs on that exact GPU only), bit ``0x200000`` a family-specific
  one (``sm_100f``, the family from that minor on).

Whether an entry runs on a GPU is CUDA's compatibility rule: SASS for ``sm_XY`` runs on a GPU of
the same major version and a minor version ≥ Y (an architecture-specific build only on ``XY``
itself); PTX for ``compute_XY`` is compiled by the driver for any GPU ≥ XY, provided the driver
is at least as new as the toolkit that wrote it. That last condition is not in the file: the
``kernels`` probe asks the driver.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field

FATBIN_MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQ")
KIND_PTX, KIND_SASS = 1, 2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
_FLAG_COMPRESSED = FLAG_ZSTD | FLAG_LZ4
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a: that exact GPU only
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_100f: the family from that minor on (CUDA 12.9+)
_FLAG_ARCH_SPECIFIC = FLAG_ARCH_SPECIFIC
# a bound on what one file may declare, so that a corrupt or hostile file cannot make the
# reader walk forever: no real library has more fatbins or entries than this
MAX_FATBINS = 200_000
MAX_ENTRIES = 64


@dataclass(frozen=True)
class Entry:
    """One image of a fatbin: SASS for ``sm_<arch>`` or PTX for ``compute_<arch>``."""

    kind: int  # KIND_PTX | KIND_SASS
    arch: int  # 90 for sm_90 / compute_90
    arch_specific: bool = False  # sm_90a: that exact GPU only
    compressed: bool = False
    family_specific: bool = False  # sm_100f: the family from that minor on

    @property
    def name(self) -> str:
        suffix = "a" if self.arch_specific else "f" if self.family_specific else ""
        return f"{'sm' if self.kind == KIND_SASS else 'compute'}_{self.arch}{suffix}"

    def runs_on(self, capability: int) -> bool:
        """Whether this image can run on a GPU of compute capability ``capability`` (90 for
        9.0), by CUDA's compatibility rule (knowledge/cuda_images.py, which the kernel
        tables are judged by too; a PTX image also needs a new enough driver)."""
        from vllm_doctor.knowledge import cuda_images

        image = cuda_images.parse(self.name)
        return image is not None and cuda_images.runs_on(image, capability)


@dataclass(frozen=True)
class Fatbin:
    offset: int  # in the file
    size: int  # header and entries
    entries: tuple[Entry, ...] = field(default_factory=tuple)

    def runs_on(self, capability: int) -> bool:
        return any(e.runs_on(capability) for e in self.entries)

    @property
    def images(self) -> list[str]:
        return sorted({e.name for e in self.entries})


class NotAFatbinFile(ValueError):
    """The file is neither an ELF file with a ``.nv_fatbin`` section nor a fatbin."""


def _elf_fatbin_section(data: bytes | mmap.mmap) -> tuple[int, int] | None:
    """(offset, size) of the ``.nv_fatbin`` section of a 64-bit little-endian ELF file, or
    None when it has none."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise NotAFatbinFile("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise NotAFatbinFile("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shnum == 0 or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
        raise NotAFatbinFile("ELF section headers out of range")

    def header(i: int) -> tuple[int, int, int]:  # name offset, file offset, size
        base = shoff + i * shentsize
        name = struct.unpack_from("<I", data, base)[0]
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, offset, size

    _, strtab, strsize = header(shstrndx)
    for i in range(shnum):
        name, offset, size = header(i)
        if name >= strsize:
            continue
        start = strtab + name
        if data[start : start + 11] == b".nv_fatbin\0":
            if offset + size > len(data):
                raise NotAFatbinFile(".nv_fatbin section out of range")
            return offset, size
    return None


def _entries(data: bytes | mmap.mmap, start: int, end: int) -> tuple[Entry, ...]:
    out: list[Entry] = []
    pos = start
    while pos + _ENTRY.size <= end and len(out) < MAX_ENTRIES:
        kind, _, header_size, payload, _, _, _, _, arch, _, _, flags = _ENTRY.unpack_from(data, pos)
        if kind not in (KIND_PTX, KIND_SASS) or header_size < _ENTRY.size:
            break
        out.append(
            Entry(
                kind=kind,
                arch=arch,
                arch_specific=bool(flags & _FLAG_ARCH_SPECIFIC),
                compressed=bool(flags & _FLAG_COMPRESSED),
                family_specific=bool(flags & FLAG_FAMILY_SPECIFIC),
            )
        )
        pos += header_size + payload
    return tuple(out)


def _scan(data: bytes | mmap.mmap, start: int, end: int) -> list[Fatbin]:
    """The fatbins laid out from ``start`` to ``end`` (nvcc aligns each to 8 bytes; the gaps
    between them are skipped by searching the next magic)."""
    out: list[Fatbin] = []
    pos = data.find(_MAGIC_BYTES, start, end)
    while pos >= 0 and pos + _HEADER.size <= end and len(out) < MAX_FATBINS:
        _, _, header_size, size = _HEADER.unpack_from(data, pos)
        stop = pos + header_size + size
        if header_size < _HEADER.size or stop > end:
            pos = data.find(_MAGIC_BYTES, pos + 4, end)
            continue
        if size:  # nvcc also writes an empty fatbin into shared objects: no code, skipped
            out.append(Fatbin(pos, stop - pos, _entries(data, pos + header_size, stop)))
        pos = data.find(_MAGIC_BYTES, stop, end)
    return out


def read_fatbins(path: str | os.PathLike[str]) -> list[Fatbin]:
    """The fatbins of a shared object / object file (its ``.nv_fatbin`` section) or of a bare
    fatbin file; [] for an ELF file with no device code. Raises NotAFatbinFile for anything
    else, OSError when the file cannot be read."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise NotAFatbinFile("empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data[:4] == _MAGIC_BYTES:
                return _scan(data, 0, size)
            section = _elf_fatbin_section(data)
            if section is None:
                return []
            offset, length = section
            return _scan(data, offset, offset + length)


def fatbin_bytes(path: str | os.PathLike[str], fatbin: Fatbin) -> bytes:
    """One fatbin's bytes, as the CUDA driver loads them (``cuModuleLoadData``)."""
    with open(path, "rb") as fh:
        fh.seek(fatbin.offset)
        return fh.read(fatbin.size)


def images_summary(fatbins: list[Fatbin]) -> list[str]:
    """Every image name the fatbins carry (``sm_80``, ``sm_90a``, ``compute_90``), sorted by
    architecture."""
    names = {e.name for f in fatbins for e in f.entries}
    return sorted(names, key=lambda n: (int("".join(c for c in n if c.isdigit()) or 0), n))
