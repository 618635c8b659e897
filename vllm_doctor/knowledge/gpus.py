"""GPU names → compute capability (NVIDIA) or gfx target (AMD), and memory, by family.

The table (``data/gpus.json``) is curated from NVIDIA's CUDA GPU list and Jetson module pages
and AMD's ROCm GPU specifications, with the AMD targets vLLM itself checks for
(``vllm/platforms/rocm.py``). Families are matched by a regex searched in the device name, so
the variants real reports print resolve: ``Tesla V100S-PCIE-32GB``, ``NVIDIA GeForce RTX 4090
D``, ``NVIDIA A100-SXM4-80GB``, ``NVIDIA H100 80GB HBM3``, ``AMD Instinct MI300X``. The table
is read on first use only.

A value from here is inferred from a name, never measured: callers mark it so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "gpus.json"
TABLE_NAME = "knowledge/data/gpus.json"
_NAME_MEMORY = re.compile(r"(\d+)\s*GB\b", re.IGNORECASE)


@dataclass(frozen=True)
class GpuFamily:
    name: str  # the family as the table names it ("V100 / V100S")
    vendor: str  # nvidia | amd
    arch: str  # Volta, Hopper, CDNA 3, ...
    segment: str  # datacenter | workstation | consumer | embedded
    capability: int | None  # NVIDIA compute capability, major*10+minor
    gfx: str | None  # AMD target
    memory_options: tuple[int, ...] = field(default=())  # GiB the family ships with
    source: str = ""
    spellings: tuple[str, ...] = field(default=())  # how people write it ("RTX 4090")
    # the host CPU architecture where the GPU comes only in systems with one (GB10, Grace
    # superchips, Jetson modules: aarch64); None where hosts differ
    machine: str | None = None

    @property
    def compute(self) -> str:
        """``sm_89`` or the gfx target, as vLLM and the kernels name it."""
        return f"sm_{self.capability}" if self.capability is not None else str(self.gfx)


@dataclass(frozen=True)
class GpuMatch:
    family: GpuFamily
    memory_gib: int | None  # this device's memory when the name or the family settles it
    how: str  # for the evidence: "GPU table (knowledge/data/gpus.json): family V100 / V100S"
    # the name as the table reads it, for a name typed on the command line ("4090" → "RTX
    # 4090"); "" from lookup, which keeps the device's own name
    name: str = ""

    @property
    def capability(self) -> int | None:
        return self.family.capability

    @property
    def gfx(self) -> str | None:
        return self.family.gfx


@lru_cache(maxsize=1)
def _families() -> tuple[tuple[str, GpuFamily], ...]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return tuple(
        (
            entry["match"],
            GpuFamily(
                entry["name"],
                entry["vendor"],
                entry["arch"],
                entry["segment"],
                entry.get("capability"),
                entry.get("gfx"),
                tuple(entry.get("memory_gib") or ()),
                entry.get("source", ""),
                tuple(entry.get("spellings") or ()),
                entry.get("machine"),
            ),
        )
        for entry in data["families"]
    )


def families() -> tuple[GpuFamily, ...]:
    """Every family of the table, most specific first (``--gpu list``, completion)."""
    return tuple(family for _, family in _families())


@lru_cache(maxsize=1)
def amd_targets() -> tuple[str, ...]:
    """The AMD gfx targets vLLM's ROCm platform checks for (newest covered release)."""
    return tuple(json.loads(DATA.read_text(encoding="utf-8")).get("amd_targets") or ())


@lru_cache(maxsize=256)
def lookup(name: str) -> GpuMatch | None:
    """The family of a device name (first match, most specific first), or None."""
    for pattern, family in _families():
        # re compiles (and caches) each pattern on first use: a lookup compiles only the
        # families before the one that matches
        if re.search(pattern, name, re.IGNORECASE):
            stated = stated_memory(name)
            # "A100-SXM4-80GB" states it; "GH200 480GB" states CPU+GPU memory, not the GPU's
            memory = next((m for m in stated if m in family.memory_options), None)
            if memory is None and len(family.memory_options) == 1:
                memory = family.memory_options[0]
            return GpuMatch(family, memory, f"GPU table ({TABLE_NAME}): {family.name}")
    return None


def stated_memory(name: str) -> list[int]:
    """The sizes a device name states ("A100-SXM4-80GB" → [80])."""
    return [int(m) for m in _NAME_MEMORY.findall(name)]


def without_memory(name: str) -> str:
    """A device name with the sizes it states left out ("GH200 480GB" → "GH200"), to name a
    size of the family after it."""
    return " ".join(_NAME_MEMORY.sub(" ", name).split())


def capability_of(name: str) -> int | None:
    """Compute capability (major*10+minor) of an NVIDIA GPU name, or None."""
    match = lookup(name)
    return match.capability if match else None


# -- names as people type them -----------------------------------------------------------------
# "80g", "80 GB", "80GiB" → "80GB" (as device names write it, and as lookup reads it)
_TYPED_MEMORY = re.compile(r"(?<![A-Za-z\d])(\d+)\s*(?:gib|gb|g)\b", re.IGNORECASE)
# "rtx4090", "RTX-4090" → "RTX 4090"; "rx7900xtx" → "RX 7900XTX"
_GLUED_PREFIX = re.compile(r"\b(rtx|gtx|gt|rx)[\s_-]*(?=\d)", re.IGNORECASE)
# "4090d", "3090ti", "7900xtx" → "4090 D", "3090 Ti", "7900 XTX"
_GLUED_SUFFIX = re.compile(r"(?<=\d)(ti|d|super|xtx|xt|gre)\b", re.IGNORECASE)
_NUMBER = re.compile(r"^\d{3,5}$")
_VARIANTS = {"ti", "super", "d", "xt", "xtx", "gre"}


@dataclass(frozen=True)
class Ambiguous:
    """A typed name several families answer to (``6000``: RTX PRO 6000, RTX 6000 Ada, ...)."""

    typed: str
    candidates: tuple[GpuFamily, ...]


@lru_cache(maxsize=1)
def _vocabulary() -> dict[str, str]:
    """Each word of the spellings in the table's own case ("ti" → "Ti", "rtx" → "RTX")."""
    return {w.lower(): w for f in families() for s in f.spellings for w in s.split()}


def _tidy(text: str) -> str:
    """A typed name in the table's spelling: words it knows in its case, the rest upper case
    ("h100 80gb" → "H100 80GB")."""
    vocabulary = _vocabulary()
    return " ".join(vocabulary.get(w.lower(), w.upper()) for w in text.split())


def normalise(text: str) -> str:
    """A typed GPU name with its separators, memory size and glued words spelled out."""
    words = " ".join(str(text).replace("_", " ").split())
    words = _TYPED_MEMORY.sub(lambda m: f"{m.group(1)}GB", words)
    words = _GLUED_PREFIX.sub(lambda m: f"{m.group(1)} ", words)
    words = _GLUED_SUFFIX.sub(lambda m: f" {m.group(1)}", words)
    # a dash between words ("h100-80gb", "RTX-4090") is a space, one inside a word is kept
    return " ".join(re.sub(r"(?<=\w)-(?=\w)", " ", words).split())


def _by_model_word(words: str) -> list[tuple[GpuFamily, str]]:
    """For a name the table's patterns do not find, that starts with a model word alone
    ("4090", "3090 Ti", "A6000"): each family one of whose spellings has that word, with the
    typed words after the spelling's prefix (or the whole spelling when nothing follows)."""
    word, _, rest = words.partition(" ")
    found: dict[str, tuple[GpuFamily, str]] = {}
    if not any(c.isdigit() for c in word):  # "RTX 9999": a brand word names no model
        return []
    for family in families():
        for spelling in family.spellings:
            parts = spelling.split()
            lowered = [p.lower() for p in parts]
            if word.lower() not in lowered:
                continue
            at = lowered.index(word.lower())
            # "1080" → "GTX 1080" (not the spelling "GTX 1080 Ti"); "6000" → "RTX 6000 Ada"
            # where "RTX 6000" alone is another family, but "4060" is no "4060 Ti" (a
            # variant is typed when it is meant)
            short = " ".join([*parts[: at + 1], rest])
            variant = bool(lowered[at + 1 :]) and set(lowered[at + 1 :]) <= _VARIANTS
            whole = () if rest or (variant and lookup(short)) else (spelling,)
            for candidate in (short, *whole):
                match = lookup(candidate)
                if match is not None and match.family == family:
                    found.setdefault(family.name, (family, candidate))
                    break
    return list(found.values())


def resolve(text: str) -> GpuMatch | Ambiguous | None:
    """A GPU name as people type it (``4090``, ``rtx4090``, ``RTX 4090``, ``h100-80gb``,
    ``MI300X``, ``gb10``): its match, the families it could be, or None. The match's ``name``
    is the typed name as the table spells it, which the facts then carry."""
    words = normalise(text)
    if not words:
        return None
    # a model number alone is looked up by the spellings, never by a pattern that may find
    # it inside another name ("6000" is in "Quadro P6000" as well as "RTX PRO 6000")
    bare_number = _NUMBER.match(words.split()[0]) is not None
    match = None if bare_number else lookup(words)
    if match is not None:
        return GpuMatch(match.family, match.memory_gib, match.how, _tidy(words))
    found = _by_model_word(words)
    if len(found) > 1:
        return Ambiguous(str(text), tuple(family for family, _ in found))
    if found:
        match = lookup(found[0][1])
        if match is not None:
            return GpuMatch(match.family, match.memory_gib, match.how, _tidy(found[0][1]))
    return None


def suggestions(text: str, limit: int = 4) -> list[str]:
    """The spellings closest to a name the table does not know, for the error message."""
    import difflib

    words = normalise(text).lower()
    spelled = {s.lower(): s for f in families() for s in f.spellings}
    if _NUMBER.match(words):  # a model number alone: compare it with the spellings' numbers
        numbers: dict[str, list[str]] = {}
        for lowered, spelling in spelled.items():
            for word in lowered.split():
                if _NUMBER.match(word):
                    numbers.setdefault(word, []).append(spelling)
        close = difflib.get_close_matches(words, list(numbers), n=limit, cutoff=0.5)
        return list(dict.fromkeys(s for c in close for s in numbers[c][:1]))[:limit]
    close = difflib.get_close_matches(words, list(spelled), n=limit, cutoff=0.5)
    return [spelled[c] for c in close]


def embedded_family(names: list[Any]) -> str | None:
    """The NVIDIA embedded family (Jetson) all the named GPUs belong to, by the GPU table
    (segment embedded), else None."""
    matches = [lookup(str(name)) for name in names]
    families = {m.family.name for m in matches if m is not None}
    if (
        matches
        and all(m is not None and m.family.segment == "embedded" for m in matches)
        and all(m is not None and m.family.vendor == "nvidia" for m in matches)
        and len(families) == 1
    ):
        return families.pop()
    return None
