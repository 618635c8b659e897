"""Fold per-release values into the spans of a knowledge table (used by the generator)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.version import Version

from vllm_doctor.knowledge import FORMAT


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def fold(per_release: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], dict[str, list[dict]]]:
    """``{release: {key: value}}`` → (ordered releases, ``{key: [span, ...]}``).

    Consecutive releases in which a key has the same value become one span; a key missing
    from a release ends its span, and a value that changes starts a new one.
    """
    releases = sorted(per_release, key=Version)
    entries: dict[str, list[dict]] = {}
    open_span: dict[str, tuple[str, dict]] = {}  # key -> (canonical value, span)
    for release in releases:
        values = per_release[release]
        for key in list(open_span):
            if key not in values:
                del open_span[key]
        for key in sorted(values):
            value = values[key]
            canon = _canonical(value)
            current = open_span.get(key)
            if current is not None and current[0] == canon:
                current[1]["last"] = release
                continue
            span = {"first": release, "last": release, "value": value}
            entries.setdefault(key, []).append(span)
            open_span[key] = (canon, span)
    return releases, dict(sorted(entries.items()))


def table(kind: str, per_release: Mapping[str, Mapping[str, Any]], **meta: Any) -> dict[str, Any]:
    """A whole knowledge table, ready for ``json.dump``."""
    releases, entries = fold(per_release)
    return {"kind": kind, "format": FORMAT, **meta, "releases": releases, "entries": entries}


def dump(data: Mapping[str, Any]) -> str:
    """Compact, stable JSON: one line per key keeps diffs between regenerations readable."""
    head = {k: v for k, v in data.items() if k != "entries"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))},")
    lines.append('"entries": {')
    items = list(data.get("entries", {}).items())
    for i, (key, spans) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"{json.dumps(key)}: {_canonical_list(spans)}{comma}")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def _canonical_list(spans: Sequence[Any]) -> str:
    return json.dumps(spans, sort_keys=True, separators=(",", ":"))


def release_spans(releases: Sequence[str], chosen: set[str] | frozenset[str]) -> str:
    """The chosen releases as ranges of consecutive covered releases ("0.8.0–0.9.0.1,
    0.13.0"), or "" for none; ``releases`` in their order."""
    out: list[list[str]] = []
    previous = False
    for release in releases:
        inside = release in chosen
        if inside and previous:
            out[-1][1] = release
        elif inside:
            out.append([release, release])
        previous = inside
    return ", ".join(a if a == b else f"{a}–{b}" for a, b in out)
