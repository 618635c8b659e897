#!/usr/bin/env python3
"""Regenerate the knowledge of the packages around vLLM from their wheels.

    python tools/gen_stack_knowledge.py /work/stackwheels --download   # fetch, read, write
    python tools/gen_stack_knowledge.py /work/stackwheels              # from what is there
    python tools/gen_stack_knowledge.py /work/stackwheels --only flashinfer-python,torch
    python tools/gen_stack_knowledge.py /work/stackwheels --download --vllm-wheels /work/wheels

The companions and why each version is covered are in ``COMPANIONS``: the versions a covered
vLLM release requires or allows (its ``Requires-Dist``, ``knowledge/data/dependencies.json``),
the versions the covered torch releases pin (triton, NCCL), the versions the covered
companions allow (nvidia-cutlass-dsl for quack-kernels and FlashInfer), and for packages vLLM
imports without declaring them (LMCache) every release from a stated first one. The wheels
live in ``<dir>/<distribution>/``; each is read once (``tools/stack_readers.py``) into
``<dir>/<distribution>/readings/<version>.json``, and ``--download`` deletes a large wheel
once it is read (``--keep`` keeps it), so the whole stack needs a few GB at a time.

Written: ``vllm_doctor/knowledge/data/stack/<distribution>.json`` (requirements, version
checks on partner packages, GPU images, CUDA build; spans over the package's own versions)
and ``vllm_doctor/knowledge/data/stack_errors.json`` (the messages each package raises, with
the versions that raise them), described in docs/knowledge.md. The ``api:`` keys resolve, in
each companion version's own code (``tools/companion_api.py``), every name the covered vLLM
releases use of it (``data/companion_uses.json``); ``--vllm-wheels DIR`` regenerates that table
and ``dependencies.json`` from the vLLM wheels first. ``data/stack_imports.json``: what LMCache
and quack-kernels import from vLLM and the CuTe DSL, against each version of those
(``tools/partner_imports.py``; the vLLM wheels are read from ``<dir>/vllm/``);
``data/transformers_types.json``: the model types of every transformers release from 4.48.0
and vLLM's own config registry per release (``tools/transformers_types.py``);
``data/cuda_toolkits.json``: the GPU architectures each CUDA release's ptxas builds for, from
NVIDIA's nvidia-cuda-nvcc wheels (``tools/cuda_toolkits.py``; ``--only nvidia-cuda-nvcc``);
``data/requires.json``: every released version's Requires-Dist of the packages vLLM's stack
installs or runs with, read from the index's per-file metadata without downloading a wheel
(``tools/pypi_requires.py``; readings kept in ``<dir>/requires/``).

Exit codes: 0 done, 2 bad usage (no readings for a requested package, unknown package).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
for path in (REPO, TOOLS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import companion_api  # noqa: E402
import cuda_toolkits  # noqa: E402
import flashinfer_aot  # noqa: E402
import partner_imports  # noqa: E402
import pypi_requires  # noqa: E402
import stack_messages  # noqa: E402
import stack_readers  # noqa: E402
import transformers_types  # noqa: E402
from extractors.companion_uses import COMPANION_MODULES  # noqa: E402
from packaging.specifiers import InvalidSpecifier, SpecifierSet  # noqa: E402
from packaging.utils import parse_wheel_filename  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

from vllm_doctor.knowledge import DATA_DIR, FORMAT, load  # noqa: E402
from vllm_doctor.knowledge.ranges import dump, fold, table  # noqa: E402

OUT_DIR = DATA_DIR / "stack"
READING_FORMAT = 1
LARGE = 64 << 20  # wheels above this are deleted once read (--download without --keep)
MACHINE = "x86_64"


class UsageError(Exception):
    """Bad input (exit 2)."""


@dataclass(frozen=True)
class Companion:
    """A package around vLLM: whose requirements choose its versions, what to read."""

    why: str
    # distributions whose covered versions' Requires-Dist choose this one's versions
    # ("vllm": every covered vLLM release)
    required_by: tuple[str, ...] = ("vllm",)
    # the versions of these distributions are covered too (a pair that must match)
    same_versions_as: tuple[str, ...] = ()
    first: str | None = None  # for a package no requirement names: every release from this
    messages: bool = True
    # it bundles a ptxas (Triton): which CUDA release and which GPU names it accepts
    ptxas: bool = False
    # other CPU architectures whose wheels are read for their GPU images and CUDA build only
    # (torch's aarch64 wheels carry other architectures, or none: a CPU build)
    other_machines: tuple[str, ...] = ()


COMPANIONS: dict[str, Companion] = {
    "flashinfer-python": Companion(
        "vLLM requires it (0.10.1 on; an extra up to 0.11.0): attention, sampling and MoE "
        "kernels, and the version checks on flashinfer-cubin / flashinfer-jit-cache"
    ),
    "flashinfer-cubin": Companion(
        "vLLM pins it beside flashinfer-python (0.19.0-0.25.1); flashinfer-python refuses to "
        "import with another version, so every covered flashinfer-python version is read too",
        same_versions_as=("flashinfer-python",),
        messages=False,
    ),
    "torch": Companion(
        "vLLM pins it; its compiled kernels decide which GPUs run at all",
        messages=False,
        other_machines=("aarch64",),
    ),
    "triton": Companion(
        "the torch releases vLLM pins pin it; vLLM's and FlashInfer's Triton kernels run on it, "
        "compiled by the ptxas it bundles",
        required_by=("torch",),
        ptxas=True,
    ),
    "nvidia-nccl-cu12": Companion(
        "the torch releases vLLM pins pin it (CUDA 12 builds)",
        required_by=("torch",),
        messages=False,
    ),
    "nvidia-nccl-cu13": Companion(
        "the torch releases vLLM pins pin it (CUDA 13 builds)",
        required_by=("torch",),
        messages=False,
    ),
    "xformers": Companion("vLLM pins it on x86_64 (0.8.0-0.11.2)", messages=False),
    "quack-kernels": Companion("vLLM requires it (0.17.0 on)"),
    "nvidia-cutlass-dsl": Companion(
        "vLLM, quack-kernels and flashinfer-python require it (the CuTe DSL kernels)",
        required_by=("vllm", "quack-kernels", "flashinfer-python"),
        messages=False,
    ),
    "instanttensor": Companion("vLLM requires it (0.18.0 on; an extra up to 0.28.0)"),
    "humming-kernels": Companion("vLLM pins it (0.22.0 on)"),
    "lmcache": Companion(
        "vLLM's LMCache connector imports it without declaring it; every release from 0.3.0 "
        "(the first built for vLLM's v1 engine) is read for its requirements (its torch pin) "
        "and compiled kernels; its messages are left out (45 versions of a large package)",
        required_by=(),
        first="0.3.0",
        messages=False,
    ),
}


# -- which versions -------------------------------------------------------------------------------


def available(dist: str) -> list[Version]:
    """The releases of ``dist`` on the package index (``pip index versions``)."""
    found = stack_readers.index_versions(dist)
    if found is None:
        raise UsageError(f"pip index versions {dist} failed")
    return sorted(v for v in found if not (v.is_prerelease or v.is_devrelease))


def vllm_specs(dist: str) -> set[str]:
    """Every spec of ``dist`` in the covered vLLM releases' Requires-Dist."""
    deps = load("dependencies")
    return {span.value["spec"] or "" for span in deps.spans(dist) if isinstance(span.value, dict)}


def companion_specs(dist: str, of: str, readings: dict[str, dict[str, Any]]) -> set[str]:
    return {
        (r["requires"].get(dist) or {}).get("spec") or ""
        for r in readings.values()
        if dist in r["requires"]
    }


def wanted_versions(
    dist: str, companion: Companion, readings: dict[str, dict[str, dict]], index: list[Version]
) -> list[Version]:
    specs: set[str] = set()
    for source in companion.required_by:
        specs |= (
            vllm_specs(dist)
            if source == "vllm"
            else companion_specs(dist, source, readings.get(source, {}))
        )
    chosen = set()
    for spec in specs:
        try:
            allowed = SpecifierSet(spec)
        except InvalidSpecifier:
            continue
        pinned = [c.version for c in allowed if c.operator in ("==", "===")]
        for text in pinned:  # a pinned pre-release or post-release is covered as written
            with contextlib.suppress(InvalidVersion):
                chosen.add(Version(text))
        if not pinned:
            chosen |= {v for v in index if allowed.contains(v, prereleases=False)}
    for other in companion.same_versions_as:
        chosen |= {Version(v) for v in readings.get(other, {})}
    if companion.first is not None:
        chosen |= {v for v in index if v >= Version(companion.first)}
    return sorted(v for v in chosen if v in set(index) or not index)


# -- download and read ------------------------------------------------------------------------------


def reading_path(root: Path, dist: str, version: str, machine: str = MACHINE) -> Path:
    folder = root / dist / "readings"
    return (folder if machine == MACHINE else folder / machine) / f"{version}.json"


def wheel_for(root: Path, dist: str, version: str, machine: str = MACHINE) -> Path | None:
    folder = root / dist if machine == MACHINE else root / dist / machine
    for path in sorted(folder.glob("*.whl")):
        try:
            _name, found, _build, tags = parse_wheel_filename(path.name)
        except ValueError:
            continue
        if str(found) == version and any(
            t.platform.endswith(machine) or t.platform == "any" for t in tags
        ):
            return path
    return None


def read_other_machine(
    root: Path, dist: str, version: str, machine: str, fetch: bool, keep: bool
) -> dict[str, Any] | None:
    """The GPU images and CUDA build of ``dist`` ``version``'s wheel for ``machine``, kept in
    ``<dir>/<dist>/readings/<machine>/<version>.json`` (the wheel in ``<dir>/<dist>/<machine>/``,
    deleted once read when large)."""
    path = reading_path(root, dist, version, machine)
    with contextlib.suppress(OSError, ValueError):
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("format") == READING_FORMAT:
            return stored
    wheel = wheel_for(root, dist, version, machine)
    if wheel is None and fetch:
        folder = root / dist / machine
        if stack_readers.pip_download(folder, dist, version, stack_readers.PLATFORMS[machine]):
            wheel = wheel_for(root, dist, version, machine)
    if wheel is None:
        return None
    print(f"reading {wheel.name} ...", file=sys.stderr)
    with zipfile.ZipFile(wheel) as archive:
        reading = {
            "format": READING_FORMAT,
            "wheel": wheel.name,
            "version": version,
            "images": stack_readers.images(archive),
            "cuda_version": stack_readers.build_cuda(
                archive, stack_readers.top_level_packages(archive)
            ),
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reading, sort_keys=True), encoding="utf-8")
    if not keep and wheel.stat().st_size > LARGE:
        wheel.unlink()
    return reading


def download(root: Path, dist: str, version: str) -> Path | None:
    if not stack_readers.pip_download(root / dist, dist, version):
        return None
    return wheel_for(root, dist, version)


def read_one(root: Path, dist: str, version: str, companion: Companion) -> dict | None:
    path = reading_path(root, dist, version)
    wheel = wheel_for(root, dist, version)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("format") == READING_FORMAT and (
            wheel is None or stored.get("wheel") == wheel.name
        ):
            if wheel is not None and stored.get("checks_format") != stack_readers.CHECKS_FORMAT:
                with zipfile.ZipFile(wheel) as archive:  # only the checks are read again
                    stored["checks"] = stack_readers.checks_in(archive)
                stored["checks_format"] = stack_readers.CHECKS_FORMAT
                path.write_text(json.dumps(stored, sort_keys=True), encoding="utf-8")
            if wheel is not None and _lacks_ptxas(companion, stored):
                with zipfile.ZipFile(wheel) as archive:  # only the bundled ptxas is read again
                    stored["ptxas"] = stack_readers.ptxas(archive)
                stored["ptxas_format"] = stack_readers.PTXAS_FORMAT
                path.write_text(json.dumps(stored, sort_keys=True), encoding="utf-8")
            if wheel is not None and _lacks_aot(dist, stored):
                with zipfile.ZipFile(wheel) as archive:  # only the JIT modules are read again
                    stored["aot"] = flashinfer_aot.read(archive, _asked(dist))
                path.write_text(json.dumps(stored, sort_keys=True), encoding="utf-8")
            if wheel is not None and _lacks_messages(companion, stored):
                with zipfile.ZipFile(wheel) as archive:  # only the messages are read again
                    found, skipped = stack_readers.messages(
                        archive, stack_readers.top_level_packages(archive)
                    )
                stored.update(
                    messages=found,
                    skipped=dict(skipped),
                    messages_format=stack_readers.MESSAGES_FORMAT,
                )
                path.write_text(json.dumps(stored, sort_keys=True), encoding="utf-8")
            if wheel is not None and _lacks_api(dist, stored):
                with zipfile.ZipFile(wheel) as archive:  # only the API is read again
                    stored["api"] = companion_api.api_in(archive, api_modules(dist))
                stored["api_format"] = companion_api.API_FORMAT
                path.write_text(json.dumps(stored, sort_keys=True), encoding="utf-8")
            return stored
    except (OSError, ValueError):
        pass
    if wheel is None:
        return None
    print(f"reading {wheel.name} ...", file=sys.stderr)
    reading = stack_readers.read(wheel, version, with_messages=companion.messages)
    reading.update({"format": READING_FORMAT, "wheel": wheel.name, "version": version})
    if api_modules(dist):
        with zipfile.ZipFile(wheel) as archive:
            reading["api"] = companion_api.api_in(archive, api_modules(dist))
        reading["api_format"] = companion_api.API_FORMAT
    if dist in AOT_READ:
        with zipfile.ZipFile(wheel) as archive:
            reading["aot"] = flashinfer_aot.read(archive, _asked(dist))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reading, sort_keys=True), encoding="utf-8")
    return reading


def collect(
    root: Path, only: list[str], fetch: bool, keep: bool
) -> dict[str, dict[str, dict[str, Any]]]:
    """dist → version → reading, in dependency order (torch before triton, quack before
    the CuTe DSL, flashinfer-python before flashinfer-cubin)."""
    readings: dict[str, dict[str, dict[str, Any]]] = {}
    for dist, companion in COMPANIONS.items():
        if only and dist not in only:
            readings[dist] = _stored(root, dist)
            continue
        versions: list[str]
        if fetch:
            index = available(dist)
            versions = [str(v) for v in wanted_versions(dist, companion, readings, index)]
        else:
            versions = sorted(_stored_versions(root, dist), key=Version)
        found: dict[str, dict[str, Any]] = {}
        for version in versions:
            reading = read_one(root, dist, version, companion)
            if reading is not None and fetch and _lacks_api(dist, reading):
                reading = None  # read before the API was: the wheel again
            if reading is not None and fetch and _lacks_aot(dist, reading):
                reading = None  # read before its JIT modules were: the wheel again
            if reading is not None and fetch and _lacks_ptxas(companion, reading):
                reading = None  # read before its ptxas was: the wheel again
            if reading is not None and fetch and _lacks_messages(companion, reading):
                reading = None  # read before exceptions' __str__ were: the wheel again
            if reading is None and fetch:
                wheel = download(root, dist, version)
                if wheel is not None:
                    reading = read_one(root, dist, version, companion)
                    if not keep and wheel.stat().st_size > LARGE:
                        wheel.unlink()
            if reading is not None:
                found[version] = reading
                for machine in companion.other_machines:
                    other = read_other_machine(root, dist, version, machine, fetch, keep)
                    if other is not None:
                        reading.setdefault("machines", {})[machine] = other
        readings[dist] = found
    return readings


def api_modules(dist: str) -> set[str]:
    """The top-level modules of ``dist`` whose names vLLM uses (companion_uses' map)."""
    return {module for module, owner in COMPANION_MODULES.items() if owner == dist}


def _lacks_api(dist: str, reading: dict[str, Any]) -> bool:
    return bool(api_modules(dist)) and reading.get("api_format") != companion_api.API_FORMAT


# the packages whose JIT modules, ahead-of-time build and entry points are read
# (tools/flashinfer_aot.py): flashinfer-jit-cache is flashinfer-python's AOT build
AOT_READ = {"flashinfer-python"}


def _asked(dist: str) -> list[str]:
    """The names the covered vLLM releases use of ``dist``, whose JIT modules are read."""
    return sorted(used_names(dist))


def _lacks_aot(dist: str, reading: dict[str, Any]) -> bool:
    """A reading of an AOT_READ package made before the JIT modules were read, by an older
    reader, or for fewer names than the vLLM releases now use."""
    if dist not in AOT_READ:
        return False
    aot = reading.get("aot") or {}
    return aot.get("format") != flashinfer_aot.AOT_FORMAT or aot.get("asked") != _asked(dist)


def _lacks_ptxas(companion: Companion, reading: dict[str, Any]) -> bool:
    return companion.ptxas and reading.get("ptxas_format") != stack_readers.PTXAS_FORMAT


def _lacks_messages(companion: Companion, reading: dict[str, Any]) -> bool:
    """Its messages were read by an older reader (before exceptions' ``__str__``)."""
    return companion.messages and reading.get("messages_format") != stack_readers.MESSAGES_FORMAT


def _stored_versions(root: Path, dist: str) -> set[str]:
    folder = root / dist
    versions = {p.stem for p in (folder / "readings").glob("*.json")}
    for wheel in folder.glob("*.whl"):
        try:
            versions.add(str(parse_wheel_filename(wheel.name)[1]))
        except ValueError:
            continue
    return versions


def _stored(root: Path, dist: str) -> dict[str, dict[str, Any]]:
    out = {}
    for version in _stored_versions(root, dist):
        path = reading_path(root, dist, version)
        try:
            out[version] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for machine in COMPANIONS[dist].other_machines if dist in COMPANIONS else ():
            other = reading_path(root, dist, version, machine)
            with contextlib.suppress(OSError, ValueError):
                out[version].setdefault("machines", {})[machine] = json.loads(
                    other.read_text(encoding="utf-8")
                )
    return out


# -- the tables -----------------------------------------------------------------------------------


def values_of(reading: dict[str, Any]) -> dict[str, Any]:
    """One version's keys in the distribution's table."""
    out: dict[str, Any] = {}
    for dep, req in reading["requires"].items():
        out[f"requires:{dep}"] = req
    for partner, check in reading["checks"].items():
        out[f"check:{partner}"] = check
    _images(out, reading["images"], MACHINE)
    for machine, other in sorted((reading.get("machines") or {}).items()):
        _images(out, other["images"], machine)
        # the build for that machine: a CUDA release, or none (PyPI's aarch64 torch wheels up
        # to 2.10 are CPU builds)
        out[f"cuda@{machine}"] = {"version": other.get("cuda_version"), "wheel": other["wheel"]}
    if reading.get("cuda") is not None or reading.get("cuda_version"):
        out["cuda"] = {
            "major": reading.get("cuda"),
            "version": reading.get("cuda_version"),
            "wheel": reading["wheel"],
        }
    if reading.get("python"):
        out["python"] = {"spec": reading["python"]}
    for path, found in (reading.get("ptxas") or {}).items():
        out[f"ptxas:{path}"] = found
    aot = reading.get("aot") or {}
    for generator, when in (aot.get("aot") or {}).items():
        out[f"aot:{generator}"] = {"when": when}
    for capability, needs in (aot.get("capabilities") or {}).items():
        out[f"aot_capability:{capability}"] = needs
    for name, modules in (aot.get("uses") or {}).items():
        out[f"jit:{name}"] = {"modules": modules}
    return out


def _images(out: dict[str, Any], images: dict[str, Any], machine: str) -> None:
    """``images:<object>@<machine>`` keys of one wheel's shared objects and cubin folders."""
    for obj, value in images.items():
        for group in value["groups"]:
            group.pop("kernels", None)  # readings before names were sampled counted them
        key = f"images:{_family(obj)}@{machine}"
        if key in out:  # two builds of one kernel family (batched_gemm-<a>-<b>, -<c>-<d>)
            merged = {tuple(g["images"]): g for g in out[key]["groups"]}
            for found in value["groups"]:
                known = merged.get(tuple(found["images"]))
                if known is None:
                    merged[tuple(found["images"])] = dict(found)
                else:
                    known["objects"] += found["objects"]
            out[key] = {"file": _family(obj), "groups": list(merged.values())}
        else:
            out[key] = value


_BUILD_SUFFIX = re.compile(r"(?:-[0-9a-f]{7,})+$")


def _family(obj: str) -> str:
    """A cubin folder without the build hashes its name carries (``batched_gemm-0d28130-add42d1``
    → ``batched_gemm``), so one kernel family keeps one key across versions."""
    return "/".join(_BUILD_SUFFIX.sub("", part) for part in obj.split("/"))


# folders of kernel sources a package compiles at run time (FlashInfer 0.7's experimental
# b12x kernels and moe_ep/kernel_src: 8,000 shape checks of DSL code): not what a start-up
# fails on, and three times the size of the rest of the catalogue
KERNEL_SOURCES = {"experimental", "kernel_src"}


# the interpreter's own wording, which a package re-raises with only its values around it
# ("{*} has no attribute {*}"): a log line with these words is Python's message, not the
# package's, and naming the package for it would mislead
INTERPRETER_WORDING = {
    "has no attribute",
    "object has no attribute",
    "module has no attribute",
    "is not defined",
    "name is not defined",
    "object is not callable",
    "object is not subscriptable",
    "object is not iterable",
    "got an unexpected keyword argument",
    "No module named",
    "cannot import name",
    "cannot import name from",
    "division by zero",
    "index out of range",
    "list index out of range",
}


def interpreter_wording(key: str) -> bool:
    """Whether a template's literal text is only the interpreter's own wording."""
    parts = (p.strip(" .,:;'\"`()[]") for p in key.partition(": ")[2].split("{*}"))
    return " ".join(p for p in parts if p) in INTERPRETER_WORDING


def compact_messages(messages: dict[str, Any]) -> dict[str, Any]:
    """The messages as the catalogue keeps them: one site each, file and function (the
    condition is in the package's source), none from kernel-source folders, none that is
    only the interpreter's wording."""
    out = {}
    for key, value in messages.items():
        if interpreter_wording(key):
            continue
        sites = [s[:2] for s in value["sites"] if not KERNEL_SOURCES & set(s[0].split("/")[1:-1])]
        if sites:
            out[key] = {"sites": sites[:1]}
    return out


def used_names(dist: str, uses_path: Path | None = None) -> dict[str, set[str]]:
    """``<module>:<name>`` → every keyword a covered vLLM release passes it, for the names
    the releases use of ``dist`` (``data/companion_uses.json``, tools/gen_knowledge.py)."""
    path = uses_path or DATA_DIR / "companion_uses.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, set[str]] = {}
    for key, spans in (data.get("entries") or {}).items():
        for span in spans:
            value = span.get("value") or {}
            if value.get("package") == dist:
                out.setdefault(key, set()).update(value.get("keywords") or ())
    return out


def api_values(reading: dict[str, Any], used: dict[str, set[str]]) -> dict[str, Any]:
    """``api:<module>:<name>`` for every name vLLM uses that this version's code decides:
    ``{"missing": true}``, ``{"params": [...], "kwargs": bool}`` for a callable, or
    ``{"defined": true}``; a name the code cannot decide (re-exported from another package,
    a lazy ``__getattr__``, an attribute of a value) has no key."""
    api = reading.get("api")
    if not api:
        return {}
    out: dict[str, Any] = {}
    for key in sorted(used):
        entry = companion_api.resolve(api, key)
        if entry is None:
            continue
        if entry.get("missing"):
            out[f"api:{key}"] = {"missing": True}
        elif entry.get("params") is not None:
            out[f"api:{key}"] = {"params": sorted(entry["params"]), "kwargs": entry["kwargs"]}
        else:
            out[f"api:{key}"] = {"defined": True}
    return out


def write(
    readings: dict[str, dict[str, dict[str, Any]]],
    out_dir: Path,
    message_readings: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> None:
    """The tables of ``readings`` (``COMPANIONS``) and the messages of both them and
    ``message_readings`` (``stack_messages.MESSAGE_SOURCES``) in stack_errors.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    messages: dict[str, dict[str, list[dict]]] = {}
    packages: dict[str, list[str]] = {}
    for dist, by_version in readings.items():
        if not by_version:
            continue
        used = used_names(dist)
        per_version = {v: {**values_of(r), **api_values(r, used)} for v, r in by_version.items()}
        data = table(
            f"stack/{dist}",
            per_version,
            distribution=dist,
            why=COMPANIONS[dist].why,
            machine=MACHINE,
            wheels={v: r["wheel"] for v, r in sorted(by_version.items(), key=_order)},
            generated_by="tools/gen_stack_knowledge.py",
        )
        (out_dir / f"{dist}.json").write_text(dump(data), encoding="utf-8")
        versions, spans = fold({v: compact_messages(r["messages"]) for v, r in by_version.items()})
        # a package read for its messages by stack_messages too: those readings (its files
        # chosen) are the catalogue's, not the whole-wheel reading's
        if COMPANIONS[dist].messages and dist not in stack_messages.MESSAGE_SOURCES:
            packages[dist] = versions
            for key, found in spans.items():
                messages.setdefault(key, {})[dist] = [
                    {"first": s["first"], "last": s["last"], "sites": s["value"]["sites"]}
                    for s in found
                ]
    for dist, by_version in (message_readings or {}).items():
        if not by_version:
            continue
        packages[dist] = sorted(by_version, key=Version)
        source = stack_messages.MESSAGE_SOURCES.get(dist)
        for key, found in stack_messages.spans(by_version, compact_messages, source).items():
            messages.setdefault(key, {})[dist] = found
    errors = {
        "kind": "stack_errors",
        "format": FORMAT,
        "description": "Messages the packages around vLLM raise, assert or log as errors "
        "(tools/extractors/errors.py's reader over each package's Python code), by exception "
        "class and template; per package the spans of its versions that raise it, with the "
        "site (file in the package, function).",
        "packages": packages,
        "generated_by": "tools/gen_stack_knowledge.py",
        "entries": dict(sorted(messages.items())),
    }
    (out_dir.parent / "stack_errors.json").write_text(dump(errors), encoding="utf-8")


def _order(item: tuple[str, Any]) -> Version:
    return Version(item[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", type=Path, help="directory of <distribution>/ wheel folders")
    parser.add_argument("--only", help="comma-separated distributions to (re)read")
    parser.add_argument("--download", action="store_true", help="fetch the missing wheels")
    parser.add_argument("--keep", action="store_true", help="keep large wheels once read")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    parser.add_argument(
        "--vllm-wheels",
        type=Path,
        help="first regenerate, from this directory of vLLM wheels, the release tables that "
        "choose and judge the companions (dependencies, companion_uses; with --download, "
        "fetching new releases): a new release of vLLM or of a companion is then one command",
    )
    args = parser.parse_args(argv)
    try:
        if args.vllm_wheels is not None:
            import gen_knowledge

            status = gen_knowledge.main(
                [str(args.vllm_wheels), "--only", "dependencies,companion_uses"]
                + (["--download"] if args.download else [])
            )
            if status != 0:
                raise UsageError(f"gen_knowledge.py {args.vllm_wheels} failed (exit {status})")
        only = [d.strip() for d in (args.only or "").split(",") if d.strip()]
        packages = [*COMPANIONS, *stack_messages.MESSAGE_SOURCES]
        known = [*packages, cuda_toolkits.FOLDER]  # the compilers are read for their tables
        unknown = [d for d in only if d not in known]
        if unknown:
            raise UsageError(
                f"unknown distribution {', '.join(unknown)} (known: {', '.join(known)})"
            )
        if not args.download and not args.wheels.is_dir():
            raise UsageError(f"{args.wheels}: not a directory")
        start = time.perf_counter()
        readings = collect(
            args.wheels, [d for d in only if d in COMPANIONS] or only, args.download, args.keep
        )
        message_readings = stack_messages.collect(
            args.wheels, only, args.download, args.keep, available, vllm_specs
        )
        missing = [
            d
            for d in only
            if d != cuda_toolkits.FOLDER and not (readings.get(d) or message_readings.get(d))
        ]
        if missing:
            raise UsageError(f"no wheels or readings for {', '.join(missing)} in {args.wheels}")
        for dist in packages:
            if not (readings.get(dist) or message_readings.get(dist)):
                print(f"{dist}: no wheels or readings: left out of the tables", file=sys.stderr)
        write(readings, args.out, message_readings)
        partner_imports.write_table(
            args.wheels,
            {
                dist: {
                    v: w for v in readings.get(dist, {}) if (w := wheel_for(args.wheels, dist, v))
                }
                for dist in partner_imports.PARTNERS
            },
            args.out.parent / "stack_imports.json",
            args.download,
        )
        transformers_types.write_table(
            args.wheels, args.out.parent / "transformers_types.json", args.download
        )
        if not only or cuda_toolkits.FOLDER in only:
            cuda_toolkits.write_table(
                args.wheels, args.out.parent / "cuda_toolkits.json", args.download
            )
        # every released version's Requires-Dist of the wider stack, from the index's metadata
        # (no wheel downloaded): what pip check compares
        pypi_requires.write(args.wheels, not args.download, args.out.parent / "requires.json")
        for dist, found in [*readings.items(), *message_readings.items()]:
            print(f"{dist}: {len(found)} versions", file=sys.stderr)
        print(f"done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    except UsageError as err:
        print(f"gen_stack_knowledge: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
