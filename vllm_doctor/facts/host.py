"""This machine as one node of a fleet: its name, its /dev/shm, the NCCL library its processes
load, and whether it holds the served model's files.

Every node of a multi-node deployment must agree on these (vllm_doctor/fleet compares them
across nodes), and each one is read without importing torch or loading the library:

- ``host.name`` (the host name, the pod's name in Kubernetes), ``host.interfaces`` (the network
  interfaces NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME choose from) and ``host.shm_mib`` (the size of
  the tmpfs at /dev/shm, ``os.statvfs``: a container keeps the runtime's 64 MB unless the
  deployment sizes it);
- ``nccl.*``: the ``libnccl.so.2`` that torch and vLLM's pynccl load, found the way the dynamic
  loader and vLLM find it (``VLLM_NCCL_SO_PATH``, then ``LD_PRELOAD``, then the
  ``nvidia-nccl-cu*`` wheel torch's RPATH points at, then ``LD_LIBRARY_PATH`` and the system
  directories), its version (the wheel's metadata, or the file name ``libnccl.so.2.28.3``) and
  its GNU build ID (read from the ELF notes: two builds of one version differ there, and on
  GB10 clusters the build decides whether a collective hangs, vllm#46097);
- ``host.model_copy`` / ``host.model_weights``: the directory on this machine holding the served
  model's config.json (a local path, or its Hugging Face cache snapshot) and whether weight files
  sit beside it: every node that runs ranks loads the weights from its own disk.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from vllm_doctor.facts.model import Facts, Source

MIB = 1024 * 1024
NCCL_SONAME = "libnccl.so.2"
# the system directories the dynamic loader searches (after LD_LIBRARY_PATH) on the Linux
# distributions vLLM's images are built on
SYSTEM_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
# an ELF note header, and the GNU build-ID note's type
NT_GNU_BUILD_ID = 3
PT_NOTE = 4


def collect_host(facts: Facts, environ: Mapping[str, str]) -> None:
    """host.* and nccl.* of this machine (after the serve line: the model it names)."""
    facts.set("host.name", socket.gethostname(), Source.MACHINE)
    try:
        names = sorted({name for _, name in socket.if_nameindex()})
    except OSError as err:
        facts.mark_missing("host.interfaces", f"the network interfaces cannot be listed: {err}")
    else:
        facts.set("host.interfaces", names, Source.MACHINE, "socket.if_nameindex()")
    _shm(facts)
    _nccl(facts, environ)
    _model_copy(facts, environ)


def _shm(facts: Facts) -> None:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError as err:
        facts.mark_missing("host.shm_mib", f"/dev/shm cannot be read: {err.strerror or err}")
        return
    facts.set("host.shm_mib", stat.f_blocks * stat.f_frsize // MIB, Source.MACHINE, "/dev/shm")


# -- NCCL ---------------------------------------------------------------------------------------


def _wheel_libraries() -> Iterable[tuple[Path, str]]:
    """``nvidia/nccl/lib/libnccl.so.2`` of an nvidia-nccl-cu* wheel on sys.path, with the
    distribution's name and version ("nvidia-nccl-cu13 2.28.9")."""
    from importlib import metadata

    for entry in sys.path:
        candidate = Path(entry or ".") / "nvidia" / "nccl" / "lib" / NCCL_SONAME
        if not candidate.is_file():
            continue
        owner = ""
        for dist in metadata.distributions(path=[entry]):
            name = (dist.metadata["Name"] or "").lower()
            if name.startswith("nvidia-nccl"):
                owner = f"{name} {dist.version}"
                break
        yield candidate, owner


def find_nccl(environ: Mapping[str, str]) -> tuple[Path, str] | None:
    """The libnccl.so.2 this machine's vLLM processes load, and why that one."""
    explicit = environ.get("VLLM_NCCL_SO_PATH")
    if explicit:
        return Path(explicit), "VLLM_NCCL_SO_PATH"
    for word in environ.get("LD_PRELOAD", "").replace(":", " ").split():
        if "libnccl" in Path(word).name:
            return Path(word), "LD_PRELOAD"
    for path, owner in _wheel_libraries():
        return path, f"the {owner or 'nvidia-nccl'} wheel (torch's RPATH)"
    search = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for directory in (*search, *SYSTEM_LIB_DIRS):
        candidate = Path(directory) / NCCL_SONAME
        if candidate.exists():
            where = "LD_LIBRARY_PATH" if directory in search else "a system library directory"
            return candidate, where
    return None


def gnu_build_id(path: Path) -> str | None:
    """The GNU build ID of an ELF shared object (``readelf -n``), from its program headers'
    note segments only; None when the file has none or is not ELF."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF":
                return None
            wide, endian = head[4] == 2, "<" if head[5] == 1 else ">"
            if wide:
                (phoff,) = struct.unpack_from(endian + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(endian + "HH", head, 54)
            else:
                (phoff,) = struct.unpack_from(endian + "I", head, 28)
                phentsize, phnum = struct.unpack_from(endian + "HH", head, 42)
            handle.seek(phoff)
            table = handle.read(phentsize * min(phnum, 256))
            for index in range(min(phnum, 256)):
                entry = table[index * phentsize : (index + 1) * phentsize]
                if len(entry) < phentsize or struct.unpack_from(endian + "I", entry)[0] != PT_NOTE:
                    continue
                if wide:
                    (offset,) = struct.unpack_from(endian + "Q", entry, 8)
                    (size,) = struct.unpack_from(endian + "Q", entry, 32)
                else:
                    (offset,) = struct.unpack_from(endian + "I", entry, 4)
                    (size,) = struct.unpack_from(endian + "I", entry, 16)
                handle.seek(offset)
                found = _build_id_in_notes(handle.read(min(size, 1 << 16)), endian)
                if found:
                    return found
    except (OSError, struct.error):
        return None
    return None


def _build_id_in_notes(notes: bytes, endian: str) -> str | None:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from(endian + "III", notes, at)
        name_end = at + 12 + ((namesz + 3) & ~3)
        desc = notes[name_end : name_end + descsz]
        if kind == NT_GNU_BUILD_ID and notes[at + 12 : at + 12 + namesz].rstrip(b"\0") == b"GNU":
            return desc.hex() or None
        at = name_end + ((descsz + 3) & ~3)
    return None


def _nccl(facts: Facts, environ: Mapping[str, str]) -> None:
    found = find_nccl(environ)
    if found is None:
        facts.mark_missing(
            "nccl",
            f"no {NCCL_SONAME} found (VLLM_NCCL_SO_PATH, LD_PRELOAD, an nvidia-nccl-cu* wheel, "
            "LD_LIBRARY_PATH, the system directories): run in the serving environment",
        )
        return
    path, why = found
    if not path.exists():
        facts.mark_missing("nccl", f"{why} names {path}, which does not exist")
        return
    real = path.resolve()
    facts.set("nccl.library", str(real), Source.MACHINE, why)
    version = None
    if "wheel" in why:  # "the nvidia-nccl-cu13 2.28.9 wheel (...)"
        words = why.split()
        version = words[2] if len(words) > 3 and words[1].startswith("nvidia-nccl") else None
    if version is None and real.name.startswith(NCCL_SONAME + "."):
        version = real.name[len(NCCL_SONAME) - 1 :]  # libnccl.so.2.28.3 -> 2.28.3
    if version:
        facts.set("nccl.version", version, Source.MACHINE, f"{real.name} ({why})")
    else:
        facts.mark_missing(
            "nccl.version", f"{real} carries no version in its name or package metadata"
        )
    build_id = gnu_build_id(real)
    if build_id:
        facts.set("nccl.build_id", build_id, Source.MACHINE, f"ELF notes of {real.name}")
    else:
        facts.mark_missing("nccl.build_id", f"{real} has no GNU build-ID note")


# -- the served model's files -------------------------------------------------------------------


def _model_copy(facts: Facts, environ: Mapping[str, str]) -> None:
    model = facts.value("serve.model")
    if not isinstance(model, str) or not model:
        facts.mark_missing("host.model_copy", "no serve line names a model")
        facts.mark_missing("host.model_weights", "no serve line names a model")
        return
    from vllm_doctor.facts.model_config import find_in_hf_cache, hf_hub_cache

    local = Path(model).expanduser()
    folder: Path | None = None
    if local.is_dir():
        folder, how = local.resolve(), "a local directory"
    else:
        cached = find_in_hf_cache(model, hf_hub_cache(environ))
        if cached is not None:
            folder, how = cached.parent, "the Hugging Face cache"
    if folder is None:
        return  # looked for, not here: absent
    facts.set("host.model_copy", str(folder), Source.MACHINE, how)
    try:
        weights = any(p.name.endswith(WEIGHT_SUFFIXES) for p in folder.iterdir())
    except OSError:
        weights = False
    facts.set("host.model_weights", weights, Source.MACHINE, str(folder))
