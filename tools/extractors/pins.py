"""The packages a release pins, from its wheel's METADATA, and its CUDA build (KIND "pins").

Keys: a canonical package name from ``Requires-Dist`` (those that matter to a deployment:
torch and its companions, transformers, tokenizers, xformers, flashinfer, triton, ...), and
``cuda`` (the CUDA major version the compiled extensions link against).

Package value::

    {"spec": ">=4.48.2", "pin": null, "min": "4.48.2", "max": null, "marker": "..."}

``pin`` is the version of an ``==`` requirement; ``min``/``max`` the bounds (``max``
exclusive when ``<``, inclusive when ``<=``: ``max_inclusive``); ``marker`` the environment
marker when the requirement has one (platform-specific pins). Requirements that belong to an
extra (``extra == "audio"``) are left out.

``cuda`` value: ``{"major": 12, "from": "libcudart.so.12"}``,
read from the dynamic-library names in the wheel's small compiled extensions; a release read
from an unpacked tree without its wheel beside it has no ``cuda`` key (recorded as a problem).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

KIND = "pins"
TRACKED = (
    "torch",
    "torchvision",
    "torchaudio",
    "transformers",
    "tokenizers",
    "xformers",
    "flashinfer-python",
    "triton",
    "numpy",
    "compressed-tensors",
    "xgrammar",
    "mistral-common",
    "ray",
    "outlines",
    "llguidance",
    "huggingface-hub",
    "flash-attn",
    "nvidia-cutlass-dsl",
    "deep-gemm",
)
META = {
    "key": "canonical package name, or 'cuda'",
    "value": {
        "spec": "the requirement's version specifier as written",
        "pin": "the version of an == requirement",
        "min": "lower bound (>= or >)",
        "max": "upper bound (< or <=, see max_inclusive)",
        "marker": "environment marker (platform-specific requirement)",
        "cuda.major": "CUDA major version the compiled extensions link against",
    },
    "sources": ["*.dist-info/METADATA (Requires-Dist)", "vllm/*.abi3.so (libcudart.so.N)"],
}
_CUDART = re.compile(rb"libcudart\.so\.(\d+)")
_SMALL_SO = 4 << 20


def _bounds(req: Requirement) -> dict[str, Any]:
    value: dict[str, Any] = {
        "spec": str(req.specifier) or None,
        "pin": None,
        "min": None,
        "max": None,
    }
    for spec in req.specifier:
        op, version = spec.operator, spec.version
        if op in ("==", "===") and "*" not in version:
            value["pin"] = version
            value["min"] = value["max"] = version
            value["max_inclusive"] = True
        elif op in (">=", ">", "~="):
            value["min"] = version
            if op == ">":
                value["min_exclusive"] = True
        elif op in ("<", "<="):
            value["max"] = version
            if op == "<=":
                value["max_inclusive"] = True
    if req.marker is not None:
        value["marker"] = str(req.marker)
    return value


def requirements(release) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for req in release.requires_dist():
        if req.marker is not None and "extra" in str(req.marker):
            continue
        name = canonicalize_name(req.name)
        if name in TRACKED:
            out[name] = _bounds(req)
    return out


def cuda_build(release) -> dict[str, Any] | None:
    wheel = release.wheel
    if wheel is None:
        release.problem(
            "CUDA build: no wheel to read compiled extensions from "
            "(an unpacked tree holds no .so files)"
        )
        return None
    with zipfile.ZipFile(wheel) as zf:
        small = sorted(
            (i for i in zf.infolist() if i.filename.endswith(".so") and i.file_size <= _SMALL_SO),
            key=lambda i: i.file_size,
        )
        for info in small:
            found = sorted({int(m) for m in _CUDART.findall(zf.read(info))})
            if len(found) == 1:
                return {"major": found[0], "from": f"libcudart.so.{found[0]}"}
    release.problem("CUDA build: no small compiled extension names a libcudart.so.N")
    return None


def extract(release) -> dict[str, Any]:
    metadata = release.metadata
    out: dict[str, Any] = {}
    if metadata is None:
        release.problem("no *.dist-info/METADATA: no pins")
    else:
        out.update(requirements(release))
        if "torch" not in out:
            release.problem("METADATA has no torch requirement")
    cuda = cuda_build(release)
    if cuda is not None:
        out["cuda"] = cuda
    return out


def audit(table: dict[str, Any], rules_dir: Path) -> list[str]:
    """ENV002 states the torch pin of every release it covers in its comment; check them
    against METADATA (the rule itself compares with the installed vLLM's requirement)."""

    text = (rules_dir / "env" / "ENV002.yaml").read_text(encoding="utf-8")
    comment = " ".join(
        line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")
    )
    releases = table["releases"]
    index = {r: i for i, r in enumerate(releases)}
    problems = []
    stated = re.findall(r"(\d+\.\d+\.\d+) in (\d[\w.]*\d)(?:-(\d[\w.]*\d))?", comment)
    if not stated:
        problems.append("ENV002 states no per-release torch pins to compare")
    for pin, first, stated_last in stated:
        last = stated_last or first
        if first not in index or last not in index:
            problems.append(f"ENV002 names releases {first}-{last} the table does not cover")
            continue
        for release in releases[index[first] : index[last] + 1]:
            span = next(
                (
                    s
                    for s in table["entries"].get("torch", [])
                    if index[s["first"]] <= index[release] <= index[s["last"]]
                ),
                None,
            )
            actual = span["value"].get("pin") if span else None
            if actual != pin:
                problems.append(
                    f"ENV002 says {release} pins torch=={pin}; its METADATA says "
                    f"{span['value'].get('spec') if span else 'no torch pin'}"
                )
    return problems
