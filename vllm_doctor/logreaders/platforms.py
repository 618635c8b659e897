"""A machine vLLM has no build for: pip falling back to vLLM's source archive or finding no
release at all, vLLM unable to tell its platform on macOS, a native Windows install.

What each release publishes (knowledge ``wheel_platforms``: the platform tags of its wheels on
PyPI) and the Python it requires (knowledge ``dependencies``: ``Requires-Python``) say why
pip cannot install a release here and which release it can.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from vllm_doctor.logreaders import LogReading, platform_of, value_at

_SDIST = re.compile(r"vllm-(\d+\.\d+[\w.]{0,20}?)\.tar\.gz")
_BUILD_FAILED = re.compile(
    r"Getting requirements to build (?:wheel|editable) \.\.\. error|"
    r"Preparing metadata \(pyproject\.toml\) \.\.\. error"
)
_NO_VERSION = re.compile(
    r"Could not find a version that satisfies the requirement vllm==(\d+\.\d+[\w.]{0,20})"
)
_MACHINE = re.compile(r"\b(aarch64|arm64|x86_64|ppc64le|s390x)\b")
_INFER = "Failed to infer device type"


@lru_cache(maxsize=1)
def _wheels() -> dict[str, dict]:
    from vllm_doctor.knowledge import DATA_DIR

    return json.loads((DATA_DIR / "wheel_platforms.json").read_text(encoding="utf-8"))["releases"]


def read(text: str, version: str | None) -> LogReading | None:
    sdist = _SDIST.search(text)
    if sdist and _BUILD_FAILED.search(text):
        return _source_build(sdist.group(1), text)
    missing = _NO_VERSION.search(text)
    if missing:
        return _no_version(missing.group(1), text)
    if _INFER in text and platform_of(text) == "macos":
        return LogReading(
            "vLLM could not tell the platform on macOS: the installed vLLM predates macOS "
            "detection (vLLM 0.8.0, the oldest release the knowledge covers, detects macOS as a CPU "
            "platform in vllm/platforms/__init__.py); PyPI's wheels are for Linux, so on macOS vLLM "
            "is built from source",
            [
                "git clone https://github.com/vllm-project/vllm && cd vllm && "
                "pip install -r requirements/cpu.txt && pip install -e .   # a current release, CPU build"
            ],
            [
                "the traceback's paths are macOS paths (/Users/...)",
                f"vLLM raised: RuntimeError: {_INFER}",
            ],
        )
    return None


def _machine(text: str) -> str | None:
    found = _MACHINE.search(text)
    return {"arm64": "aarch64"}.get(found.group(1), found.group(1)) if found else None


def _has_wheel(release: str, machine: str) -> bool:
    return any(tag.endswith(machine) for tag in _wheels().get(release, {}).get("platforms", []))


def _source_build(release: str, text: str) -> LogReading | None:
    machine = _machine(text)
    published = _wheels().get(release)
    if published is None or (machine is not None and _has_wheel(release, machine)):
        return None
    # the wheels are cp38-abi3: any CPython 3.8+ on a machine they are built for takes one,
    # so a source build means a machine they are not built for
    machines = sorted(
        {
            tag.rsplit("_", 1)[-1] if not tag.endswith("x86_64") else "x86_64"
            for tag in published["platforms"]
        }
    )
    read_lines = [
        f"pip downloaded vllm-{release}.tar.gz and failed to build it",
        f"vLLM {release} publishes wheels for {', '.join(published['platforms']) or 'no platform'} "
        "only (knowledge: wheel_platforms, from PyPI)"
        + (f"; the machine is {machine}" if machine else ""),
    ]
    fixes = []
    for arch in [machine] if machine else ["aarch64"]:
        with_wheel = [r for r in _wheels() if _has_wheel(r, arch)]
        if with_wheel:
            read_lines.append(f"the first release with an {arch} wheel is {with_wheel[0]}")
            fixes.append(f"pip install 'vllm>={with_wheel[0]}'   # a release with an {arch} wheel")
    fixes.append(
        "or docker run --gpus all vllm/vllm-openai:latest   # images for linux/amd64 and "
        "linux/arm64"
    )
    where = machine or f"this machine (not {', '.join(machines)})"
    return LogReading(
        f"vLLM {release} has no wheel for {where}: pip fell back to building its source archive, "
        "which needs a complete CUDA build environment",
        fixes,
        read_lines,
    )


def _no_version(release: str, text: str) -> LogReading | None:
    published = _wheels().get(release)
    if published is None:
        return None
    python, _ = value_at("dependencies", "python", release)
    needs = python.get("spec") if python else None
    read_lines = [
        f"pip found no vllm=={release} it can install",
        f"vLLM {release} publishes wheels for {', '.join(published['platforms'])}"
        + (" and a source archive" if published.get("sdist") else "")
        + " (knowledge: wheel_platforms, from PyPI)",
    ]
    if needs:
        read_lines.append(
            f"vLLM {release} requires Python {needs} (knowledge: dependencies, Requires-Python)"
        )
    if not needs or not published.get("sdist"):
        return None
    # a source archive exists, so pip refuses the release itself: its Python requirement
    return LogReading(
        f"vLLM {release} requires Python {needs}; pip skips every release whose Requires-Python "
        "the running Python does not meet (it then finds no version at all)",
        [
            f"python3 --version   # must satisfy {needs}",
            f"uv venv --python 3.12 && uv pip install vllm=={release}   # or any Python {needs}",
        ],
        read_lines,
    )
