"""Release knowledge: what each vLLM release itself accepts, as versioned data.

The tables under ``knowledge/data/`` are generated from the release wheels by
``tools/gen_knowledge.py`` (read as zip files, never installed or imported), except the
curated ones it names. Every table has one layout::

    {"kind": "options", "format": 1, "releases": ["0.8.0", ..., "0.33.0"],
     "entries": {KEY: [{"first": "0.8.0", "last": "0.10.2", "value": ...}, ...]}}

An entry's value holds in every release of ``releases`` from ``first`` to ``last`` (both
included); a key absent from a release has no span covering it. Tables are read on first
use only, so a ``check`` that needs none of them pays nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

DATA_DIR = Path(__file__).resolve().parent / "data"
FORMAT = 1


class KnowledgeError(RuntimeError):
    """A shipped table is missing or malformed (a packaging bug, not bad user input)."""


@dataclass(frozen=True)
class Span:
    first: str
    last: str
    value: Any


@dataclass(frozen=True)
class ReleaseMatch:
    """Which covered release a vLLM version is judged by.

    ``release`` is None when the version lies outside the covered releases; ``exact`` is
    False for dev builds, release candidates and local builds judged by the release they
    descend from; ``note`` says so in words for the evidence.
    """

    release: str | None
    exact: bool
    note: str
    # for a dev build or release candidate: the first covered release of a later minor
    # series. The build lies between ``release`` and ``upper`` (nightlies carry changes that
    # only ``upper`` releases), so only what the two releases agree on holds for it.
    upper: str | None = None
    # every covered release the build may resemble, ``release`` to ``upper`` (a rule holds for
    # the build only where it holds for all of them: engine/over_releases.py)
    candidates: tuple[str, ...] = ()
    # the git commit the version names (``+g<hash>``): where the build's code is exactly
    commit: str | None = None


class Table:
    def __init__(self, kind: str, data: dict[str, Any]):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise KnowledgeError(f"knowledge table {kind!r}: unknown format")
        self.kind = kind
        self.meta: dict[str, Any] = {k: v for k, v in data.items() if k != "entries"}
        self.releases: list[str] = list(data.get("releases") or [])
        self._index = {r: i for i, r in enumerate(self.releases)}
        self._entries: dict[str, list[dict[str, Any]]] = data.get("entries") or {}
        self._at: dict[str, dict[str, Any]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> Iterator[str]:
        return iter(self._entries)

    def raw_spans(self, key: str) -> list[dict[str, Any]]:
        """The spans of ``key`` as stored (``first``, ``last``, ``value``), oldest first; for
        hot paths that read every key (do not modify them)."""
        return self._entries.get(key, [])

    def spans(self, key: str) -> list[Span]:
        return [Span(e["first"], e["last"], e.get("value")) for e in self._entries.get(key, ())]

    def _covers(self, entry: dict[str, Any], index: int) -> bool:
        return self._index[entry["first"]] <= index <= self._index[entry["last"]]

    def get(self, key: str, release: str) -> Span | None:
        """The span of ``key`` that covers ``release`` (a release of this table), if any."""
        index = self._index[release]
        for entry in self._entries.get(key, ()):
            if self._covers(entry, index):
                return Span(entry["first"], entry["last"], entry.get("value"))
        return None

    def at(self, release: str) -> dict[str, Any]:
        """Every key present in ``release`` with its value there (computed once per release:
        a check judged over every covered release asks again; do not modify it)."""
        cached = self._at.get(release)
        if cached is not None:
            return cached
        if self._at:  # a second release: a check judged over every covered release asks all
            self._fill_at()
            return self._at[release]
        index = self._index[release]
        out: dict[str, Any] = {}
        for key, spans in self._by_index:
            for first, last, value in spans:
                if first <= index <= last:
                    out[key] = value
                    break
        self._at[release] = out
        return out

    def _fill_at(self) -> None:
        """``at`` of every release in one pass over the spans (each span's value put in the
        releases it covers, the first covering span kept, in the table's key order: what
        ``at`` computes release by release); a release already asked keeps its object."""
        every: list[dict[str, Any]] = [{} for _ in self.releases]
        for key, spans in self._by_index:
            for first, last, value in spans:
                for out in every[first : last + 1]:
                    if key not in out:
                        out[key] = value
        for release, out in zip(self.releases, every, strict=True):
            self._at.setdefault(release, out)

    @cached_property
    def _by_index(self) -> list[tuple[str, list[tuple[int, int, Any]]]]:
        """Each key's spans as (first, last) positions in ``releases`` with the value: ``at``
        reads every span of the table for each release asked (every covered release, for a
        check without a vLLM version)."""
        index = self._index
        return [
            (key, [(index[e["first"]], index[e["last"]], e.get("value")) for e in entries])
            for key, entries in self._entries.items()
        ]

    def first_release(self, key: str) -> str | None:
        spans = self._entries.get(key)
        if not spans:
            return None
        return min((e["first"] for e in spans), key=self._index.__getitem__)

    def last_release(self, key: str) -> str | None:
        spans = self._entries.get(key)
        if not spans:
            return None
        return max((e["last"] for e in spans), key=self._index.__getitem__)

    @cached_property
    def newest(self) -> str:
        return self.releases[-1]

    def match(self, version: str) -> ReleaseMatch:
        return match_release(version, tuple(self.releases))


@cache
def load(kind: str) -> Table:
    path = DATA_DIR / f"{kind}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KnowledgeError(f"knowledge table {kind!r} is not installed ({path})") from None
    except (OSError, ValueError) as err:
        raise KnowledgeError(f"knowledge table {kind!r} cannot be read: {err}") from None
    return Table(kind, data)


@lru_cache(maxsize=256)
def match_release(version: str, releases: tuple[str, ...]) -> ReleaseMatch:
    """The covered release a version is judged by (see ReleaseMatch)."""
    if version in releases:  # a release by its own name (a judgement over releases asks each)
        return ReleaseMatch(version, True, "")
    try:
        v = Version(str(version))
    except InvalidVersion:
        return ReleaseMatch(None, False, f"{version!r} is not a version")
    parsed = _ordered(releases)
    ordered = [r for r, _ in parsed]
    if not ordered:
        return ReleaseMatch(None, False, "no releases covered")
    public = Version(v.public)
    for r, rv in parsed:
        if rv == public:
            note = "" if v == public else f"local build of {r}"
            return ReleaseMatch(r, v == public, note)
    if v.is_prerelease or v.is_devrelease or v.is_postrelease:
        # a dev build, release candidate or unlisted post release descends from the newest
        # covered release before it (0.23.1rc1.dev20+g0d80979 from 0.23.0)
        below = [r for r, rv in parsed if rv <= v]
        if below:
            base = below[-1]
            later = [r for r, rv in parsed if rv.release[:2] > Version(base).release[:2]]
            if not later:
                # a nightly after the newest covered release may accept what no covered
                # release does: judging it by that release could raise false errors
                return ReleaseMatch(
                    None,
                    False,
                    f"{v} is a build after {base}, the newest "
                    "release the knowledge covers: it may carry changes the "
                    "knowledge does not know",
                )
            built = _build_day(v)
            candidates = _resembled_releases(ordered, base, later, built)
            upper = candidates[-1]
            commit = _commit(v)
            return ReleaseMatch(
                base,
                False,
                f"{v} is a build between {base} and {upper}"
                + (f" (built {built})" if built is not None else "")
                + (f" (git commit {commit})" if commit else "")
                + ": judged by what the releases "
                + f"{base}–{upper} agree on",
                upper,
                candidates,
                commit,
            )
    oldest, newest = ordered[0], ordered[-1]
    if v < Version(oldest):
        return ReleaseMatch(
            None, False, f"{v} is older than the oldest release the knowledge covers ({oldest})"
        )
    if v > Version(newest):
        return ReleaseMatch(
            None, False, f"{v} is newer than the newest release the knowledge covers ({newest})"
        )
    return ReleaseMatch(None, False, f"{v} is not a release the knowledge covers")


@lru_cache(maxsize=16)
def _ordered(releases: tuple[str, ...]) -> tuple[tuple[str, Version], ...]:
    """The releases with their parsed versions, oldest first (parsed once per list: a check
    without a vLLM version matches each covered release against the list)."""
    return tuple(sorted(((r, Version(r)) for r in releases), key=lambda pair: pair[1]))


_BUILD_DAY = re.compile(r"(?:^|\.)d(\d{4})(\d{2})(\d{2})(?:\.|$)")


def _build_day(version: Version) -> str | None:
    """The day a build from a modified tree was made (setuptools-scm's ``+g<hash>.dYYYYMMDD``)."""
    match = _BUILD_DAY.search(version.local or "")
    return "-".join(match.groups()) if match else None


def _minor(release: str) -> tuple[int, ...]:
    return Version(release).release[:2]


def _resembled_releases(
    ordered: list[str], base: str, later: list[str], built: str | None
) -> tuple[str, ...]:
    """The covered releases a build from main after ``base`` may resemble, oldest first.

    A main build keeps its version's base until main is tagged again, which has come after
    the next minor release (0.20.2rc1.dev562 was built on 2026-05-21, after 0.21.0): the
    version alone bounds it only by the second minor series after ``base``. A build day
    bounds it by the first minor release built after that day. Either way main may already
    hold code of the minor series after that bound (its release branch is cut days before
    the wheel is built), so that series' first release is a candidate too.
    """
    series = sorted({_minor(r) for r in later})
    firsts = [next(r for r in later if _minor(r) == m) for m in series]
    if built is not None:
        after = [r for r in firsts if (_release_built(r) or "") >= built]
        bound = firsts.index(after[0]) if after else len(firsts) - 1
    else:
        bound = min(1, len(firsts) - 1)
    upper = firsts[min(bound + 1, len(firsts) - 1)]
    return tuple(ordered[ordered.index(base) : ordered.index(upper) + 1])


_COMMIT = re.compile(r"(?:^|\.)g([0-9a-f]{7,40})(?:\.|$)")


def _commit(version: Version) -> str | None:
    """The git commit a build names in its local part (setuptools-scm's ``+g<hash>``)."""
    match = _COMMIT.search(version.local or "")
    return match.group(1) if match else None


def _release_built(release: str) -> str | None:
    """The day a covered release's wheel was built (table release_built), where known."""
    try:
        table = load("release_built")
    except KnowledgeError:
        return None
    if release not in table.releases:
        return None
    value = table.at(release).get("@release")
    return value.get("built") if isinstance(value, dict) else None


def covered_releases() -> list[str]:
    """The releases the generated knowledge covers, oldest first (data/releases.json)."""
    return load("releases").releases


def newest_release() -> str:
    return covered_releases()[-1]
