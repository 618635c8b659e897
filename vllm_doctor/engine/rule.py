"""Typed view of a rule file (see docs/rule-format.md). Built only by engine.loader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_doctor.engine.logmatch import Signature
    from vllm_doctor.facts.model import Facts

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}
CONFIDENCES = ("high", "medium", "low")
STATUSES = ("stable", "preview", "deprecated", "withdrawn")
PHASES = ("startup", "load", "cudagraph-capture", "warmup", "first-request", "under-load")
FIX_STATUSES = ("released", "merged", "open", "none")
CATEGORIES = {
    "MODEL": "model-specific failures",
    "SPEC": "speculative decoding",
    "QUANT": "quantization against hardware and kernels",
    "PAR": "tensor, pipeline, expert and data parallelism",
    "MEM": "memory and KV cache",
    "ATTN": "attention backends and CUDA graphs",
    "ENV": "driver, torch, packages and environment variables",
    "HW": "GPUs, links and MIG",
    "ARGS": "serve arguments",
    # judged by `vllm-doctor fleet` over the fleet.* facts (every node's facts side by side);
    # `check` judges one machine and leaves them out (engine.loader.one_machine)
    "FLEET": "across the nodes of one multi-node deployment",
}
DETAIL_SECTIONS = ("What happens", "Why", "How to confirm", "Known false positives")


class LazyPattern:
    """A rule's regex, compiled on first use.

    `check` without a crash log never needs the signatures, so loading the rule base does not
    pay for compiling them; `rules validate` and `rules test` compile every one up front.
    """

    __slots__ = ("_compiled", "pattern", "where")

    def __init__(self, pattern: str, where: str, compiled: Any = None):
        self.pattern = pattern
        self.where = where  # "file:field", for the error message
        self._compiled = compiled

    def compiled(self) -> Any:
        if self._compiled is None:
            from vllm_doctor.engine.linear import LinearRegexError, compile_linear
            from vllm_doctor.errors import InputError

            try:
                self._compiled = compile_linear(self.pattern, multiline=True)
            except LinearRegexError as err:
                file, _, field = self.where.rpartition(":")
                raise InputError(file, f"{field}: {err}") from None
        return self._compiled

    def search(self, text: str) -> Any:  # RE2's match objects (untyped)
        return self.compiled().search(text)

    def finditer(self, text: str) -> Any:
        return self.compiled().finditer(text)


# pattern -> its matching plan (engine.logmatch.signature_plan), filled from the compact rule
# data so that a signature is not split and parsed again on every run
SIGNATURE_PLANS: dict[str, Any] = {}


class LazySignature:
    """A crash-log signature, compiled on first use for linear-time matching
    (engine.logmatch: literal prefilter, RE2 parts, bounded windows)."""

    __slots__ = ("_compiled", "pattern", "where")

    def __init__(self, pattern: str, where: str, compiled: Signature | None = None):
        self.pattern = pattern
        self.where = where  # "file:field", for the error message
        self._compiled = compiled

    def compiled(self) -> Signature:
        if self._compiled is None:
            from vllm_doctor.engine.logmatch import SignatureError, compile_signature
            from vllm_doctor.errors import InputError

            try:
                self._compiled = compile_signature(self.pattern, SIGNATURE_PLANS.get(self.pattern))
            except SignatureError as err:
                file, _, field = self.where.rpartition(":")
                raise InputError(file, f"{field}: {err}") from None
        return self._compiled


# the serve options a workaround may leave to the doctor (`serve: compute: [...]`): the value
# is computed for the facts and judged before it is printed (commands/suggest.py)
COMPUTABLE_OPTIONS = ("max-model-len", "tensor-parallel-size", "kv-cache-dtype")
# a fact named in a workaround's title or cost, printed as its value: {release.torch_pin},
# {release.architecture_first_release|words for a fact that is not known}
TITLE_PLACEHOLDER = re.compile(r"\{([a-z_]+(?:\.[A-Za-z0-9_*-]+)+)(?:\|([^{}]*))?\}")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if value >= 10_000 else str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def fill_placeholders(title: str, facts: Facts) -> str:
    """A title with its ``{fact.path}`` placeholders replaced by the facts' values; a fact
    that is absent takes the placeholder's words (``{path|words}``), one that could not be
    collected says why."""

    def value(match: re.Match[str]) -> str:
        path, words = match.group(1), match.group(2)
        fact = facts.get(path)
        if fact is not None and fact.value not in (None, "", [], {}):
            return _shown(fact.value)
        why = facts.why_missing(path)
        if why is None and words is not None:
            return words
        return f"not known: {why}" if why else "not known"

    return TITLE_PLACEHOLDER.sub(value, title)


@dataclass(frozen=True)
class Fingerprint:
    path: str  # glob relative to the vllm package directory
    pattern: LazyPattern
    means: str  # "fixed" | "affected"


@dataclass(frozen=True)
class VersionRange:
    introduced: str  # "0" means from the beginning
    fixed: str | None  # None: not fixed in any release


@dataclass(frozen=True)
class Workaround:
    title: str
    serve_set: dict[str, Any] = field(default_factory=dict)
    serve_remove: tuple[str, ...] = ()
    env_set: dict[str, str] = field(default_factory=dict)
    env_unset: tuple[str, ...] = ()
    cost: str = ""
    # options whose value the doctor computes for the facts (COMPUTABLE_OPTIONS)
    serve_compute: tuple[str, ...] = ()

    @property
    def edits_serve_line(self) -> bool:
        return bool(self.serve_set or self.serve_remove or self.serve_compute)


@dataclass(frozen=True)
class Fix:
    status: str
    version: str | None = None
    pr: int | None = None
    commit: str | None = None


@dataclass
class Rule:
    code: str
    slug: str
    status: str
    severity: str
    confidence: str
    summary: str
    phase: str
    when: Any  # compiled condition (engine.conditions.Condition)
    ranges: tuple[VersionRange, ...] | None
    fingerprints: tuple[Fingerprint, ...]
    signatures: tuple[LazySignature, ...]
    fix: Fix | None
    workarounds: tuple[Workaround, ...]
    probe: str | None
    references: tuple[str, ...]
    aliases: tuple[str, ...]
    related: tuple[str, ...]
    details: str
    path: Path
    raw: dict[str, Any]
    # a rule about a message seen in a crash log: it applies only when its signatures match,
    # and its `when` holds the facts that confirm the cause (shown as evidence)
    log_only: bool = False
    # a log reader (vllm_doctor.logreaders) that names the cause and the fix of the message
    # the signatures found; the rule does not apply when the reader finds none
    reader: str | None = None
    # a condition under which an applying finding is only a warning (an estimate within its
    # margin: MEM001-MEM003); None: always the rule's severity
    warn_when: Any = None

    @property
    def category(self) -> str:
        return re.match(r"[A-Z]+", self.code).group(0)  # type: ignore[union-attr]

    @property
    def url(self) -> str | None:
        """Where to read about the failure on the web: the upstream issue or pull request the
        rule is sourced from (its first reference). The rule's own document is
        `vllm-doctor explain CODE`."""
        return self.references[0] if self.references else None

    @property
    def defers_to(self) -> tuple[str, ...]:
        """Rules that speak about the same cause more precisely: when one of them applies,
        this (generated) rule steps back (engine.evaluate.evaluate_rules)."""
        value = self.raw.get("defers_to") or ()
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    @property
    def versioned(self) -> bool:
        return self.ranges is not None or bool(self.fingerprints)

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON (for `rules list --format json` and reports)."""
        return {
            "code": self.code,
            "slug": self.slug,
            "status": self.status,
            "severity": self.severity,
            "confidence": self.confidence,
            "summary": self.summary,
            "phase": self.phase,
            "affected": self.raw.get("affected"),
            "fix": self.raw.get("fix"),
            "workarounds": self.raw.get("workarounds", []),
            "probe": self.probe,
            "references": list(self.references),
            "aliases": list(self.aliases),
            "related": list(self.related),
        }
