"""The log as the matchers read it: colour codes and carriage returns gone, every literal the
matchers need located in one pass, quoted lines cut and redacted, and the vLLM version the
log states.

One pass finds every literal (each signature part's longest literal, each catalogue
message's anchors): a small log through an index of the literals' first characters, a
larger one through an Aho–Corasick automaton, a very large one through an RE2 set first;
only the text around those hits is looked at again, in windows of bounded size.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

MIN_PART_LITERAL = 4  # a signature part needs a literal this long to be prefiltered
MAX_HITS_PER_LITERAL = 2000  # occurrences of one literal looked at (a log of repeated lines)
SMALL_LOG = 100_000  # characters up to which literals are found by their first 4
LARGE_LOG = 4_000_000  # characters from which the literal scan takes the RE2-set path
PREFIX = MIN_PART_LITERAL  # characters of a literal that index it for the small-log scan
FOUND_ONE_BY_ONE = 32  # literals beside the catalogue's found with str.find, not an automaton

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)")


def _re2() -> tuple[Any, Any]:
    from vllm_doctor.engine.linear import re2_module

    return re2_module()


def clean(text: str) -> str:
    """The log without ANSI colour codes and carriage returns (same line structure), and
    with JSON's escaped quotes read as quotes: a client's log quotes the server's error as a
    JSON body (``"message": "\\"auto\\" tool choice requires ..."``)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if '\\"' in text:
        text = text.replace('\\"', '"')
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
            hits[literal] = occurrences(text, literal)
        return hits


def occurrences(text: str, literal: str, limit: int = MAX_HITS_PER_LITERAL) -> list[int]:
    """The starts of the first ``limit`` occurrences of ``literal`` in ``text``."""
    found: list[int] = []
    at = text.find(literal)
    while at != -1 and len(found) < limit:
        found.append(at)
        at = text.find(literal, at + 1)
    return found


def prefix_index(literals: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Literals by their first PREFIX characters (every literal has at least that many)."""
    index: dict[str, list[str]] = {}
    for literal in literals:
        index.setdefault(literal[:PREFIX], []).append(literal)
    return {start: tuple(found) for start, found in index.items()}


def scan_indexed(text: str, index: dict[str, tuple[str, ...]]) -> dict[str, list[int]]:
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
def finder(literals: frozenset[str]) -> _LiteralFinder:
    return _LiteralFinder(literals)


def scan_both(text: str, kept: frozenset[str], own: Iterable[str]) -> dict[str, list[int]]:
    """What ``finder(kept | own).scan(text)`` gives, keys in the same order. ``kept``: the
    catalogue's anchors (tens of thousands: ~0.15 s to build into an automaton), whose finder
    is kept for every ``own`` set; a few literals of one's own (a rule's signatures) are then
    found one by one (str.find: ~0.4 ms per literal and MB, against ~10 ms per MB for a
    second automaton pass) and put in the automaton's order (a literal's first occurrence's
    end, the longer first where two end together). Many literals, or a log of LARGE_LOG
    characters or more (the RE2 set's order), go through one finder of both sets."""
    rest = frozenset(literal for literal in own if literal) - kept
    if len(rest) > FOUND_ONE_BY_ONE or len(text) > LARGE_LOG:
        return finder(kept | rest).scan(text)
    hits = finder(kept).scan(text)
    if not rest:
        return hits
    for literal in rest:
        found = occurrences(text, literal)
        if found:
            hits[literal] = found
    return {
        literal: hits[literal]
        for literal in sorted(hits, key=lambda lit: (hits[lit][0] + len(lit), -len(lit)))
    }


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
