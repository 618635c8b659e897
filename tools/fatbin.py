"""The GPU code a shared object or a cubin carries, read in Python (no CUDA tools), as the
knowledge generators need it: per object, with the PTX ISA version and the kernels' names.

``vllm_doctor/fatbin.py`` is the doctor's own reader (the kernels probe loads what it finds);
this one reads the same format from wheel members at generation time, and adds what only the
tables need: the payloads decompressed to name kernels, and raw cubins.

A CUDA shared object keeps its device code in the ELF section ``.nv_fatbin``: one *fat
binary container* per compiled source file (header magic ``0xBA55ED50``, version 1), each
holding entries of machine code (kind 2: an ELF "cubin" for one ``sm_XY``) or PTX (kind 1:
``compute_XY``), usually compressed. The layout, as the public readers of it describe it
(n-eiling/cuda-fatbin-decompression, jiegec/fatbinary, GrigoryEvko/nvopen-tools
fatbin/FORMAT_SPECIFICATION.md) and as checked here against the ``-arch`` option ptxas
records in each cubin's ``.note.nv.tkinfo``:

    container: u32 magic, u16 version, u16 header size (16), u64 size of the entries
    entry:     u16 kind (1 PTX, 2 ELF), u16 (0x0101), u32 header size (64, 80 or 112),
               u64 padded payload size, u32 compressed size, u32 options offset,
               u16 minor, u16 major (PTX: the ISA version), u32 arch (90, 100, 121),
               u32 name offset, u32 name size, u64 flags, u64, u64 uncompressed size

Entry flags: 0x2000 LZ4-compressed payload, 0x8000 zstd-compressed, 0x100000 an
architecture-specific image (``sm_90a``), 0x200000 a family-specific one (``sm_100f``).
Only the headers are needed for the images; a payload is decompressed only to name the
kernels in it (zstd needs the ``zstandard`` module; without it the names are left out).

A raw ``.cubin`` (FlashInfer's cubin package) is one ELF: its architecture is in
``e_flags`` (byte 0 up to sm_90, byte 1 from the ELF ABI of CUDA 12.8 on) and the suffix in
the ``-arch sm_XYa`` ptxas wrote into ``.note.nv.tkinfo``.
"""

from __future__ import annotations

import mmap
import re
import shutil
import struct
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# the format's constants have one source: the doctor's own reader (the kernels probe's)
from vllm_doctor.fatbin import (  # noqa: E402
    FATBIN_MAGIC,
    FLAG_ARCH_SPECIFIC,
    FLAG_FAMILY_SPECIFIC,
    FLAG_LZ4,
    FLAG_ZSTD,
    KIND_PTX,
)
from vllm_doctor.fatbin import KIND_SASS as KIND_ELF  # noqa: E402

EM_CUDA = 190
IN_MEMORY = 640 << 20  # members up to this size are read into memory, larger ones via a file
NAMED_PER_IMAGES = 8  # objects of one set of images whose kernels are named
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_CONTAINER = struct.Struct("<IHHQ")
_TKINFO_ARCH = re.compile(rb"-arch[ =]+(sm_\d+[af]?)")


class FatbinError(ValueError):
    """The bytes are not the ELF or fat binary they should be."""


@dataclass
class Container:
    """One compiled source file's device code: its images and (when read) its kernels."""

    images: tuple[str, ...]
    ptx_isa: str | None = None  # the newest PTX ISA version among its PTX images
    kernels: list[str] = field(default_factory=list)


# -- ELF -------------------------------------------------------------------------------------


def elf_sections(data) -> dict[str, tuple[int, int]]:
    """Section name → (offset, size) of a 64-bit little-endian ELF."""
    if len(data) < 64 or bytes(data[:4]) != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise FatbinError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data):
        return {}
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        return {}
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = bytes(data[strtab_off : strtab_off + strtab_size])
    out = {}
    for name_at, sh_type, _flags, _addr, offset, size in headers:
        end = strtab.find(b"\0", name_at)
        name = strtab[name_at:end].decode("utf-8", "replace")
        # SHT_NOBITS (8) occupies no bytes in the file
        out[name] = (offset, 0 if sh_type == 8 else size)
    return out


# -- fat binaries ----------------------------------------------------------------------------


def containers(data, with_kernels: bool = False) -> Iterator[Container]:
    """The fat binary containers of an ELF shared object (none without ``.nv_fatbin``)."""
    section = elf_sections(data).get(".nv_fatbin")
    if section is None:
        return
    offset, size = section
    yield from containers_in(memoryview(data)[offset : offset + size], with_kernels)


def containers_in(blob, with_kernels: bool = False) -> Iterator[Container]:
    """The containers of a ``.nv_fatbin`` section (or of a standalone ``.fatbin`` file).

    With ``with_kernels``, the kernels of the first ``NAMED_PER_IMAGES`` containers of each set
    of images are named (one entry decompressed each): the names a table keeps are a sample,
    and decompressing every object of a 300 MB extension would triple the reading time."""
    named: Counter = Counter()
    pos, end = 0, len(blob)
    while pos + _CONTAINER.size <= end:
        magic, _version, header_size, size = _CONTAINER.unpack_from(blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned; padding between them is skipped
            continue
        at, stop = pos + header_size, min(pos + header_size + size, end)
        images: list[str] = []
        isa: tuple[int, int] | None = None
        payloads: list[tuple[int, int, int, int]] = []  # kind, flags, where, raw size
        while at + _ENTRY.size <= stop:
            (kind, _, entry_size, payload, compressed, _opts, minor, major, arch, _no, _nl,
             flags, _zero, raw) = _ENTRY.unpack_from(blob, at)  # fmt: skip
            if entry_size < _ENTRY.size:
                break
            variant = (
                "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""
            )
            if kind == KIND_ELF:
                images.append(f"sm_{arch}{variant}")
            elif kind == KIND_PTX:
                images.append(f"compute_{arch}{variant}")
                isa = max(isa or (0, 0), (major, minor))
            if kind in (KIND_ELF, KIND_PTX):
                payloads.append((kind, flags, at + entry_size, compressed or payload, raw))
            at += entry_size + payload
        found = tuple(sorted(set(images), key=_image_order))
        kernels: list[str] = []
        if with_kernels and named[found] < NAMED_PER_IMAGES:
            named[found] += 1
            for kind, flags, where, length, raw in payloads:
                kernels = _kernel_names(kind, flags, blob[where : where + length], raw)
                if kernels:
                    break
        yield Container(found, f"{isa[0]}.{isa[1]}" if isa else None, kernels)
        pos = pos + header_size + size


def _image_order(image: str) -> tuple[int, int, str]:
    kind, _, rest = image.partition("_")
    digits = rest.rstrip("af")
    return (int(digits) if digits.isdigit() else 0, 0 if kind == "sm" else 1, image)


def _kernel_names(kind: int, flags: int, body, raw_size: int) -> list[str]:
    payload = _decompress(flags, bytes(body), raw_size)
    if payload is None:
        return []
    if kind == KIND_PTX:
        text = payload.decode("utf-8", "replace")
        return re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", text)
    try:
        return [n[6:] for n in elf_sections(payload) if n.startswith(".text.")]
    except FatbinError:
        return []


def _decompress(flags: int, body: bytes, raw_size: int) -> bytes | None:
    if flags & FLAG_ZSTD:
        try:
            import zstandard
        except ImportError:
            return None
        try:
            return zstandard.ZstdDecompressor().decompress(body, max_output_size=raw_size or 0)
        except zstandard.ZstdError:
            return None
    if flags & FLAG_LZ4:
        return _lz4_block(body)
    return body


def _lz4_block(data: bytes) -> bytes:
    """An LZ4 block (the fat binary's older compression), decompressed."""
    out = bytearray()
    pos = 0
    while pos < len(data):
        token = data[pos]
        pos += 1
        literal = token >> 4
        if literal == 15:
            while True:
                extra = data[pos]
                pos += 1
                literal += extra
                if extra != 255:
                    break
        out += data[pos : pos + literal]
        pos += literal
        if pos >= len(data):
            break
        back = data[pos] | data[pos + 1] << 8
        pos += 2
        length = (token & 15) + 4
        if length == 19:
            while True:
                extra = data[pos]
                pos += 1
                length += extra
                if extra != 255:
                    break
        start = len(out) - back
        if back <= 0 or start < 0:
            break
        if back >= length:
            out += out[start : start + length]
        else:  # the match overlaps what it writes: its last `back` bytes repeat
            out += (out[start:] * (length // back + 1))[:length]
    return bytes(out)


def has_zstandard() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


# -- raw cubins ---------------------------------------------------------------------------------


def cubin_image(data) -> str | None:
    """The SASS image of a raw cubin (``sm_100a``), or None when it is not a CUDA ELF."""
    if len(data) < 64 or bytes(data[:4]) != b"\x7fELF":
        return None
    (machine,) = struct.unpack_from("<H", data, 0x12)
    if machine != EM_CUDA:
        return None
    try:
        sections = elf_sections(data)
    except FatbinError:
        return None
    note = sections.get(".note.nv.tkinfo")
    if note is not None:
        found = _TKINFO_ARCH.search(bytes(data[note[0] : note[0] + note[1]]))
        if found:
            return found.group(1).decode()
    (flags,) = struct.unpack_from("<I", data, 0x30)
    abi = data[8]
    arch = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    return f"sm_{arch}" if arch else None


# -- groups of containers, as the tables keep them -------------------------------------------------


def group(found: Iterator[Container], names_per_group: int = 8) -> list[dict]:
    """Containers with the same images as one group: how many objects, the PTX ISA, and the
    most frequent kernel names among the objects named (readable, see ``readable``)."""
    groups: dict[tuple[str, ...], dict] = {}
    names: dict[tuple[str, ...], Counter] = {}
    for container in found:
        if not container.images:
            continue
        entry = groups.setdefault(
            container.images, {"images": list(container.images), "objects": 0}
        )
        entry["objects"] += 1
        if container.ptx_isa:
            entry["ptx_isa"] = max(entry.get("ptx_isa", "0.0"), container.ptx_isa, key=_isa)
        names.setdefault(container.images, Counter()).update(readable(k) for k in container.kernels)
    out = []
    for images, entry in groups.items():
        common = names[images].most_common(names_per_group)
        entry["names"] = sorted(n for n, _ in common)
        out.append(entry)
    out.sort(key=lambda g: (-g["objects"], g["images"]))
    return out


def _isa(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)


@contextmanager
def member(archive: zipfile.ZipFile, name: str):
    """A zip member's bytes: in memory when small, else through a temporary file mapped into
    memory (a 2 GB ``libtorch_cuda.so`` is never held in RAM)."""
    info = archive.getinfo(name)
    if info.file_size <= IN_MEMORY:
        yield archive.read(name)
        return
    with tempfile.TemporaryFile() as tmp:
        with archive.open(name) as src:
            shutil.copyfileobj(src, tmp, 16 << 20)
        tmp.flush()
        with mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            yield mapped


# -- kernel names --------------------------------------------------------------------------------

_WRAPPERS = {"device_kernel", "Kernel", "Kernel2", "kernel"}  # generic launchers: name the argument


def readable(symbol: str, limit: int = 90) -> str:
    """A kernel's qualified name from its Itanium-mangled symbol, template arguments left out
    (``_ZN4vllm15rms_norm_kernelIN3c104HalfELi8EEEvPT_...`` → ``vllm::rms_norm_kernel``); for
    a generic launcher (CUTLASS's ``device_kernel``) its first argument is named too. A
    symbol that is not mangled (``extern "C"``) is kept as it is."""
    if not symbol.startswith("_Z"):
        return symbol[:limit]
    parser = _Demangler(symbol, 2)
    try:
        name = parser.name()
        if name and name.split("::")[-1] in _WRAPPERS and parser.peek() == "I":
            parser.pos += 1
            inner = parser.name()
            if inner:
                name = f"{name}<{inner}>"
    except (IndexError, ValueError):
        name = ""
    return (name or symbol)[:limit]


class _Demangler:
    """Just enough of the Itanium C++ ABI to read a qualified name: nested names, source
    names, ``St`` and substitutions of earlier prefixes."""

    def __init__(self, text: str, pos: int):
        self.text, self.pos = text, pos
        self.subs: list[str] = []

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def source_name(self) -> str:
        digits = re.match(r"\d+", self.text[self.pos :])
        if not digits:
            raise ValueError("no source name")
        self.pos += len(digits.group(0))
        length = int(digits.group(0))
        word = self.text[self.pos : self.pos + length]
        self.pos += length
        return "(anonymous namespace)" if word.startswith("_GLOBAL__N") else word

    def substitution(self) -> str:
        end = self.text.index("_", self.pos)
        seq = self.text[self.pos + 1 : end]
        self.pos = end + 1
        index = 0 if seq == "" else int(seq, 36) + 1
        return self.subs[index]

    def name(self) -> str:
        char = self.peek()
        if char == "N":
            self.pos += 1
            while self.peek() in ("r", "V", "K"):  # qualifiers of a member function
                self.pos += 1
            parts: list[str] = []
            while self.peek() not in ("E", "I", ""):
                if self.text.startswith("St", self.pos):
                    self.pos += 2
                    parts.append("std")
                elif self.peek() == "S":
                    parts.append(self.substitution())
                elif self.peek().isdigit():
                    parts.append(self.source_name())
                else:
                    break
                self.subs.append("::".join(parts))
            return "::".join(parts)
        if self.text.startswith("St", self.pos):
            self.pos += 2
            return "std::" + self.source_name()
        if char == "S":
            return self.substitution()
        if char.isdigit():
            word = self.source_name()
            self.subs.append(word)
            return word
        return ""
