"""The compiled CUDA libraries of the installed stack, for the ``kernels`` probe: found from the
packages' installed file lists (importlib.metadata), never imported here.

Each library is a dict the probe's child reads: the file, the distribution and its version, the
Python module that loads it (``vllm._C`` for ``vllm/_C.abi3.so``; None for a plain library),
and the GPU images its fatbins carry (read here, from the file, so that the child only has to
ask the driver). torch's own libraries are not listed: a tiny torch operation checks them, and
its fatbins (over a gigabyte) are no one-second check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError

# The distributions whose compiled kernels vLLM loads: vLLM's own extensions (_C, _moe_C,
# the FlashAttention and FlashMLA builds inside the vllm package) and the kernel packages it
# imports when present.
KERNEL_PACKAGES = (
    "vllm",
    "flashinfer-python",
    "flashinfer-jit-cache",
    "deep-gemm",
    "deep_gemm",
    "xformers",
    "flash-attn",
    "flash_attn",
    "vllm-flash-attn",
    "flashmla",
    "lmcache",
)
# a file given with --extension: what the driver can load
EXTENSION_SUFFIXES = (".so", ".o", ".fatbin", ".cubin", ".ptx")
MAX_EXTENSIONS = 64


def _module_name(relative: Path) -> str | None:
    """``vllm/_C.abi3.so`` → ``vllm._C``; None for a library that is no Python module
    (``libfoo.so``, a versioned ``.so.1``)."""
    if relative.suffix != ".so" or relative.name.startswith("lib"):
        return None
    stem = relative.name.split(".", 1)[0]
    parts = [*relative.parent.parts, stem]
    if not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def describe(path: Path, package: str | None, version: str | None, module: str | None) -> dict:
    """One library as the probe takes it, with the images its fatbins carry."""
    from vllm_doctor.fatbin import NotAFatbinFile, images_summary, read_fatbins

    record: dict[str, Any] = {
        "path": str(path),
        "package": package,
        "version": version,
        "module": module,
    }
    if path.suffix in (".ptx", ".cubin"):
        record["fatbins"] = 0
        record["images"] = []
        return record
    try:
        fatbins = read_fatbins(path)
    except (OSError, NotAFatbinFile) as err:
        record["unreadable"] = str(err)
        return record
    record["fatbins"] = len(fatbins)
    record["images"] = images_summary(fatbins)
    return record


def installed_libraries() -> list[dict]:
    """The compiled libraries of the kernel packages installed in this environment."""
    from importlib import metadata

    out: list[dict] = []
    seen: set[str] = set()
    for name in KERNEL_PACKAGES:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.metadata["Name"] in seen:
            continue
        seen.add(dist.metadata["Name"])
        for file in dist.files or ():
            relative = Path(str(file))
            if relative.suffix != ".so" or ".." in relative.parts:
                continue
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                out.append(
                    describe(path, dist.metadata["Name"], dist.version, _module_name(relative))
                )
    return out


def user_libraries(paths: list[Path]) -> list[dict]:
    """The libraries given with --extension: regular files the driver can load."""
    if len(paths) > MAX_EXTENSIONS:
        raise InputError("--extension", f"at most {MAX_EXTENSIONS} files (got {len(paths)})")
    out = []
    for path in paths:
        if path.suffix not in EXTENSION_SUFFIXES:
            raise InputError(
                "--extension",
                f"{path}: not a compiled CUDA library (one of {', '.join(EXTENSION_SUFFIXES)})",
            )
        if not path.is_file():
            raise InputError("--extension", f"{path}: no such regular file")
        if not os.access(path, os.R_OK):
            raise InputError("--extension", f"{path}: not readable")
        record = describe(path.resolve(), None, None, None)
        if "unreadable" in record:
            raise InputError("--extension", f"{path}: {record['unreadable']}")
        out.append(record)
    return out
