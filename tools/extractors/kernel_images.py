"""The GPU architectures each compiled extension of a release carries (KIND "kernel_images").

Read from the fat binaries (``.nv_fatbin``) of the wheel's shared objects with
``tools/fatbin.py``: only the fat binary headers for the images, and one entry per object
decompressed to name its kernels. Key: ``<import name>@<machine>`` (``vllm._C@x86_64``,
``vllm.vllm_flash_attn._vllm_fa3_C@aarch64``): the x86_64 and aarch64 wheels are built with
different architecture lists (aarch64 adds sm_87 and sm_110 and drops sm_75 in 0.26.0).

Value::

    {"file": "vllm/_C.abi3.so",
     "groups": [{"images": ["sm_80", "compute_80", "sm_120f"], "objects": 14,
                 "ptx_isa": "9.0", "names": ["marlin::Marlin", ...]}, ...]}

A group is the set of compiled source files (objects) that carry exactly the same images;
``names`` are the most frequent kernel names of up to 8 of its objects (readable, at most 8),
``ptx_isa`` the PTX ISA version of their PTX (the driver must know it to compile them). Extensions without GPU code (``cumem_allocator``, DeepGEMM's JIT front end) have no key.

The aarch64 wheels are looked for in ``<wheels>/aarch64/`` (``gen_knowledge.py --download``
fetches them there). What was read from each wheel is kept in ``<wheels>/kernel_images/``
(``vllm-<version>-<machine>.json``), so a wheel may be deleted once read: a later run takes
the stored reading for a release whose wheel is gone.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parents[1]
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import fatbin  # noqa: E402
from wheelsrc import MACHINES  # noqa: E402

KIND = "kernel_images"
READING_FORMAT = 1  # bump when what is read from a wheel changes: stored readings are redone
META = {
    "key": "<import name of a compiled extension>@<machine> (x86_64, aarch64)",
    "value": {
        "file": "the shared object in the wheel",
        "groups": "objects with the same images: images (sm_XY[a|f] SASS, compute_XY PTX), "
        "objects, ptx_isa, names (most frequent kernel names of up to 8 objects, at most 8)",
    },
    "sources": ["the .nv_fatbin sections of the wheel's shared objects (tools/fatbin.py)"],
}


def module_name(path: str) -> str:
    """``vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so`` → ``vllm.vllm_flash_attn._vllm_fa2_C``."""
    return path[:-3].split(".")[0].replace("/", ".")


def read_wheel(wheel: Path, prefix: str = "vllm/") -> dict[str, Any]:
    """Every shared object under ``prefix`` with GPU code: import name → file and groups."""
    out: dict[str, Any] = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if not (name.endswith(".so") and name.startswith(prefix)):
                continue
            with fatbin.member(archive, name) as data:
                try:
                    groups = fatbin.group(fatbin.containers(data, with_kernels=True))
                except fatbin.FatbinError:
                    continue
            if groups:
                out[module_name(name)] = {"file": name, "groups": groups}
    return out


def stored_reading(store: Path, version: str, machine: str, wheel: Path | None) -> dict | None:
    path = store / f"vllm-{version}-{machine}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("format") != READING_FORMAT or data.get("names") != fatbin.has_zstandard():
        return None
    if wheel is not None and (data.get("wheel") != wheel.name or data.get("size") != _size(wheel)):
        return None
    return data


def _size(path: Path) -> int:
    return path.stat().st_size


def extract(release) -> dict[str, Any]:
    store = release.root / "kernel_images"
    wheels = release.platform_wheels()
    out: dict[str, Any] = {}
    if not fatbin.has_zstandard():
        release.problem("kernel names left out: the zstandard module is not installed")
    for machine in MACHINES:
        wheel = wheels.get(machine)
        reading = stored_reading(store, str(release.version), machine, wheel)
        if reading is None and wheel is not None:
            reading = {
                "format": READING_FORMAT,
                "names": fatbin.has_zstandard(),
                "wheel": wheel.name,
                "size": _size(wheel),
                "modules": read_wheel(wheel),
            }
            store.mkdir(parents=True, exist_ok=True)
            target = store / f"vllm-{release.version}-{machine}.json"
            target.write_text(json.dumps(reading, sort_keys=True), encoding="utf-8")
        if reading is None:
            release.problem(f"no {machine} wheel (nor a stored reading of one)")
            continue
        for module, value in reading["modules"].items():
            for group in value["groups"]:
                group.pop("kernels", None)  # readings before names were sampled counted them
            out[f"{module}@{machine}"] = value
    return out
