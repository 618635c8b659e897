"""Crash-log matching in linear time: the curated rules' signatures and the error catalogue.

One pass of an Aho–Corasick automaton over the log finds every literal the matchers need
(each signature part's longest literal, each catalogue message's literal parts); only the
text around those hits is looked at again, in windows of bounded size:

* A **signature** is split at its top-level gaps (``[\\s\\S]*?``, ``[\\s\\S]{0,N}?``) into
  parts. Each part runs on RE2 (linear time, no backtracking) inside a window of
  ``PART_WINDOW`` characters around its literal; the parts are then chained left to right,
  each gap's bound respected. A leading ``\\A(?![\\s\\S]*X)`` ("unless X appears anywhere in
  the log") becomes a separate check. Patterns RE2 cannot run (back-references, other
  look-arounds) and parts without a literal of ``MIN_PART_LITERAL`` characters are rejected
  by the rule loader (``signature_problem``).
* A **catalogue entry** (knowledge table ``errors``: every message vLLM raises, asserts or
  logs at error level) is verified by finding its literal parts in order in a window of the
  hit's line and its neighbours, whitespace collapsed, so prefixes (``(EngineCore_DP0
  pid=…)``, ``ERROR 11-23 05:10:11 [core.py:123]``), ANSI colour, pydantic's ``Value
  error,`` wrapper, a missing exception class and wrapped lines do not matter. A message
  is also found from part of it: cut short (most of its literal text, in order), quoted up
  to the end of a sentence (its first sentence, a tail that another release words
  differently or that the reporter left out), or without a piece that holds no letters (a
  parenthesis another release does not print).
* A **rule named through the catalogue**: a signature that quotes one catalogue message
  (every literal run of it, in order, in the message's template) also finds the failure
  wherever the catalogue found that message, in full or in part (``LogScan.message_lines``),
  so a rule is named from a wrapped line or a neighbouring release's wording of its message.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

try:  # Python 3.11+: sre_parse is deprecated in favour of re._parser
    from re import _parser as _sre_parser  # type: ignore[attr-defined]  # private, untyped
except ImportError:  # pragma: no cover - 3.10
    import sre_parse as _sre_parser

PART_WINDOW = 2048  # characters searched either side of a signature part's literal
MIN_PART_LITERAL = 4  # a signature part needs a literal this long to be prefiltered
MAX_HITS_PER_LITERAL = 2000  # occurrences of one literal looked at (a log of repeated lines)
SMALL_LOG = 100_000  # characters up to which literals are found by their first 4
LARGE_LOG = 4_000_000  # characters from which the literal scan takes the RE2-set path
PREFIX = MIN_PART_LITERAL  # characters of a literal that index it for the small-log scan
ANCHOR = 24  # characters of a catalogue message's literal looked for first
MIN_ANCHOR = 12  # the extractor keeps only messages with a part this long
CATALOGUE_WINDOW = 4096  # characters of context verified around a catalogue hit
PARTIAL_SHARE = 0.6  # a message cut short: this share of its literal text, in order
MIN_SENTENCE = 30  # a message quoted up to a sentence's end: at least this much literal text
MIN_LINK = 12  # a signature names a catalogue message by a literal run at least this long
MAX_MESSAGE_HITS = 50  # catalogue messages one scan keeps for the rules named through them

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)")
_GAP = re.compile(r"\[\\s\\S\](?:\*\??|\{0,(\d+)\}\??)|\[\\S\\s\](?:\*\??|\{0,(\d+)\}\??)")
_SPACES = re.compile(r"\s+")
# where a sentence of a message ends inside one literal part ("… (2.1 GiB). Decrease …")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(\[])")
_LETTERS = re.compile(r"[A-Za-z]")


class SignatureError(ValueError):
    """A signature a linear-time engine cannot run (raised by compile_signature)."""


# -- the RE2 engine ------------------------------------------------------------------------
def _re2() -> tuple[Any, Any]:
    from vllm_doctor.engine.linear import re2_module

    return re2_module()


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
        return any(regex.search(text) for text in _filled(template))


# a value any generic class takes (\d+, [\d.]+, \S+, \w+, .+), never a name a signature
# spells out
_FILLER = "1"


def _filled(template: str) -> list[str]:
    """The template as vLLM could print it, a generic value in each placeholder: the
    catalogue drops the spaces around a placeholder, so they are put back as English
    spacing has them (beside a word or after a comma or colon), or on both sides, or none."""
    pieces = template.split(WILDCARD)
    spaced = [pieces[0]]
    for before, after in itertools.pairwise(pieces):
        left = " " if before[-1:].isalnum() or before[-1:] in ",:;" else ""
        right = " " if after[:1].isalnum() or after[:1] in "([" else ""
        spaced.append(f"{left}{_FILLER}{right}{after}")
    return ["".join(spaced)] + [
        template.replace(WILDCARD, filler) for filler in (_FILLER, f" {_FILLER} ")
    ]


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


# -- the log ----------------------------------------------------------------------------------
def clean(text: str) -> str:
    """The log without ANSI colour codes and carriage returns (same line structure)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def line_at(text: str, pos: int, limit: int = 300) -> str:
    """The line containing ``pos``, cut to ``limit`` characters around it, secrets hidden
    (every quoted log line comes from here: ``vllm_doctor.redact``)."""
    from vllm_doctor.redact import redact_text

    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    end = len(text) if end == -1 else end
    if end - start > limit:
        offset = max(start, min(pos - limit // 2, end - limit))
        return redact_text(
            ("…" if offset > start else "") + text[offset : offset + limit].strip() + "…"
        )
    return redact_text(text[start:end].strip())


class _LiteralFinder:
    """Literal → positions of its occurrences in a text, for many literals at once.

    Small logs go through an Aho–Corasick automaton (cheap to build: ~0.06 s for the whole
    catalogue); a large log is first checked by an RE2 set of all the literals in one DFA pass,
    which says which literals occur at all, and only those are then located with str.find
    (the automaton's Python iteration costs ~25 ms per MB, the set ~4 ms per MB).
    """

    def __init__(self, literals: frozenset[str]):
        self.literals = sorted(lit for lit in literals if lit)
        self._automaton: Any = None  # pyahocorasick (untyped), built on first use
        self._set: Any = None  # an RE2 literal set (untyped), built on first use

    def scan(self, text: str) -> dict[str, list[int]]:
        if not self.literals:
            return {}
        if len(text) <= LARGE_LOG:
            return self._scan_small(text)
        return self._scan_large(text)

    def _scan_small(self, text: str) -> dict[str, list[int]]:
        if self._automaton is None:
            import ahocorasick

            automaton = ahocorasick.Automaton()
            for literal in self.literals:
                automaton.add_word(literal, literal)
            automaton.make_automaton()
            self._automaton = automaton
        hits: dict[str, list[int]] = {}
        for end, literal in self._automaton.iter(text):
            found = hits.setdefault(literal, [])
            if len(found) < MAX_HITS_PER_LITERAL:
                found.append(end - len(literal) + 1)
        return hits

    def _scan_large(self, text: str) -> dict[str, list[int]]:
        if self._set is None:
            re2, _ = _re2()
            options = re2.Options()
            options.log_errors = False
            options.max_mem = 256 << 20
            literal_set = re2.Set.SearchSet(options)
            for literal in self.literals:
                literal_set.Add(re2.escape(literal))
            literal_set.Compile()
            self._set = literal_set
        present = self._set.Match(text.encode("utf-8", "surrogatepass")) or []
        hits: dict[str, list[int]] = {}
        for index in present:
            literal = self.literals[index]
            found: list[int] = []
            at = text.find(literal)
            while at != -1 and len(found) < MAX_HITS_PER_LITERAL:
                found.append(at)
                at = text.find(literal, at + 1)
            hits[literal] = found
        return hits


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


# -- the catalogue --------------------------------------------------------------------------
WILDCARD = "{*}"
_WILDCARD_SPLIT = re.compile(r"\s*\{\*\}\s*")
_WILDCARD_SPACING = re.compile(r"(?<=\w)(?=\{\*\})|(?<=\{\*\})(?=\w)")


def display(template: str) -> str:
    """A catalogue template for people: ``{*}`` spaced from the words beside it."""
    return _WILDCARD_SPACING.sub(" ", template)


@dataclass(frozen=True)
class _Entry:
    key: str
    cls: str
    parts: tuple[str, ...]
    literal_chars: int
    # the parts cut at the sentences' ends, where each piece ends in the template, and
    # whether it follows the piece before it in the same part (only a space between them)
    pieces: tuple[str, ...] = ()
    ends: tuple[int, ...] = ()
    follows: tuple[bool, ...] = ()

    @classmethod
    def of(cls, key: str, parts: tuple[str, ...]) -> _Entry:
        template = key.partition(": ")[2]
        pieces: list[str] = []
        ends: list[int] = []
        follows: list[bool] = []
        at = 0
        for part in parts:
            for n, piece in enumerate(_SENTENCE_END.split(part)):
                found = template.find(piece, at)
                at = (found if found != -1 else at) + len(piece)
                pieces.append(piece)
                ends.append(at)
                follows.append(n > 0)
        return cls(
            key,
            key.partition(": ")[0],
            parts,
            sum(map(len, parts)),
            tuple(pieces),
            tuple(ends),
            tuple(follows),
        )


@dataclass
class CatalogueHit:
    key: str
    cls: str
    template: str
    line: str
    position: int
    complete: bool  # every literal part was found (False: a message cut short)
    # the template up to the last piece the log shows (all of it for a complete hit)
    shown: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "exception": self.cls,
            "template": self.template,
            "matched_line": self.line,
            "complete": self.complete,
        }


class Catalogue:
    """The error catalogue's matchers: each message's literal parts, and the anchors (start of
    a message's longest part, and of its first part) that find it in a log."""

    def __init__(
        self,
        keys: list[str],
        parts: list[tuple[str, ...]],
        by_anchor: dict[str, tuple[int, ...]],
        table: Any = None,
        prefixes: dict[str, tuple[str, ...]] | None = None,
    ):
        self.keys = keys
        self.parts = parts
        self.by_anchor = by_anchor
        self.prefixes = prefix_index(by_anchor) if prefixes is None else prefixes
        self.table = table  # the knowledge table the messages come from (release spans)
        # the messages of the packages around vLLM (knowledge table stack_errors): key →
        # {distribution: [{first, last, sites}]}, and the versions read of each distribution
        self.packages: Mapping[str, Any] = {}
        self.package_versions: dict[str, list[str]] = {}
        self._entries: dict[int, _Entry] = {}

    @classmethod
    def build(cls, keys: Iterable[str], table: Any = None) -> Catalogue:
        names: list[str] = []
        all_parts: list[tuple[str, ...]] = []
        by_anchor: dict[str, list[int]] = {}
        split = _WILDCARD_SPLIT.split
        for key in keys:
            _cls_name, _, template = key.partition(": ")
            parts = split(template)
            if "" in parts:  # a template that starts or ends with a placeholder
                parts = [p for p in parts if p]
            if not parts:
                continue
            index = len(names)
            names.append(key)
            all_parts.append(tuple(parts))
            # the start of its longest literal part, and of its first part when that is long
            # enough to be specific (a message cut short, or wrapped inside its longest part)
            longest = max(parts, key=len)[:ANCHOR]
            by_anchor.setdefault(longest, []).append(index)
            first = parts[0][:ANCHOR]
            if first != longest and len(parts[0]) >= MIN_ANCHOR:
                by_anchor.setdefault(first, []).append(index)
        return cls(names, all_parts, {a: tuple(i) for a, i in by_anchor.items()}, table)

    def entry(self, index: int) -> _Entry:
        found = self._entries.get(index)
        if found is None:
            found = self._entries[index] = _Entry.of(self.keys[index], self.parts[index])
        return found

    def anchors(self) -> set[str]:
        return set(self.by_anchor)

    def match(self, text: str, hits: dict[str, list[int]], limit: int = 20) -> list[CatalogueHit]:
        verified: dict[tuple[int, int], tuple[bool, int, int] | None] = {}  # (line, entry)
        best: dict[int, CatalogueHit] = {}  # entry → first hit
        # line start → [((literal characters matched, complete), entry)]
        per_line: dict[int, list[tuple[tuple[int, bool], int]]] = {}
        windows: dict[int, tuple[str, str]] = {}
        for anchor, positions in hits.items():
            for index in self.by_anchor.get(anchor, ()):
                for pos in positions:
                    line_start = text.rfind("\n", 0, pos) + 1
                    if (line_start, index) in verified or (
                        index in best and best[index].position <= line_start
                    ):
                        continue
                    window = windows.get(line_start)
                    if window is None:
                        window = windows[line_start] = _window(text, line_start, pos)
                    result = _verify(self.entry(index), window)
                    verified[(line_start, index)] = result
                    if result is None:
                        continue
                    complete, score, shown = result
                    per_line.setdefault(line_start, []).append(((score, complete), index))
                    if index not in best or best[index].position > line_start:
                        entry = self.entry(index)
                        template = entry.key.partition(": ")[2]
                        best[index] = CatalogueHit(
                            entry.key,
                            entry.cls,
                            display(template),
                            line_at(text, pos),
                            line_start,
                            complete,
                            template[:shown],
                        )
        # at one line keep the most specific messages (the most literal text matched, a
        # message seen whole before one seen in part), and among equals the one whose
        # exception class the line names; a message of another exception class than the
        # one(s) the line names is not what the line shows (a package's "RuntimeError: Could
        # not find nvcc" is not vLLM's "AssertionError: Could not find {*} in nodes {*}",
        # however much of its text the two share)
        keep: set[int] = set()
        for line_start, candidates in per_line.items():
            named_classes = set(_NAMED_EXCEPTION.findall(_line(text, line_start)))
            scored = [
                (score, i)
                for score, i in candidates
                if not _another_class(self.entry(i).cls, named_classes)
            ]
            if not scored:
                continue
            top = max(score for score, _ in scored)
            tied = [i for score, i in scored if score == top]
            line_text = windows[line_start][0]
            named = [i for i in tied if f"{self.entry(i).cls}:" in line_text]
            keep.update(named or tied)
        # what vLLM raised comes before what it logged about it ("EngineCore failed to start."
        # is logged above the traceback of the exception that stopped it), then log order
        chosen = sorted(
            (hit for i, hit in best.items() if i in keep),
            key=lambda h: (h.cls.startswith("log."), h.position, h.key),
        )
        return chosen[:limit]


# an exception class as a traceback's last line (or a log line quoting one) names it
_NAMED_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt))\s*:")


def _line(text: str, line_start: int) -> str:
    end = text.find("\n", line_start)
    return text[line_start : end if end != -1 else len(text)]


def _another_class(cls: str, named: set[str]) -> bool:
    """The line names exception classes, none of them this message's: another exception's
    text that happens to share this message's words."""
    if not named or cls.startswith("log.") or cls == "response":
        return False
    return cls.rpartition(".")[2] not in named


def _window(text: str, line_start: int, pos: int) -> tuple[str, str]:
    """The hit's line with a line either side, whitespace collapsed (and, for a word broken
    by a terminal wrap, joined without the line breaks)."""
    before = text.rfind("\n", 0, max(0, line_start - 1)) + 1 if line_start else 0
    end = len(text)
    for _ in range(2):
        nxt = text.find("\n", min(end, pos) if _ == 0 else end + 1)
        if nxt == -1:
            end = len(text)
            break
        end = nxt
    lo = max(before, pos - CATALOGUE_WINDOW)
    raw = text[lo : min(end, pos + CATALOGUE_WINDOW)]
    return _SPACES.sub(" ", raw), _SPACES.sub(" ", raw.replace("\n", ""))


def _walk(entry: _Entry, window: str) -> tuple[list[int], bool]:
    """The pieces found in order in ``window`` from the first (their indexes), stepping over
    a piece without letters that is not there ("), (" where another release prints no
    parenthesis), and whether every piece was found. A sentence that follows another in the
    same literal part must follow it in the window too (a space between them at most)."""
    pieces = entry.pieces
    found: list[int] = []
    at, whole = 0, True
    for index, piece in enumerate(pieces):
        where = window.find(piece, at)
        if where != -1 and entry.follows[index] and found and found[-1] == index - 1:
            where = where if where - at <= 1 else -1
        if where == -1:
            if found and not _LETTERS.search(piece):
                whole = False
                continue
            return found, False
        found.append(index)
        at = where + len(piece)
    return found, whole


def _verify(entry: _Entry, window: tuple[str, str]) -> tuple[bool, int, int] | None:
    """(complete, literal characters matched, where the shown part of the template ends),
    or None: the window does not show the message. Shown in part: most of its literal text
    (PARTIAL_SHARE), or every piece up to the end of a sentence (MIN_SENTENCE characters)."""
    best: list[int] = []
    for variant in window:
        found, whole = _walk(entry, variant)
        if whole:
            return True, entry.literal_chars, entry.ends[-1]
        if sum(len(entry.pieces[i]) for i in found) > sum(len(entry.pieces[i]) for i in best):
            best = found
    if not best or best[0] != 0:
        return None
    matched = sum(len(entry.pieces[i]) for i in best)
    if max(len(entry.pieces[i]) for i in best) < 12:
        return None
    last = entry.pieces[best[-1]].rstrip()
    to_sentence_end = last.endswith((".", "!", "?")) and matched >= MIN_SENTENCE
    if matched >= PARTIAL_SHARE * entry.literal_chars or to_sentence_end:
        return False, matched, entry.ends[best[-1]]
    return None


_CATALOGUE_KEYS = {
    "meta",
    "spans",
    "keys",
    "parts",
    "anchors",
    "prefixes",
    "package_spans",
    "package_versions",
}


@lru_cache(maxsize=1)
def load_catalogue() -> Catalogue:
    """The catalogue of the shipped knowledge table ``errors``, from its compact build
    (vllm_doctor.compact: made on first use, checked against the table's bytes)."""
    from vllm_doctor.compact import cached
    from vllm_doctor.knowledge import DATA_DIR, KnowledgeError, Table

    path = DATA_DIR / "errors.json"
    try:
        source = path.read_bytes()
    except OSError as err:
        raise KnowledgeError(f"knowledge table 'errors' cannot be read: {err}") from None
    try:  # the packages around vLLM (tools/gen_stack_knowledge.py); optional
        stack_source = (DATA_DIR / "stack_errors.json").read_bytes()
    except OSError:
        stack_source = b"{}"
    builder = Path(__file__).read_bytes()  # a change to how it is built is a new build too
    compact = _without_gc(
        lambda: cached(
            "catalogue",
            [
                ("errors.json", source),
                ("stack_errors.json", stack_source),
                ("logmatch.py", builder),
            ],
            lambda: _compact_catalogue(source, stack_source),
            valid=lambda value: isinstance(value, dict) and value.keys() >= _CATALOGUE_KEYS,
        )
    )
    table = Table("errors", {**compact["meta"], "entries": _JsonValues(compact["spans"])})
    catalogue = Catalogue(
        compact["keys"], compact["parts"], compact["anchors"], table, compact["prefixes"]
    )
    catalogue.packages = _JsonValues(compact["package_spans"])
    catalogue.package_versions = compact["package_versions"]
    return catalogue


def _compact_catalogue(source: bytes, stack_source: bytes = b"{}") -> dict[str, Any]:
    """The catalogue as plain data: its matchers (vLLM's messages and those of the packages
    around it), and each message's spans kept as JSON text (decoded only for the few
    messages a log shows)."""
    import json

    from vllm_doctor.knowledge import KnowledgeError

    try:
        data = json.loads(source)
        entries = data["entries"]
    except (ValueError, KeyError, TypeError) as err:
        raise KnowledgeError(f"knowledge table 'errors' cannot be read: {err}") from None
    try:
        stack = json.loads(stack_source)
        packages = stack.get("entries") or {}
        versions = stack.get("packages") or {}
    except (ValueError, AttributeError) as err:
        raise KnowledgeError(f"knowledge table 'stack_errors' cannot be read: {err}") from None
    catalogue = Catalogue.build([*entries, *(k for k in packages if k not in entries)])
    return {
        "meta": {k: v for k, v in data.items() if k != "entries"},
        "keys": catalogue.keys,
        "parts": catalogue.parts,
        "anchors": catalogue.by_anchor,
        "prefixes": catalogue.prefixes,
        "spans": {key: json.dumps(spans, separators=(",", ":")) for key, spans in entries.items()},
        "package_spans": {
            key: json.dumps(spans, separators=(",", ":")) for key, spans in packages.items()
        },
        "package_versions": versions,
    }


class _JsonValues(Mapping[str, Any]):
    """A mapping whose values are stored as JSON text and decoded on first access."""

    def __init__(self, texts: dict[str, str]):
        self._texts = texts
        self._decoded: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        try:
            return self._decoded[key]
        except KeyError:
            import json

            value = self._decoded[key] = json.loads(self._texts[key])
            return value

    def __contains__(self, key: object) -> bool:
        return key in self._texts

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)


T = TypeVar("T")


def _without_gc(make: Callable[[], T]) -> T:
    """Tens of thousands of small objects, none cyclic: the cyclic collector would only rescan
    them again and again while they are made (a third of the time)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return make()
    finally:
        if enabled:
            gc.enable()


# -- one scan of a log for everything -------------------------------------------------------------
@dataclass
class LogScan:
    """A log read once: its cleaned text and where every needed literal occurs (with the
    catalogue it was scanned for, when one was)."""

    text: str
    hits: dict[str, list[int]] = field(default_factory=dict)
    catalogue: Catalogue | None = None
    _messages: list[CatalogueHit] | None = None

    def signature_lines(self, signatures: Iterable[Signature], limit: int = 3) -> list[str]:
        lines: list[str] = []
        for sig in signatures:
            for _start, end in signature_spans(sig, self.text, self.hits, limit):
                # the line where the match ends: for a multi-line signature, the error line
                line = line_at(self.text, max(_start, end - 1))
                if line not in lines:
                    lines.append(line)
                if len(lines) >= limit:
                    return lines
        return lines

    def catalogue_hits(self) -> list[CatalogueHit]:
        """The catalogue messages the log shows (none when it was scanned without one)."""
        if self._messages is None:
            self._messages = (
                self.catalogue.match(self.text, self.hits, limit=MAX_MESSAGE_HITS)
                if self.catalogue is not None
                else []
            )
        return self._messages

    def message_lines(self, signatures: Iterable[Signature], limit: int = 3) -> list[str]:
        """Lines where the catalogue found a message one of the signatures quotes (in full,
        or in part: then the line says which message it was read as)."""
        hits = self.catalogue_hits()
        if not hits:
            return []
        lines: list[str] = []
        for sig in signatures:
            if sig.unless is not None and signature_spans(sig.unless, self.text, self.hits, 1):
                continue
            for hit in hits:
                if not sig.quotes(hit.key.partition(": ")[2]) or not _shows_the_quote(sig, hit):
                    continue
                shown = hit.template if len(hit.template) <= 120 else hit.template[:119] + "…"
                line = hit.line if hit.complete else f"{hit.line}  [read as: {shown}]"
                if line not in lines:
                    lines.append(line)
                if len(lines) >= limit:
                    return lines
        return lines

    def rule_lines(self, signatures: list[Signature], limit: int = 3) -> list[str]:
        """Where the signatures match, else where the catalogue found a message they quote."""
        return self.signature_lines(signatures, limit) or self.message_lines(signatures, limit)


def _shows_the_quote(sig: Signature, hit: CatalogueHit) -> bool:
    """A message seen in part names the signature's failure only when the part the log shows
    holds the signature's longest literal run (what makes it that failure)."""
    if hit.complete:
        return True
    return max(sig.runs(), key=len) in hit.shown


def scan_log(
    text: str, signatures: Iterable[Signature] = (), catalogue: Catalogue | None = None
) -> LogScan:
    literals: set[str] = set()
    for sig in signatures:
        literals |= sig.literals()
    cleaned = clean(text)
    if len(cleaned) <= SMALL_LOG:
        # a small log costs less to walk once, looking each position's first characters up in
        # an index of the literals, than building an automaton (the catalogue's index is part
        # of its compact build)
        index = dict(catalogue.prefixes) if catalogue is not None else {}
        for literal in literals:
            index[literal[:PREFIX]] = (*index.get(literal[:PREFIX], ()), literal)
        return LogScan(cleaned, _scan_indexed(cleaned, index), catalogue)
    if catalogue is not None:
        literals |= catalogue.anchors()
    return LogScan(cleaned, _finder(frozenset(literals)).scan(cleaned), catalogue)


def prefix_index(literals: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Literals by their first PREFIX characters (every literal has at least that many)."""
    index: dict[str, list[str]] = {}
    for literal in literals:
        index.setdefault(literal[:PREFIX], []).append(literal)
    return {start: tuple(found) for start, found in index.items()}


def _scan_indexed(text: str, index: dict[str, tuple[str, ...]]) -> dict[str, list[int]]:
    """Literal → start of each occurrence (as the automaton gives them), through the index."""
    hits: dict[str, list[int]] = {}
    get, starts = index.get, text.startswith
    for at in range(len(text) - PREFIX + 1):
        candidates = get(text[at : at + PREFIX])
        if candidates:
            for literal in candidates:
                if starts(literal, at):
                    found = hits.setdefault(literal, [])
                    if len(found) < MAX_HITS_PER_LITERAL:
                        found.append(at)
    return hits


@lru_cache(maxsize=4)
def _finder(literals: frozenset[str]) -> _LiteralFinder:
    return _LiteralFinder(literals)


# -- the vLLM version a log names --------------------------------------------------------------
# the banners: "vLLM API server version X" (api_server.py, every release), from 0.15.0 `vllm
# serve`'s log_version_and_model (entrypoints/utils.py; common/startup.py by 0.33.0): "vLLM
# server version X, serving model M", or the logo whose middle line ends "▀▄▀ █  version X"
# (colour codes around the version unless monochrome)
_COLOUR = r"(?:\x1b\[[\d;]*m)*"  # colour codes around the logo's version
_VERSION_LINES = re.compile(
    r"vLLM (?:API )?server version (\d+\.\d+[\w.+-]{0,40})"
    r"|LLM engine \(v(\d+\.\d+[\w.+-]{0,40})\)"
    rf"|▀▄▀ █{_COLOUR}\s+version\s+{_COLOUR}(\d+\.\d+[\w.+-]{{0,40}})"
    r"|vllm[ =]=?=?v?(\d+\.\d+\.\d+[\w.+-]{0,40})"
)


def version_in_log(text: str) -> str | None:
    """The vLLM version the log states (the API server's banner or the engine's first line)."""
    match = _VERSION_LINES.search(text[:2_000_000])
    if not match:
        return None
    return next(g for g in match.groups() if g).rstrip(".,)")
