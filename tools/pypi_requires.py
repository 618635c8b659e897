"""Every released version's ``Requires-Dist`` of the packages around vLLM, read from the
package index without installing anything or downloading a whole wheel.

    python tools/pypi_requires.py /work/stackwheels            # fetch what is missing, write
    python tools/pypi_requires.py /work/stackwheels --offline  # from the readings kept there

For each distribution in ``REQUIRES_OF`` the simple index (``Accept:
application/vnd.pypi.simple.v1+json``) lists its files; for each version uploaded since
``SINCE`` one wheel is chosen (CPython 3.12 manylinux x86_64, else a pure ``py3-none-any``, else
another x86_64 wheel) and its ``METADATA`` read: from ``<url>.metadata`` where the index
serves PEP 658 / 714 metadata, else by HTTP range requests on the wheel (the zip's central
directory, then the one member), as pip's lazy wheel does. What ``pip check`` would compare is
kept: a requirement on another covered distribution (``COVERED``), its spec and its marker,
without the requirements of extras (an extra's requirements hold only when the extra was
installed, which no list of packages says). The readings are kept in
``<dir>/requires/<distribution>.json`` (a version once read is never fetched again).

Written: ``vllm_doctor/knowledge/data/requires.json``: per distribution a table in the layout of
the release tables (``knowledge.Table``) over its own versions, with keys ``requires:<dist>``
(``{"spec", "marker"}``) and ``platform`` (``x86_64`` where the wheel read is a platform
wheel, whose requirements another platform's wheel may not share). Run by
``tools/gen_stack_knowledge.py`` as one of its tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from email.parser import Parser
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from packaging.requirements import InvalidRequirement, Requirement  # noqa: E402
from packaging.utils import canonicalize_name, parse_wheel_filename  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

from vllm_doctor.knowledge import DATA_DIR, FORMAT  # noqa: E402
from vllm_doctor.knowledge.ranges import fold  # noqa: E402

INDEX = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
SINCE = "2024-01-01"  # vLLM 0.3: nothing older runs beside a covered vLLM release
READING_FORMAT = 1
OUT = DATA_DIR / "requires.json"

# the packages whose requirements are read: what vLLM's stack installs or commonly runs with
REQUIRES_OF: tuple[str, ...] = (
    "torch", "torchvision", "torchaudio", "triton", "xformers",
    "flashinfer-python", "flashinfer-cubin",
    "transformers", "tokenizers", "huggingface-hub", "safetensors", "accelerate", "peft",
    "xgrammar", "llguidance", "outlines", "outlines-core", "lm-format-enforcer",
    "compressed-tensors", "mistral-common", "openai", "pydantic", "fastapi", "starlette",
    "numpy", "ray", "lmcache", "nixl", "bitsandbytes", "cupy-cuda12x", "numba",
    "opencv-python-headless", "opencv-python", "quack-kernels", "nvidia-cutlass-dsl",
    "instanttensor", "humming-kernels", "datasets", "sentence-transformers", "gguf",
    "torchcodec", "tiktoken", "scipy", "pandas", "deepspeed", "auto-gptq", "gptqmodel",
    "autoawq", "optimum", "vllm-flash-attn", "flash-attn", "timm", "diffusers", "trl",
    "llmcompressor", "uvicorn", "openai-harmony", "anthropic", "protobuf", "sentencepiece",
)  # fmt: skip
# the CUDA wheels torch and the kernel packages pin (targets only: their own requirements
# are on each other, unpinned)
_CUDA_LIBRARIES = (
    "cublas", "cuda-cupti", "cuda-nvrtc", "cuda-runtime", "cudnn", "cufft", "cufile", "curand",
    "cusolver", "cusparse", "cusparselt", "nccl", "nvjitlink", "nvtx", "nvshmem",
)  # fmt: skip
CUDA_WHEELS: tuple[str, ...] = tuple(
    f"nvidia-{lib}-cu{major}" for major in (12, 13) for lib in _CUDA_LIBRARIES
)
# other packages the read ones pin or bound closely (targets only). Build tools (setuptools,
# wheel) are left out: torch requires a recent setuptools for compiling C++ extensions, which
# serving does not do, and images keep the interpreter's old one without harm
TARGETS: tuple[str, ...] = (
    "nvidia-ml-py", "nvidia-cudnn-frontend", "pydantic-core", "llvmlite", "fsspec", "jinja2",
    "sympy", "networkx", "typing-extensions", "pillow", "filelock", "regex", "pyzmq", "msgspec",
    "cloudpickle", "packaging", "einops",
)  # fmt: skip
# a requirement is kept when it names one of these: the versions the doctor reads
COVERED: frozenset[str] = frozenset((*REQUIRES_OF, *CUDA_WHEELS, *TARGETS))
_PREFERRED = ("cp312-cp312-manylinux", "py3-none-any", "py2.py3-none-any")


class IndexError_(Exception):
    """The index could not be read (exit 2)."""


def _get(url: str, accept: str | None = None, tries: int = 3) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.read()
        except OSError as err:
            if attempt == tries - 1:
                raise IndexError_(f"{url}: {err}") from None
            time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def _x86_64(filename: str) -> bool:
    try:
        *_, tags = parse_wheel_filename(filename)
    except ValueError:
        return False
    return any(t.platform.endswith("x86_64") or t.platform == "any" for t in tags)


class _RangeFile:
    """A remote file read by HTTP range requests, for ``zipfile`` (seek, tell, read): each
    request reads ahead ``AHEAD`` bytes, and the file's tail (the central directory of most
    wheels) is read once."""

    AHEAD = 1 << 16

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0
        self.start, self.buffer = size, b""

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        if not (self.start <= self.pos and end <= self.start + len(self.buffer)):
            first = (
                max(0, self.size - 4 * self.AHEAD)
                if self.size - self.pos < 4 * self.AHEAD
                else self.pos
            )
            last = max(end, min(self.size, first + self.AHEAD))
            self.start, self.buffer = first, self._fetch(first, last)
        data = self.buffer[self.pos - self.start : end - self.start]
        self.pos = end
        return data

    def _fetch(self, first: int, last: int) -> bytes:
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={first}-{last - 1}"})
        for attempt in range(3):
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    data = response.read()
                break
            except OSError as err:
                if attempt == 2:
                    raise IndexError_(f"{self.url}: {err}") from None
                time.sleep(1 + attempt)
        if len(data) != last - first:
            raise IndexError_(f"{self.url}: the server ignored the range request")
        return data


def wheel_metadata(file: dict[str, Any]) -> str:
    """The wheel's METADATA: PEP 658's file where the index has one, else the one member."""
    if file.get("core-metadata") or file.get("data-dist-info-metadata"):
        return _get(file["url"] + ".metadata").decode("utf-8", "replace")
    with zipfile.ZipFile(_RangeFile(file["url"], file["size"])) as zf:  # type: ignore[arg-type]
        member = next(
            n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        )
        return zf.read(member).decode("utf-8", "replace")


def choose_files(index: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One wheel with core metadata per version uploaded since ``SINCE`` (not yanked)."""
    by_version: dict[str, list[dict[str, Any]]] = {}
    for file in index.get("files", ()):
        name = file.get("filename", "")
        if not name.endswith(".whl") or file.get("yanked"):
            continue
        if (file.get("upload-time") or "9999") < SINCE or not _x86_64(name):
            continue
        try:
            version = str(parse_wheel_filename(name)[1])
        except ValueError:
            continue
        by_version.setdefault(version, []).append(file)
    chosen = {}
    for version, files in by_version.items():
        ranked = sorted(
            files,
            key=lambda f: next(
                (i for i, tag in enumerate(_PREFERRED) if tag in f["filename"]), len(_PREFERRED)
            ),
        )
        chosen[version] = ranked[0]
    return chosen


def requirements(metadata_text: str) -> dict[str, list[str]]:
    """The requirements on covered distributions, each as ``spec`` or ``spec ; marker`` (the
    requirement's text without its name; several lines for one package, one per platform or
    Python, stay apart). Requirements of an extra and direct references are left out."""
    out: dict[str, list[str]] = {}
    for line in Parser().parsestr(metadata_text).get_all("Requires-Dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        marker = str(req.marker) if req.marker else ""
        # an unversioned requirement is met by any version (a missing package is not judged)
        if name not in COVERED or "extra" in marker or req.url or not req.specifier:
            continue
        out.setdefault(name, []).append(
            f"{req.specifier} ; {marker}" if marker else str(req.specifier)
        )
    return {name: sorted(specs) for name, specs in out.items()}


def read_distribution(root: Path, dist: str, offline: bool) -> dict[str, dict[str, Any]]:
    """``{version: {"file", "requires", "platform"}}``, fetching what the readings lack."""
    path = root / "requires" / f"{dist}.json"
    stored: dict[str, Any] = {}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") == READING_FORMAT:
            stored = data["versions"]
    if offline:
        return stored
    index = json.loads(_get(f"{INDEX}/{dist}/", SIMPLE_JSON))
    files = {v: f for v, f in choose_files(index).items() if v not in stored}

    def one(item: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        version, file = item
        text = wheel_metadata(file)
        platform = "any" if file["filename"].endswith("-any.whl") else "x86_64"
        return version, {
            "file": file["filename"],
            "platform": platform,
            "requires": requirements(text),
        }

    with ThreadPoolExecutor(max_workers=16) as pool:
        for version, reading in pool.map(one, sorted(files.items())):
            stored[version] = reading
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"format": READING_FORMAT, "versions": stored}, sort_keys=True),
        encoding="utf-8",
    )
    print(f"{dist}: {len(stored)} versions ({len(files)} read now)", file=sys.stderr)
    return stored


def _ordered(versions: Iterable[str]) -> list[str]:
    valid = []
    for version in versions:
        try:
            Version(version)
        except InvalidVersion:
            continue
        valid.append(version)
    return sorted(valid, key=Version)


def table_of(dist: str, readings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    per_version: dict[str, dict[str, Any]] = {}
    for version in _ordered(readings):
        reading = readings[version]
        keys: dict[str, Any] = {
            f"requires:{d}": r for d, r in reading["requires"].items() if d in COVERED
        }
        if reading["platform"] != "any":
            keys["platform"] = reading["platform"]
        per_version[version] = keys
    releases, entries = fold(per_version)
    return {"format": FORMAT, "releases": releases, "entries": entries}


def write(root: Path, offline: bool, out: Path = OUT) -> dict[str, int]:
    tables = {}
    for dist in REQUIRES_OF:
        readings = read_distribution(root, dist, offline)
        if readings:
            tables[dist] = table_of(dist, readings)
    if not tables:  # offline with no readings kept: the table in place stays as it is
        print(f"no requirement readings in {root / 'requires'}: {out.name} kept", file=sys.stderr)
        return {}
    data = {
        "kind": "requires",
        "format": FORMAT,
        "generated_by": "tools/pypi_requires.py",
        "since": SINCE,
        "index": INDEX,
        "distributions": tables,
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    out.write_text(re.sub(r'(,"[a-z0-9-]+":\{"entries")', r"\n\1", text) + "\n", encoding="utf-8")
    return {dist: len(t["releases"]) for dist, t in tables.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readings", type=Path, help="directory kept between runs")
    parser.add_argument("--offline", action="store_true", help="only the readings kept")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        counts = write(args.readings, args.offline, args.out)
    except IndexError_ as err:
        print(f"pypi_requires: {err}", file=sys.stderr)
        return 2
    print(f"{len(counts)} distributions, {sum(counts.values())} versions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
