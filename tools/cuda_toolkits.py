"""Which GPU architectures each CUDA release can compile for (table ``cuda_toolkits``).

A CUDA build of torch (``torch 2.7.1+cu126``) is compiled by one CUDA release's ``nvcc`` and
``ptxas``: its fat binaries can hold machine code (``sm_XY``) or PTX (``compute_XY``) only for the
architectures that release knows. CUDA 12.6 knows none of Blackwell's (``sm_100``/``sm_120``
came with 12.8, ``sm_103``/``sm_121`` with 12.9, ``sm_110`` with 13.0), and CUDA 13.0 no longer
builds below Turing (``compute_75``). So the build's CUDA release alone decides that a GPU
newer than it gets no machine code (only PTX of an older architecture, if the build carries
any, which the driver then compiles), and that a GPU older than its oldest architecture gets
nothing at all.

Read from NVIDIA's ``nvidia-cuda-nvcc`` wheels on PyPI (``nvidia-cuda-nvcc-cu11``,
``nvidia-cuda-nvcc-cu12``, ``nvidia-cuda-nvcc`` from 13.0; never installed or run): the newest
patch of every CUDA minor release, its ``ptxas`` binary's release line (``Cuda compilation
tools, release 12.6, V12.6.85``) and the virtual architectures its tables name
(``compute_50`` ... ``compute_90a``, read as NUL-terminated strings: the ``sm_`` strings of the
binary also carry its error messages' old names, the ``compute_`` ones are the table). Each
reading is kept in ``<dir>/nvidia-cuda-nvcc/readings/<version>.json`` and the wheel deleted.

Written: ``vllm_doctor/knowledge/data/cuda_toolkits.json``: ``releases`` (CUDA ``X.Y`` → ``ptxas``
version, ``wheel``, ``archs``: the ``compute_XY[af]`` names in order).
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.version import Version

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import stack_readers  # noqa: E402

FOLDER = "nvidia-cuda-nvcc"
# the distributions that carry each CUDA major's compiler, on PyPI
DISTRIBUTIONS = ("nvidia-cuda-nvcc-cu11", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc")
READING_FORMAT = 1
_RELEASE = re.compile(rb"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_VIRTUAL = re.compile(rb"compute_(\d{2,3}[af]?)(?=\x00)")


def _arch_order(name: str) -> tuple[int, str]:
    return int(name.rstrip("af")), name


def read_ptxas(data: bytes) -> dict[str, Any] | None:
    """The release line and the virtual architectures of one ptxas binary."""
    release = _RELEASE.search(data)
    if release is None:
        return None
    names = {m.decode() for m in _VIRTUAL.findall(data)}
    return {
        "cuda": release.group(1).decode(),
        "ptxas": release.group(2).decode(),
        "archs": [f"compute_{n}" for n in sorted(names, key=_arch_order)],
    }


def read_wheel(wheel: Path) -> dict[str, Any] | None:
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if PurePosixPath(info.filename).name == "ptxas" and "/bin/" in info.filename:
                found = read_ptxas(archive.read(info.filename))
                if found is not None:
                    return {**found, "wheel": wheel.name, "format": READING_FORMAT}
    return None


def _newest_per_minor(dist: str) -> list[str]:
    """The newest release of every CUDA minor version ``dist`` has on the index."""
    found = stack_readers.index_versions(dist)
    if not found:
        print(f"  pip index versions {dist}: nothing found", file=sys.stderr)
        return []
    newest: dict[tuple[int, int], Version] = {}
    for version in found:
        key = (version.major, version.minor)
        if not version.is_prerelease and (key not in newest or version > newest[key]):
            newest[key] = version
    return [str(v) for _, v in sorted(newest.items())]


def _stored(root: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((root / FOLDER / "readings").glob("*.json")):
        try:
            reading = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if reading.get("format") == READING_FORMAT:
            out[path.stem] = reading
    return out


def fetch(root: Path) -> None:
    """Read the newest patch of every CUDA minor release that no reading holds yet."""
    stored = _stored(root)
    folder = root / FOLDER
    for dist in DISTRIBUTIONS:
        for version in _newest_per_minor(dist):
            if version in stored:
                continue
            before = set(folder.glob("*.whl"))
            if not stack_readers.pip_download(folder, dist, version):
                continue
            for wheel in sorted(set(folder.glob("*.whl")) - before):
                print(f"reading {wheel.name} ...", file=sys.stderr)
                reading = read_wheel(wheel)
                if reading is not None:
                    path = folder / "readings" / f"{version}.json"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(reading, sort_keys=True), encoding="utf-8")
                wheel.unlink()


def table(readings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """CUDA ``X.Y`` → what its newest release read says (one reading per minor release)."""
    releases: dict[str, dict[str, Any]] = {}
    for version in sorted(readings, key=Version):
        reading = readings[version]
        releases[reading["cuda"]] = {
            "ptxas": reading["ptxas"],
            "wheel": reading["wheel"],
            "archs": reading["archs"],
        }
    return {
        "kind": "cuda_toolkits",
        "format": 1,
        "description": "The GPU architectures each CUDA release's ptxas can build for (its "
        "virtual architectures, compute_XY), read from NVIDIA's nvidia-cuda-nvcc wheels by "
        "tools/cuda_toolkits.py: a build compiled with that release holds images for these "
        "architectures only.",
        "generated_by": "tools/gen_stack_knowledge.py",
        "releases": dict(sorted(releases.items(), key=lambda item: Version(item[0]))),
    }


def write_table(root: Path, out: Path, download: bool) -> None:
    if download:
        fetch(root)
    readings = _stored(root)
    if not readings:
        print(f"{FOLDER}: no readings: cuda_toolkits.json left as it is", file=sys.stderr)
        return
    data = table(readings)
    # one line per CUDA release keeps a regeneration diffable and the table small
    releases = ",\n".join(
        f"  {json.dumps(cuda)}: {json.dumps(value)}" for cuda, value in data.pop("releases").items()
    )
    head = json.dumps(data, indent=1)[:-2]
    out.write_text(f'{head},\n "releases": {{\n{releases}\n }}\n}}\n', encoding="utf-8")
    print(f"{FOLDER}: {len(readings)} CUDA releases", file=sys.stderr)
