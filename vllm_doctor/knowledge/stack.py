"""The packages around vLLM, per version of each: what ``tools/gen_stack_knowledge.py`` read
from their wheels (``data/stack/<distribution>.json``).

Each table has the layout of the release tables (``knowledge.Table``) with the package's own
versions as its releases. Keys:

* ``requires:<distribution>`` — one ``Requires-Dist`` (spec, extra, marker);
* ``check:<distribution>`` — a version check the package makes at import time on a partner
  package (``match``: ``equal`` or ``prefix``; ``bypass``: the environment variables that skip
  it; ``file``; ``message``; ``exception``);
* ``images:<object>@<machine>`` — the GPU code of a shared object or a folder of cubins
  (groups of images, as in the ``kernel_images`` table of vLLM's own extensions);
* ``cuda`` — the CUDA major of the wheel's build; ``python`` — its Requires-Python.

A table is read on first use only; a check that names no companion reads none.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.knowledge import DATA_DIR, KnowledgeError, Table, load

STACK_DIR = DATA_DIR / "stack"


@cache
def distributions() -> tuple[str, ...]:
    """The distributions the stack knowledge covers (one table each)."""
    return tuple(sorted(p.stem for p in STACK_DIR.glob("*.json")))


@cache
def named_distributions() -> tuple[str, ...]:
    """The covered distributions and the partners their import-time checks name
    (flashinfer-jit-cache, whose wheels are not on PyPI, is checked by flashinfer-python):
    the packages whose versions the doctor reads."""
    names = set(distributions())
    for dist in distributions():
        found = table(dist)
        if found is not None:
            names |= {key.partition(":")[2] for key in found if key.startswith("check:")}
    return tuple(sorted(names))


def canonical(name: str) -> str:
    """PEP 503's name (packaging.utils' would import packaging.tags: a fifth of a second)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def table(distribution: str) -> Table | None:
    name = canonical(distribution)
    if name not in distributions():
        return None
    try:
        return load(f"stack/{name}")
    except KnowledgeError:
        return None


def covered_version(distribution: str, version: str) -> tuple[Table, str] | tuple[None, str]:
    """The table and the covered version an installed version is read as: the same public
    version (a local label such as ``+cu130`` is the same release of another build); else
    None and why."""
    found = table(distribution)
    if found is None:
        return None, f"the stack knowledge does not cover {distribution}"
    try:
        public = Version(str(version)).public
    except InvalidVersion:
        return None, f"{distribution} {version!r} is not a version"
    for release in found.releases:
        if Version(release) == Version(public):
            return found, release
    first, last = found.releases[0], found.releases[-1]
    return None, (
        f"{distribution} {version} is not among the versions the stack knowledge read "
        f"({first}–{last}, {len(found.releases)} versions)"
    )


def at(distribution: str, version: str) -> dict[str, Any] | None:
    """Every key of the package's table at this version (None when the version is not
    covered)."""
    found, release = covered_version(distribution, version)
    return None if found is None else found.at(release)
