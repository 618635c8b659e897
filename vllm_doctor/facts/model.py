"""The Facts model: everything a rule may look at, each value with where it came from.

Facts are stored flat, under dotted paths (``serve.tensor_parallel_size``,
``gpu.min_capability``, ``model.architectures``). Rules only ever see this object, so
every rule can be tested with a dictionary of facts and no GPU.

A fact that could not be collected is not silently absent: ``Facts.mark_missing`` records
the reason for a path or for a whole area (a prefix such as ``gpu``), and the engine turns
that into a "cannot decide" verdict naming the missing fact and how to supply it.

Two kinds of "missing" are told apart. A fact *not supplied* would be known with another input
(the serve line, a model config, running on the host): ``--strict`` fails on a rule it leaves
open. A fact that *cannot be known from this input* (``Facts.mark_unknowable``: a package no
release's ``collect-env`` lists, a variable it never prints, P2P access a report does not
test) is as open, but no input of that kind could close it: ``--strict`` treats it as known
to be unknowable and names it, instead of failing every healthy report.

An input that lists an open area (a report's pip packages and environment variables, the
variables the environment collector reads) says so with a ``Listing``: a name it would list
and does not is absent (not installed, not set); any other name cannot be known from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.redact import is_secret_name, redact_strings, redact_text, redact_value

SCHEMA_VERSION = 1


# the detail of vllm.version where a rule is judged over every covered release in turn
# (engine/over_releases.py sets it; facts that depend on the version read it)
EACH_RELEASE = "each covered release in turn (the vLLM version is unknown)"


class Source:
    """Names of the places a fact can come from (free text is allowed after a colon)."""

    MACHINE = "this machine"  # importlib.metadata, files of installed packages
    NVML = "NVML"
    CONFIG = "config.json"
    SERVE = "serve line"
    SERVE_CONFIG = "serve config file"
    DEFAULT = "vLLM default"
    ENV = "environment"
    REPORT = "collect-env report"
    LOG = "crash log"
    INFERRED = "inferred from the model name"
    # a value inferred from another fact through a table (the GPU table, a release's pins,
    # NVIDIA's driver table): the detail names what it came from; see Facts.infer
    INFERRED_FACT = "inferred"
    DERIVED = "derived"
    USER = "command-line override"


@dataclass(frozen=True)
class Fact:
    """One observed value and where it came from (``detail`` is a file, a line, a flag)."""

    value: Any
    source: str
    detail: str | None = None
    # for an inferred fact: every value the inference leaves possible (a GPU family's memory
    # variants, the CUDA builds of a torch release) as a list, or for a version a specifier
    # ("<5.21.0,>=5.16.1"); a test decides only where all of them agree (engine.conditions)
    possible: Any = None

    @property
    def inferred(self) -> bool:
        return self.source == Source.INFERRED_FACT

    def describe_source(self) -> str:
        return f"{self.source} ({self.detail})" if self.detail else self.source

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"value": self.value, "source": self.source, "detail": self.detail}
        if self.inferred:
            data["inferred"] = True
            if self.possible is not None:
                data["possible"] = self.possible
        return data


@dataclass(frozen=True)
class Listing:
    """What an input lists of an open area (``packages``, ``env``): a name it would list and
    does not is absent; any other name cannot be known from it (``reason``, where ``{name}``
    stands for the name asked)."""

    area: str
    reason: str
    contains: tuple[str, ...] = ()  # listed when the name contains one of these (pip patterns)
    prefixes: tuple[str, ...] = ()  # listed when the name starts with one of these
    names: tuple[str, ...] = ()  # listed by name
    never: tuple[str, ...] = ()  # never listed when the lower-case name contains one of these

    def lists(self, name: str) -> bool:
        lower = name.lower()
        if any(term in lower for term in self.never):
            return False
        spellings = {lower, lower.replace("-", "_")}
        return (
            name in self.names
            or name.startswith(self.prefixes)
            or any(pattern in spelling for pattern in self.contains for spelling in spellings)
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"reason": self.reason}
        for key in ("contains", "prefixes", "names", "never"):
            if getattr(self, key):
                data[key] = list(getattr(self, key))
        return data

    @classmethod
    def from_dict(cls, area: str, data: dict[str, Any]) -> Listing:
        return cls(
            area,
            str(data.get("reason", "")),
            *(tuple(data.get(key, ())) for key in ("contains", "prefixes", "names", "never")),
        )


@dataclass
class Facts:
    """Flat, serialisable store of facts with provenance and reasons for what is missing."""

    values: dict[str, Fact] = field(default_factory=dict)
    # path or area prefix -> reason it could not be collected
    missing: dict[str, str] = field(default_factory=dict)
    # the paths (or areas) of ``missing`` that cannot be known from this kind of input
    unknowable: set[str] = field(default_factory=set)
    # area -> what this input lists of it (``Listing``)
    listings: dict[str, Listing] = field(default_factory=dict)
    # free-form notes about collection (e.g. "facts from a report replace this machine's")
    notes: list[str] = field(default_factory=list)
    # collectors that crashed (vllm_doctor.errors.Crash): the run cannot pass a gate
    crashes: list[Any] = field(default_factory=list, compare=False)

    # -- writing -----------------------------------------------------------------
    def set(self, path: str, value: Any, source: str, detail: str | None = None) -> None:
        if value is None:
            return
        # every fact passes here: a credential in a model URL or a JSON option never reaches
        # a report, whatever collected it; a variable named like a secret (env.PGPASSWORD)
        # shows that it is set, never its value, whichever source set it
        if path.startswith("env.") and is_secret_name(path[4:]):
            value = redact_value(value, path[4:])
        self.values[path] = Fact(
            redact_strings(value), source, redact_text(detail) if detail else detail
        )
        self.missing.pop(path, None)
        self.unknowable.discard(path)

    def infer(self, path: str, value: Any, basis: str, possible: Any = None) -> bool:
        """Set an inferred fact unless ``path`` was collected (an inference never overrides
        an observed value); ``basis`` says what it was inferred from. True when set."""
        known = self.values.get(path)
        if value is None or (known is not None and not known.inferred):
            return False
        self.values[path] = Fact(
            redact_strings(value), Source.INFERRED_FACT, redact_text(basis), possible
        )
        self.missing.pop(path, None)
        self.unknowable.discard(path)
        return True

    def mark_missing(self, path_or_area: str, reason: str) -> None:
        """Record why a fact (or every fact under an area prefix) is unavailable."""
        if path_or_area not in self.values:
            self.missing[path_or_area] = redact_text(reason)
            self.unknowable.discard(path_or_area)

    def set_fix(self, path: str, fix: str | None, source: str, detail: str | None = None) -> None:
        """A ``*_fix`` fact: the fix where one is needed, else missing as "nothing to fix" (a
        fix rule's condition then cannot hold on it)."""
        if fix:
            self.set(path, fix, source, detail)
        else:
            self.mark_missing(path, "nothing to fix")

    def mark_unknowable(self, path_or_area: str, reason: str) -> None:
        """Record that a fact (or an area) cannot be known from this kind of input at all."""
        if path_or_area not in self.values:
            self.missing[path_or_area] = redact_text(reason)
            self.unknowable.add(path_or_area)

    def copy(self) -> Facts:
        """A copy of what judging reads (values, missing reasons, listings) that can be
        changed without touching this one; the notes and crashes stay with this one."""
        return Facts(
            values=dict(self.values),
            missing=dict(self.missing),
            unknowable=set(self.unknowable),
            listings=dict(self.listings),
        )

    def set_listing(self, listing: Listing) -> None:
        """What this input lists of ``listing.area`` (see ``Listing``)."""
        self.listings[listing.area] = listing

    def drop_area(self, area: str) -> None:
        """Forget every fact and missing-reason under ``area`` (used when a report replaces it)."""
        for store in (self.values, self.missing):
            for key in [k for k in store if k == area or k.startswith(area + ".")]:
                del store[key]
        self.unknowable = {k for k in self.unknowable if k in self.missing}
        for key in [k for k in self.listings if k == area or k.startswith(area + ".")]:
            del self.listings[key]

    def merge(self, other: Facts, replace_areas: Iterable[str] = ()) -> None:
        """Take ``other``'s facts; areas in ``replace_areas`` are replaced wholesale."""
        for area in replace_areas:
            self.drop_area(area)
        self.values.update(other.values)
        for key, reason in other.missing.items():
            if key not in self.values:
                self.missing[key] = reason
                if key in other.unknowable:
                    self.unknowable.add(key)
                else:
                    self.unknowable.discard(key)
        self.listings.update(other.listings)
        self.notes.extend(other.notes)

    # -- reading -----------------------------------------------------------------
    def get(self, path: str) -> Fact | None:
        return self.values.get(path)

    def value(self, path: str, default: Any = None) -> Any:
        fact = self.values.get(path)
        return default if fact is None else fact.value

    def __contains__(self, path: str) -> bool:
        return path in self.values

    def _missing_entry(self, path: str) -> tuple[str, bool] | None:
        """(reason, unknowable) for ``path``: its own or its nearest area's recorded reason,
        else what the input's listing of the area says of a name it does not list."""
        key = path  # the path, then each area above it (a.b.c, a.b, a)
        while True:
            reason = self.missing.get(key)
            if reason:
                return reason, key in self.unknowable
            cut = key.rfind(".")
            if cut < 0:
                break
            key = key[:cut]
        if path in self.values:
            return None
        area, _, name = path.partition(".")
        listing = self.listings.get(area)
        if listing is not None and name and "." not in name and not listing.lists(name):
            return listing.reason.replace("{name}", name), True
        return None

    def why_missing(self, path: str) -> str | None:
        """The recorded reason for ``path`` or for the nearest area above it (or the input's
        listing of its area, for a name the input would not list)."""
        entry = self._missing_entry(path)
        return entry[0] if entry else None

    def is_unknowable(self, path: str) -> bool:
        """``path`` is missing and cannot be known from this kind of input (see the module
        docstring): ``--strict`` does not fail on it."""
        entry = self._missing_entry(path)
        return bool(entry and entry[1])

    def area(self, prefix: str) -> Iterator[tuple[str, Fact]]:
        for key in sorted(self.values):
            if key == prefix or key.startswith(prefix + "."):
                yield key, self.values[key]

    # -- serialisation -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "facts": {k: v.to_dict() for k, v in sorted(self.values.items())},
            "missing": dict(sorted(self.missing.items())),
            "unknowable": sorted(self.unknowable),
            "listings": {area: x.to_dict() for area, x in sorted(self.listings.items())},
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Facts:
        facts = cls()
        for path, raw in data.get("facts", {}).items():
            facts.values[path] = Fact(
                raw["value"], raw["source"], raw.get("detail"), raw.get("possible")
            )
        facts.missing.update(data.get("missing", {}))
        facts.unknowable.update(k for k in data.get("unknowable", []) if k in facts.missing)
        for area, raw in data.get("listings", {}).items():
            facts.listings[area] = Listing.from_dict(area, raw)
        facts.notes.extend(data.get("notes", []))
        return facts

    @classmethod
    def from_flat(cls, flat: dict[str, Any], source: str = "test case") -> Facts:
        """Facts from a plain ``{path: value}`` mapping (rule test cases, fixtures)."""
        facts = cls()
        for path, value in flat.items():
            facts.set(path, value, source)
        return facts


@dataclass(frozen=True)
class FactSpec:
    """What one fact path holds (facts/schema.py's catalogue): its type and its meaning."""

    type: str  # str | int | float | bool | list | dict | version
    description: str
    # True for a fact every real input has (a model's head count, a GPU's capability): when
    # it is not there, the collector could not read it, so a rule sees it as unknown, never
    # as absent (see engine.conditions).
    never_absent: bool = False
