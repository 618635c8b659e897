"""Which compiled GPU code can run on a GPU of a given compute capability.

A CUDA shared object carries, per compiled source file, a fat binary holding machine code
(SASS, ``sm_XY``) and/or PTX (``compute_XY``) for some architectures; a raw ``.cubin`` holds
one SASS image. The tables under ``knowledge/data/`` write each image as that string, with
NVIDIA's suffixes: ``a`` (architecture-specific: ``sm_90a``) and ``f`` (family-specific,
CUDA 12.9+: ``sm_100f``). The driver picks an image for the GPU by NVIDIA's compatibility
rules (CUDA C++ Programming Guide, "Binary Compatibility", "PTX Compatibility" and "Feature
Availability"):

* plain SASS ``sm_XY`` runs on capability X.Z for Z >= Y (same major, same or newer minor);
* ``sm_XYf`` runs on the devices of family X with minor >= Y (``sm_100f``: 10.0, 10.3;
  ``sm_120f``: 12.0, 12.1);
* ``sm_XYa`` runs on X.Y only;
* plain PTX ``compute_XY`` is compiled by the driver (JIT) for any capability >= X.Y; the
  ``f``/``a`` PTX variants follow their SASS rule.

Capabilities are integers as vLLM writes them (``major * 10 + minor``: 80, 90, 100, 121).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SASS = "sass"
PTX = "ptx"
NONE = "none"
_IMAGE = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$")


@dataclass(frozen=True)
class Image:
    kind: str  # sass | ptx
    arch: int  # 90, 100, 121 (major * 10 + minor)
    variant: str  # "" | "a" | "f"

    def __str__(self) -> str:
        prefix = "sm" if self.kind == SASS else "compute"
        return f"{prefix}_{self.arch}{self.variant}"


def parse(text: str) -> Image | None:
    """``sm_90a`` → Image(sass, 90, "a"); None for anything else."""
    match = _IMAGE.match(text.strip())
    if not match:
        return None
    kind = SASS if match.group(1) == "sm" else PTX
    return Image(kind, int(match.group(2)), match.group(3))


def split(capability: int) -> tuple[int, int]:
    return divmod(int(capability), 10)


def runs_on(image: Image, capability: int) -> bool:
    """The image can run on the GPU (as machine code, or compiled by the driver from PTX)."""
    major, minor = split(capability)
    image_major, image_minor = split(image.arch)
    if image.variant == "a":
        return image.arch == capability
    if image.variant == "f" or image.kind == SASS:
        return image_major == major and image_minor <= minor
    return (image_major, image_minor) <= (major, minor)  # plain PTX: any newer GPU


def best(images: Iterable[str], capability: int) -> str:
    """``sass`` when machine code runs on the GPU as it is, ``ptx`` when only PTX the driver
    must compile does, ``none`` when nothing does."""
    found = NONE
    for text in images:
        image = parse(text)
        if image is None or not runs_on(image, capability):
            continue
        if image.kind == SASS:
            return SASS
        found = PTX
    return found


def name(capability: int) -> str:
    """``121`` → ``sm_121`` (the GPU's own architecture, for messages)."""
    return f"sm_{int(capability)}"
