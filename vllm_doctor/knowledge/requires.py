"""Each released version's ``Requires-Dist`` of the packages around vLLM (torch, torchvision,
transformers, tokenizers, FlashInfer, xgrammar, pydantic, numpy, ray, ...), read from the
package index by ``tools/pypi_requires.py`` into ``data/requires.json``: what ``pip check``
compares, without the requirements of extras.

Per distribution a table in the layout of the release tables (``knowledge.Table``) over its
own versions, keys ``requires:<distribution>`` (a list of ``spec`` or ``spec ; marker``) and
``platform`` (``x86_64`` where the wheel read is a platform wheel). The file is read on first
use only.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.knowledge import DATA_DIR, FORMAT, KnowledgeError, Table

PATH = DATA_DIR / "requires.json"


@cache
def _data() -> dict[str, Any]:
    try:
        data = json.loads(PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise KnowledgeError(f"knowledge table 'requires' cannot be read: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise KnowledgeError("knowledge table 'requires': unknown format")
    return data


@cache
def distributions() -> tuple[str, ...]:
    """The distributions whose requirements were read."""
    return tuple(sorted(_data().get("distributions") or {}))


@cache
def named() -> tuple[str, ...]:
    """The read distributions and every one their requirements name: the versions to read."""
    names = set(distributions())
    for dist in distributions():
        names |= {key.partition(":")[2] for key in table(dist) if key.startswith("requires:")}
    return tuple(sorted(names))


@cache
def table(distribution: str) -> Table:
    return Table(f"requires/{distribution}", _data()["distributions"][distribution])


def covered_version(distribution: str, version: str) -> str | None:
    """The read version an installed one is (its public version), else None."""
    if distribution not in distributions():
        return None
    try:
        public = Version(Version(str(version)).public)
    except InvalidVersion:
        return None
    for release in table(distribution).releases:
        if Version(release) == public:
            return release
    return None


def versions_within(distribution: str, spec: str) -> list[str]:
    """The read final versions of ``distribution`` that ``spec`` admits (oldest first)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if distribution not in distributions():
        return []
    try:
        allowed = SpecifierSet(spec)
    except InvalidSpecifier:
        return []
    return [r for r in table(distribution).releases if allowed.contains(r, prereleases=False)]
