"""A curated signature split for linear-time matching, and where it matches in a log.

A signature is split at its top-level gaps (``[\\s\\S]*?``, ``[\\s\\S]{0,N}?``) into parts.
Each part runs on RE2 (linear time, no backtracking) inside a window of ``PART_WINDOW``
characters around its longest literal, found by the one literal scan of the log
(``text``); the parts are then chained left to right, each gap's bound respected. A leading
``\\A(?![\\s\\S]*X)`` ("unless X appears anywhere in the log") becomes a separate check.
Patterns RE2 cannot run (back-references, other look-arounds) and parts without a literal of
``MIN_PART_LITERAL`` characters are rejected by the rule loader (``signature_problem``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vllm_doctor.engine.logmatch.catalogue import filled_template
from vllm_doctor.engine.logmatch.text import MIN_PART_LITERAL

try:  # Python 3.11+: sre_parse is deprecated in favour of re._parser
    from re import _parser as _sre_parser  # type: ignore[attr-defined]  # private, untyped
except ImportError:  # pragma: no cover - 3.10
    import sre_parse as _sre_parser

PART_WINDOW = 2048  # characters searched either side of a signature part's literal
MIN_LINK = 12  # a signature names a catalogue message by a literal run at least this long

_GAP = re.compile(r"\[\\s\\S\](?:\*\??|\{0,(\d+)\}\??)|\[\\S\\s\](?:\*\??|\{0,(\d+)\}\??)")


class SignatureError(ValueError):
    """A signature a linear-time engine cannot run (raised by compile_signature)."""


# -- the RE2 engine ------------------------------------------------------------------------
def _compile_re2(pattern: str) -> Any:
    from vllm_doctor.engine.linear import LinearRegexError, compile_linear

    try:
        return compile_linear(pattern, multiline=True)
    except LinearRegexError as err:
        raise SignatureError(str(err)) from None


# -- splitting a signature ------------------------------------------------------------------
def _class_end(pattern: str, start: int) -> int:
    """The index just past the character class that opens at ``pattern[start]`` (``[``); a
    ``]`` first in the class (``[]a]``, ``[^]a]``) is one of its characters."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return len(pattern)


def _structure(pattern: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(index, character) of the pattern's characters from ``start`` that are neither escaped
    nor inside a character class; a class is given once, as its opening ``[``."""
    i = start
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        yield i, ch
        i = _class_end(pattern, i) if ch == "[" else i + 1


def _top_level_spans(pattern: str) -> list[tuple[int, int, int | None]]:
    """(start, end, bound) of each top-level gap token; bound None means unbounded."""
    spans, depth = [], 0
    for i, ch in _structure(pattern):
        if ch == "[" and depth == 0:
            gap = _GAP.match(pattern, i)  # a gap is a class and its repetition
            if gap:
                bound = gap.group(1) or gap.group(2)
                spans.append((i, gap.end(), int(bound) if bound else None))
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
    return spans


def _closing_paren(pattern: str, start: int) -> int:
    depth = 0
    for i, ch in _structure(pattern, start):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise SignatureError("unbalanced parentheses")


def _longest_literal(part: str) -> str:
    """The longest run of literal characters every match of ``part`` contains."""
    try:
        parsed = _sre_parser.parse(part)
    except re.error as err:
        raise SignatureError(f"bad regex: {err}") from None
    literal, best, run = _sre_parser.LITERAL, "", []
    for op, arg in [*parsed, (None, None)]:
        if op is literal:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    return best


class _Part:
    """One part of a signature: its regex (compiled for RE2 the first time the part's literal
    occurs in a log), that literal, and the bound of the gap before it (None: unbounded)."""

    __slots__ = ("_regex", "gap_before", "literal", "piece")

    def __init__(self, piece: str, literal: str, gap_before: int | None):
        self.piece, self.literal, self.gap_before = piece, literal, gap_before
        self._regex: Any = None

    @property
    def regex(self) -> Any:  # an RE2 regex (untyped)
        if self._regex is None:
            self._regex = _compile_re2(self.piece)
        return self._regex


@dataclass
class Signature:
    """A curated signature compiled for linear-time matching."""

    pattern: str
    parts: list[_Part]
    unless: Signature | None = None
    _runs: tuple[str, ...] | None = None

    def literals(self) -> set[str]:
        found = {p.literal for p in self.parts}
        return found | (self.unless.literals() if self.unless else set())

    def runs(self) -> tuple[str, ...]:
        """Every literal run of the signature that holds a letter or digit, in order, its
        edge spaces stripped (the catalogue's templates drop the spaces at a placeholder)."""
        if self._runs is None:
            self._runs = tuple(run for part in self.parts for run in _literal_runs(part.piece))
        return self._runs

    def quotes(self, template: str) -> bool:
        """The signature quotes this catalogue message: every literal run of it is in the
        template, in order, one of them specific (MIN_LINK characters), and the signature
        matches the message with any value in its placeholders (a signature that names one
        quantization method, or a range of capabilities, is about those values only)."""
        if not all(part.literal.strip() in template for part in self.parts):
            return False  # the cheap test first: each part's longest literal
        runs = self.runs()
        if not runs or max(map(len, runs)) < MIN_LINK:
            return False
        at = 0
        for run in runs:
            found = template.find(run, at)
            if found == -1:
                return False
            at = found + len(run)
        try:  # its parts, in order (a leading "unless" is about the log, not the message)
            regex = re.compile(r"[\s\S]*?".join(p.piece for p in self.parts), re.MULTILINE)
        except re.error:
            return False
        return any(regex.search(text) for text in filled_template(template))


# a value any generic class takes (\d+, [\d.]+, \S+, \w+, .+), never a name a signature
# spells out
def _literal_runs(part: str) -> list[str]:
    """The runs of literal characters at the top level of a regex part (a run ends at any
    class, group, repetition or anchor), stripped, those with a letter or digit."""
    try:
        parsed = _sre_parser.parse(part)
    except re.error:
        return []
    literal, runs, run = _sre_parser.LITERAL, [], []
    for op, arg in [*parsed, (None, None)]:
        if op is literal:
            run.append(chr(arg))
            continue
        text = "".join(run).strip()
        if any(ch.isalnum() for ch in text):
            runs.append(text)
        run = []
    return runs


# a signature's plan: (the plan of its `unless` part or None, its parts), each part
# (regex, its longest literal, bound of the gap before it or None)
PlanPart = tuple[str, str, "int | None"]
SignaturePlan = tuple["SignaturePlan | None", tuple[PlanPart, ...]]


def signature_plan(pattern: str) -> SignaturePlan:
    """How a signature is matched, as plain data: (the plan of its ``unless`` part or None,
    ((part regex, its literal, bound of the gap before it), ...)). SignatureError says why a
    linear engine cannot run it."""
    unless: SignaturePlan | None = None
    text = pattern
    if text.startswith(r"\A(?!"):
        close = _closing_paren(text, 2)
        inner = text[5:close]
        gap = _GAP.match(inner)
        if not gap or gap.group(1) or gap.group(2):
            raise SignatureError(
                r"a leading \A(?!...) must read \A(?![\s\S]*X): X nowhere in the log"
            )
        unless = signature_plan(inner[gap.end() :])
        text = text[close + 1 :]
        lead = _GAP.match(text)
        if lead:
            text = text[lead.end() :]
    parts: list[PlanPart] = []
    start, bound = 0, None
    for gap_start, gap_end, gap_bound in [*_top_level_spans(text), (len(text), len(text), None)]:
        piece = text[start:gap_start]
        if piece:
            _compile_re2(piece)  # a regex RE2 cannot run is refused here, not on first use
            literal = _longest_literal(piece)
            if len(literal) < MIN_PART_LITERAL:
                raise SignatureError(
                    f"the part {piece[:60]!r} has no literal text of "
                    f"{MIN_PART_LITERAL}+ characters to look for"
                )
            parts.append((piece, literal, bound))
        start, bound = gap_end, gap_bound
    if not parts:
        raise SignatureError("matches nothing specific")
    return unless, tuple(parts)


def compile_signature(pattern: str, plan: SignaturePlan | None = None) -> Signature:
    """A signature ready to match (``plan``: its signature_plan, when known already)."""
    unless, parts = plan if plan is not None else signature_plan(pattern)
    return Signature(
        pattern,
        [_Part(*part) for part in parts],
        compile_signature("", unless) if unless is not None else None,
    )


def signature_problem(pattern: str) -> str | None:
    """Why the rule loader must reject ``pattern`` (None when it can run in linear time)."""
    try:
        compile_signature(pattern)
    except SignatureError as err:
        return str(err)
    return None


# -- signatures on a log ------------------------------------------------------------------------
def _part_matches(part: _Part, text: str, hits: dict[str, list[int]]) -> list[tuple[int, int]]:
    """(start, end) of the part's matches near its literal's occurrences, in order."""
    windows: list[list[int]] = []  # the windows around each occurrence, overlaps merged
    for pos in hits.get(part.literal, ()):
        lo, hi = max(0, pos - PART_WINDOW), min(len(text), pos + len(part.literal) + PART_WINDOW)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    found: list[tuple[int, int]] = []
    for lo, hi in windows:
        for match in part.regex.finditer(text[lo:hi]):
            found.append((lo + match.start(), lo + match.end()))
    return found


def signature_spans(
    sig: Signature, text: str, hits: dict[str, list[int]], limit: int = 3
) -> list[tuple[int, int]]:
    """Where the whole signature matches: (start of its first part, end of its last)."""
    if sig.unless is not None and signature_spans(sig.unless, text, hits, 1):
        return []
    per_part = [_part_matches(p, text, hits) for p in sig.parts]
    if any(not m for m in per_part):
        return []
    found = []
    for start, end in per_part[-1]:
        left, ok = start, True
        for index in range(len(sig.parts) - 2, -1, -1):
            # the latest match of the part before that ends before this one starts
            candidates = per_part[index]
            at = bisect.bisect_right(candidates, (left, float("inf"))) - 1
            while at >= 0 and candidates[at][1] > left:
                at -= 1
            bound = sig.parts[index + 1].gap_before
            if at < 0 or (bound is not None and left - candidates[at][1] > bound):
                ok = False
                break
            left = candidates[at][0]
        if ok:
            found.append((left, end))
            if len(found) >= limit:
                break
    return found
