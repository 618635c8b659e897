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


@dataclass(frozen=True)
class GpuMatch:
    family: GpuFamily
    memory_gib: int | None  # this device's memory when the name or the family settles it
    how: str  # for the evidence: "GPU table (knowledge/data/gpus.json): family V100 / V100S"

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
            ),
        )
        for entry in data["families"]
    )


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
            stated = [int(m) for m in _NAME_MEMORY.findall(name)]
            # "A100-SXM4-80GB" states it; "GH200 480GB" states CPU+GPU memory, not the GPU's
            memory = next((m for m in stated if m in family.memory_options), None)
            if memory is None and len(family.memory_options) == 1:
                memory = family.memory_options[0]
            return GpuMatch(family, memory, f"GPU table ({TABLE_NAME}): {family.name}")
    return None


def capability_of(name: str) -> int | None:
    """Compute capability (major*10+minor) of an NVIDIA GPU name, or None."""
    match = lookup(name)
    return match.capability if match else None
