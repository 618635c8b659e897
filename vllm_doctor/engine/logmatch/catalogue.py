"""The error catalogue's matcher: vLLM's messages (knowledge table ``errors``) and those of
the packages around it (``stack_errors``), found in a log whole or in part.

A catalogue entry is verified by finding its literal parts in order in a window of the hit's
line and its neighbours, whitespace collapsed, so prefixes (``(EngineCore_DP0 pid=…)``,
``ERROR 11-23 05:10:11 [core.py:123]``), ANSI colour, pydantic's ``Value error,`` wrapper, a
missing exception class and wrapped lines do not matter. A message is also found from part of
it: cut short (most of its literal text, in order), quoted up to the end of a sentence (its
first sentence, a tail that another release words differently or that the reporter left out),
or without a piece that holds no letters (a parenthesis another release does not print).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vllm_doctor.engine.logmatch.text import line_at, prefix_index

ANCHOR = 24  # characters of a catalogue message's literal looked for first
MIN_ANCHOR = 12  # the extractor keeps only messages with a part this long
CATALOGUE_WINDOW = 4096  # characters of context verified around a catalogue hit
PARTIAL_SHARE = 0.6  # a message cut short: this share of its literal text, in order
MIN_SENTENCE = 30  # a message quoted up to a sentence's end: at least this much literal text

_SPACES = re.compile(r"\s+")
# where a sentence of a message ends inside one literal part ("… (2.1 GiB). Decrease …")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(\[])")
_LETTERS = re.compile(r"[A-Za-z]")

WILDCARD = "{*}"
_WILDCARD_SPLIT = re.compile(r"\s*\{\*\}\s*")
_WILDCARD_SPACING = re.compile(r"(?<=\w)(?=\{\*\})|(?<=\{\*\})(?=\w)")


def display(template: str) -> str:
    """A catalogue template for people: ``{*}`` spaced from the words beside it."""
    return _WILDCARD_SPACING.sub(" ", template)


_FILLER = "1"


def filled_template(template: str) -> list[str]:
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
