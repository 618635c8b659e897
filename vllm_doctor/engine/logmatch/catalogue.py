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

import functools
import itertools
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vllm_doctor.engine.logmatch.text import line_at, prefix_index

ANCHOR = 24  # characters of a catalogue message's literal looked for first
MIN_ANCHOR = 12  # the extractor keeps only messages with a part this long
CATALOGUE_WINDOW = 4096  # characters of context verified around a catalogue hit
PARTIAL_SHARE = 0.6  # a message cut short: this share of its literal text, in order
MIN_SENTENCE = 30  # a message seen in part: at least this much of its literal text
# a message whose literal text is shorter than this says little on its own ("Unsupported
# architecture", "kernel {*} does not support {*}"): it is read only where a message starts
SPECIFIC = 40
MAX_TIED_PARTS = 3  # more messages than this read from one fragment: reported as one
WRAP_LINES = 3  # lines after the hit's line a wrapped message may run on to

_SPACES = re.compile(r"\s+")
# where a sentence of a message ends inside one literal part ("… (2.1 GiB). Decrease …")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(\[])")
_LETTERS = re.compile(r"[A-Za-z]")
# what a log line starts with before the message, in any order, repeated: ANSI colour is
# gone already (text.clean); a Ray or vLLM process tag "(EngineCore_DP0 pid=123)",
# "(RayWorkerWrapper pid=123, ip=10.0.0.2)"; torchrun's "[rank0]:"; docker compose's
# "vllm-1  | "; kubectl's "[pod/name/container] "; an ISO timestamp; vLLM's own header
# "ERROR 11-23 05:10:11 [core.py:123] " (before 0.6: "ERROR 08-02 18:15:15 worker.py:226] "); Python
# logging's default "ERROR:root:" and uvicorn's "ERROR:    "
_RECORD_PREFIX = re.compile(
    r"(?:[ \t]*(?:"
    r"\([A-Za-z_][\w.-]{0,80}(?: pid=\d{1,10})?(?:, ip=[\w.:-]{1,64})?\)"
    r"|\(pid=\d{1,10}(?:, ip=[\w.:-]{1,64})?\)"
    r"|\[rank\d{1,6}\]:"
    r"|[\w.-]{1,80}[ \t]{1,40}\|(?=[ \t]|$)"
    r"|\[pod/[^\]\s]{1,250}\]"
    r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[ \t]{1,8}\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
    r"(?:\.\d{1,6})?(?:[ \t]{1,8}\[[^\]\n]{1,120}\]|[ \t]{1,8}[\w.-]{1,80}:\d{1,6}\])?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:[\w.]{1,80}:|[ \t]{1,8})"
    r"))+[ \t]?"
)
# where a message starts when the line does not begin with it: after its exception class
# ("RuntimeError: ", "torch.OutOfMemoryError: "), pydantic's "Value error, ", argparse's
# "argument --name: ", a quote, torch's "CUDA error: " before the CUDA runtime's error string,
# NCCL's "NCCL WARN " before its warning
_MESSAGE_START = re.compile(
    r"(?:[A-Za-z_][\w.]{0,120}(?:Error|Exception|Exit|Interrupt|Warning): ?|Value error, ?"
    r"|argument [\w/-]{1,120}: ?|[`'\"] ?|CUDA error: ?|NCCL WARN ?)$"
)
# a message that only points at a cause shown elsewhere ("Engine core initialization failed.
# See root cause above.", "EngineCore failed to start."): it never names the cause first
_POINTS_ELSEWHERE = re.compile(
    r"root cause|stack trace|traceback above|\bfailed to start\.?$", re.IGNORECASE
)

WILDCARD = "{*}"
_WILDCARD_SPLIT = re.compile(r"\s*\{\*\}\s*")
_WILDCARD_SPACING = re.compile(r"(?<=\w)(?=\{\*\})|(?<=\{\*\})(?=\w)")


def display(template: str) -> str:
    """A catalogue template for people: ``{*}`` spaced from the words beside it."""
    return _WILDCARD_SPACING.sub(" ", template)


# a value any generic class takes (\d+, [\d.]+, \S+, \w+, .+), never a name a signature
# spells out
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
    squeezed: tuple[str, ...] = ()  # the pieces without whitespace (a wrap may fall anywhere)
    # too short to say much on its own, and not open at its start: read only where a
    # message starts (a line's start, after an exception class)
    anchored: bool = False
    points_elsewhere: bool = False  # a wrapper that names no cause ("See root cause above.")

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
        literal_chars = sum(map(len, parts))
        return cls(
            key,
            key.partition(": ")[0],
            parts,
            literal_chars,
            tuple(pieces),
            tuple(ends),
            tuple(follows),
            tuple(_SPACES.sub("", piece) for piece in pieces),
            literal_chars < SPECIFIC and not template.startswith(WILDCARD),
            bool(_POINTS_ELSEWHERE.search(template)),
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
    # the other wordings of the message the same line is read as (another release's tail,
    # with or without a parenthesis): their keys, whether the line shows each whole, and
    # each template up to what the line shows
    wordings: tuple[tuple[str, bool, str], ...] = ()
    # a wrapper that only points at a cause shown elsewhere ("See root cause above.")
    points_elsewhere: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "exception": self.cls,
            "template": self.template,
            "matched_line": self.line,
            "complete": self.complete,
        }

    def readings(self) -> list[tuple[str, bool, str]]:
        """(key, complete, the template up to what the line shows) of this message and of
        every other wording of it the same line shows."""
        return [(self.key, self.complete, self.shown), *self.wordings]


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
    def build(
        cls, keys: Iterable[str], table: Any = None, wrapped: Container[str] | None = None
    ) -> Catalogue:
        """The matchers of ``keys``; the messages in ``wrapped`` (all without it) are also
        looked for by the end of their longest part (found after a wrap in their first words)."""
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
            longest_part = max(parts, key=len)
            longest = longest_part[:ANCHOR]
            by_anchor.setdefault(longest, []).append(index)
            first = parts[0][:ANCHOR]
            if first != longest and len(parts[0]) >= MIN_ANCHOR:
                by_anchor.setdefault(first, []).append(index)
            # and the end of its longest part: a terminal's wrap inside the start's anchor
            # (a long record prefix puts the message at the end of a line) leaves the end
            # whole on the next line, and the window read around a hit takes the line before
            tail = longest_part[-ANCHOR:].strip()
            if (
                (wrapped is None or key in wrapped)
                and len(longest_part) > ANCHOR
                and len(tail) >= MIN_ANCHOR
                and tail not in longest
            ):
                by_anchor.setdefault(tail, []).append(index)
        return cls(names, all_parts, {a: tuple(i) for a, i in by_anchor.items()}, table)

    def _longest(self, index: int) -> str:
        return max(self.parts[index], key=len)

    def entry(self, index: int) -> _Entry:
        found = self._entries.get(index)
        if found is None:
            found = self._entries[index] = _Entry.of(self.keys[index], self.parts[index])
        return found

    def anchors(self) -> set[str]:
        return set(self.by_anchor)

    @functools.cached_property
    def anchor_set(self) -> frozenset[str]:
        """The anchors, kept (a large log's scan keeps its automaton by this set)."""
        return frozenset(self.by_anchor)

    def match(self, text: str, hits: dict[str, list[int]], limit: int = 20) -> list[CatalogueHit]:
        verified: dict[tuple[int, int], tuple[bool, int, int] | None] = {}  # (line, entry)
        best: dict[int, CatalogueHit] = {}  # entry → first hit
        # line start → [((literal characters matched, complete), entry)]
        per_line: dict[int, list[tuple[tuple[int, bool], int]]] = {}
        windows: dict[int, _Window] = {}
        for anchor, positions in hits.items():
            for index in self.by_anchor.get(anchor, ()):
                longest = self._longest(index)
                tail = not longest.startswith(anchor) and longest.endswith(anchor)
                for pos in positions:
                    line_start = text.rfind("\n", 0, pos) + 1
                    if (line_start, index) in verified or (
                        index in best and best[index].position <= line_start
                    ):
                        continue
                    if tail and not _wrapped_into(text, line_start, longest):
                        continue  # the end of a message not wrapped here: its start finds it
                    window = windows.get(line_start)
                    if window is None:
                        window = windows[line_start] = _Window.around(text, line_start, pos)
                    result = _verify(self.entry(index), window)
                    verified[(line_start, index)] = result
                    if result is None:
                        continue
                    complete, score, shown = result
                    per_line.setdefault(line_start, []).append(((score, complete), index))
                    if index not in best or best[index].position > line_start:
                        entry = self.entry(index)
                        template = entry.key.partition(": ")[2]
                        shown_at = _start_above(text, line_start, entry)
                        best[index] = CatalogueHit(
                            entry.key,
                            entry.cls,
                            display(template),
                            line_at(text, pos if shown_at == line_start else shown_at),
                            line_start,
                            complete,
                            template[:shown],
                            points_elsewhere=entry.points_elsewhere,
                        )
        keep: set[int] = set()
        for line_start, candidates in per_line.items():
            kept, readable = self._read_at(text, line_start, candidates, windows[line_start])
            keep.update(kept)
            for i in kept:
                if best[i].position != line_start:
                    continue
                others = [j for j in readable if j != i and self.entry(j).cls == best[i].cls]
                best[i].wordings = tuple(
                    (self.keys[j], *self._shown(j, verified[(line_start, j)])) for j in others
                )
        # the cause first: a message that only points at a cause shown elsewhere ("See root
        # cause above.") after every other; what vLLM raised before what it logged about it
        # ("EngineCore failed to start." is logged above the traceback of the exception that
        # stopped it); then log order
        chosen = sorted(
            (i for i in best if i in keep),
            key=lambda i: (
                self.entry(i).points_elsewhere,
                best[i].cls.startswith("log."),
                best[i].position,
                best[i].key,
            ),
        )
        return [best[i] for i in chosen[:limit]]

    def _shown(self, index: int, result: tuple[bool, int, int] | None) -> tuple[bool, str]:
        complete, _score, shown = result or (False, 0, 0)
        return complete, self.keys[index].partition(": ")[2][:shown]

    def _read_at(
        self,
        text: str,
        line_start: int,
        candidates: list[tuple[tuple[int, bool], int]],
        window: _Window,
    ) -> tuple[list[int], list[int]]:
        """The messages one line is read as, of those found there: the most specific (the
        most literal text matched, a message seen whole before one seen in part), and among
        equals the one whose exception class the line names. A message of another exception
        class than the one(s) the line names is not what the line shows (a package's
        "RuntimeError: Could not find nvcc" is not vLLM's "AssertionError: Could not find {*}
        in nodes {*}", however much of its text the two share), nor one that the code of the
        traceback's innermost frame cannot raise (FlashInfer's frame raised FlashInfer's
        message, never a vLLM message with the same words). A fragment that more than
        MAX_TIED_PARTS messages share is reported once (the message of the newest release).
        Returns the messages kept and every message the line could be read as (the other
        wordings among them)."""
        named_classes = set(_NAMED_EXCEPTION.findall(_line(text, line_start)))
        raised_in = raising_module(text, line_start)
        scored = [
            (score, i)
            for score, i in candidates
            if not _another_class(self.entry(i).cls, named_classes)
            and self._may_raise(i, raised_in)
        ]
        if not scored:
            return [], []
        # a wrapper that only points at the cause ("Worker failed with error '...', please
        # check the stack trace above for the root cause") never hides the message it quotes:
        # the line is read as the best of each
        wrappers = [(sc, i) for sc, i in scored if self.entry(i).points_elsewhere]
        kept = self._most_specific(wrappers, window) if wrappers else []
        wrapper_text = " ".join(self.keys[i] for i in kept)
        # a message whose words are all the wrapper's own ("{*} failed with error {*}") is
        # the wrapper read again, not what it quotes
        quoted = [
            (sc, i)
            for sc, i in scored
            if not self.entry(i).points_elsewhere
            and not all(part.strip() in wrapper_text for part in self.parts[i])
        ]
        found = self._most_specific(quoted, window) if quoted else []
        return found + kept, [i for _, i in scored]

    def _most_specific(
        self, scored: list[tuple[tuple[int, bool], int]], window: _Window
    ) -> list[int]:
        top = max(score for score, _ in scored)
        tied = [i for score, i in scored if score == top]
        if not top[1] and len(tied) > MAX_TIED_PARTS:
            # a fragment many messages share: one of them stands for the line, the others
            # are kept as its other readings, never reported as so many findings
            tied = [self._newest(tied)]
        named = [i for i in tied if f"{self.entry(i).cls}:" in window.spaced]
        return named or tied

    def _newest(self, indexes: list[int]) -> int:
        """The message of the newest release among ``indexes`` (the first without a table)."""
        if self.table is None:
            return indexes[0]
        order = {release: n for n, release in enumerate(self.table.releases)}

        def newest(index: int) -> int:
            spans = self.table.spans(self.keys[index])
            return max((order.get(span.last, -1) for span in spans), default=-1)

        return max(indexes, key=newest)

    def modules(self, key: str) -> set[str]:
        """The top-level modules whose code raises the message: ``vllm`` for vLLM's own, the
        packages' for the messages of the packages around it (their sites' first folder)."""
        found: set[str] = set()
        if key not in self.packages or (self.table is not None and key in self.table):
            found.add("vllm")
        for spans in self.packages.get(key, {}).values():
            found.update(site[0].split("/", 1)[0] for span in spans for site in span["sites"])
        return found

    def _may_raise(self, index: int, module: str | None) -> bool:
        entry = self.entry(index)
        if module is None or entry.cls.startswith("log.") or entry.cls == "response":
            return True  # no frame right above, or a message that is logged, not raised
        return module in self.modules(entry.key)


# an exception class as a traceback's last line (or a log line quoting one) names it
_NAMED_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt))\s*:")
# a traceback frame: File "/…/site-packages/flashinfer/jit/cpp_ext.py", line 83, in get_cuda_path
_FRAME = re.compile(r'File "([^"\n]{1,1000})", line \d+')
_PACKAGES_DIR = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][\w]*)")
_VLLM_DIR = re.compile(r"(?:^|[/\\])vllm[/\\]")
FRAME_LOOKBACK = 6  # lines above an exception line searched for its innermost frame


def raising_module(text: str, line_start: int) -> str | None:
    """The top-level module of the traceback frame right above the exception line at
    ``line_start`` (the code that raised it: ``flashinfer``, ``deep_gemm``, ``vllm``, ...),
    or None: no frame right above, or a path that names no installed package."""
    end = line_start
    for _ in range(FRAME_LOOKBACK):
        if end <= 0:
            return None
        start = text.rfind("\n", 0, end - 1) + 1
        line = strip_prefix(text[start : end - 1]).strip()
        end = start
        if not line or _NAMED_EXCEPTION.match(line) or line.startswith("During handling"):
            return None  # the line above is not this traceback's code
        frame = _FRAME.match(line)
        if frame is None:
            continue  # the frame's source line, or the carets under it
        path = frame.group(1)
        package = _PACKAGES_DIR.search(path)
        if package:
            return package.group(1)
        return "vllm" if _VLLM_DIR.search(path) else None
    return None


def _wrapped_into(text: str, line_start: int, part: str) -> bool:
    """The line above ``line_start`` ends with the first characters of ``part`` (the part
    was wrapped onto this line inside its first ANCHOR characters)."""
    if line_start == 0:
        return False
    end = line_start - 1
    if end > 0 and text[end - 1] == "\r":
        end -= 1
    above = text[max(0, end - ANCHOR) : end].rstrip()
    return any(above.endswith(part[:k]) for k in range(3, min(len(above), ANCHOR) + 1))


def _start_above(text: str, line_start: int, entry: _Entry) -> int:
    """Where the message read at ``line_start`` begins: that line, or the line above when the
    line does not show the message's first words and the line above does (found by the end of
    its text after a wrap)."""
    head = entry.squeezed[0][: MIN_ANCHOR // 2] if entry.squeezed else ""
    if not head or line_start == 0 or head in _SPACES.sub("", _line(text, line_start)):
        return line_start
    above = text.rfind("\n", 0, line_start - 1) + 1
    return above if head[:3] in _SPACES.sub("", _line(text, above)) else line_start


def strip_prefix(line: str) -> str:
    """The line without what a logger, a process tag or a container runtime put before the
    message (``_RECORD_PREFIX``)."""
    prefix = _RECORD_PREFIX.match(line)
    return line[prefix.end() :] if prefix else line


def _line(text: str, line_start: int) -> str:
    end = text.find("\n", line_start)
    return text[line_start : end if end != -1 else len(text)]


def _another_class(cls: str, named: set[str]) -> bool:
    """The line names exception classes, none of them this message's: another exception's
    text that happens to share this message's words."""
    if not named or cls.startswith("log.") or cls == "response":
        return False
    return cls.rpartition(".")[2] not in named


class _Window:
    """The text around a hit as a message is read in it: the line before the hit's, the hit's
    and up to WRAP_LINES after it (a message wrapped by a terminal, or quoted on several
    lines), each without its record prefix; ``spaced`` joins them with a space, whitespace
    collapsed; ``squeezed`` has no whitespace at all, so a wrap inside a word or between two
    reads the same (made when first asked for, as are the lines' starts)."""

    __slots__ = ("_lines", "_squeezed", "_starts", "spaced")

    def __init__(self, lines: list[str]):
        self._lines = lines
        self.spaced = _SPACES.sub(" ", "\n".join(lines)).strip()
        self._squeezed: str | None = None
        self._starts: frozenset[int] | None = None

    @classmethod
    def around(cls, text: str, line_start: int, pos: int) -> _Window:
        lo = max(0, pos - CATALOGUE_WINDOW)
        hi = min(len(text), pos + CATALOGUE_WINDOW)
        begin = text.rfind("\n", 0, max(0, line_start - 1)) + 1 if line_start else 0
        end = line_start
        for _ in range(WRAP_LINES + 1):
            nxt = text.find("\n", end + 1 if end > line_start else line_start)
            end = len(text) if nxt == -1 else nxt
            if nxt == -1 or end >= hi:
                break
        raw = text[max(begin, lo) : min(end, hi)].split("\n")
        return cls([strip_prefix(line) for line in raw])

    @property
    def squeezed(self) -> str:
        if self._squeezed is None:
            self._squeezed = _SPACES.sub("", self.spaced)
        return self._squeezed

    def message_starts_at(self, at: int) -> bool:
        """A message can start here: a line's start, or right after an exception class
        (``RuntimeError: ``), pydantic's ``Value error,`` or a quote."""
        if self._starts is None:
            starts, offset = [], 0
            for raw in self._lines:
                line = _SPACES.sub(" ", raw).strip()
                if line:
                    starts.append(offset)
                    offset += len(line) + 1
            self._starts = frozenset(starts)
        return at in self._starts or bool(_MESSAGE_START.search(self.spaced, max(0, at - 130), at))


def _walk(
    entry: _Entry, pieces: tuple[str, ...], text: str, window: _Window | None = None
) -> tuple[list[int], bool]:
    """The pieces found in order in ``text`` from the first (their indexes), stepping over a
    piece without letters that is not there ("), (" where another release prints no
    parenthesis), and whether every piece was found. A sentence that follows another in the
    same literal part must follow it in the text too (a space between them at most). With
    ``window`` (a short message), the first piece must be where a message starts."""
    found: list[int] = []
    at, whole = 0, True
    for index, piece in enumerate(pieces):
        where = text.find(piece, at)
        if index == 0 and window is not None:
            while where != -1 and not window.message_starts_at(where):
                where = text.find(piece, where + 1)
        if where != -1 and entry.follows[index] and found and found[-1] == index - 1:
            where = where if where - at <= 1 else -1
        if where == -1:
            if found and not _LETTERS.search(entry.pieces[index]):
                whole = False
                continue
            return found, False
        found.append(index)
        at = where + len(piece)
    return found, whole


def _verify(entry: _Entry, window: _Window) -> tuple[bool, int, int] | None:
    """(complete, literal characters matched, where the shown part of the template ends),
    or None: the window does not show the message. Shown in part: at least MIN_SENTENCE
    characters of its literal text, and most of it (PARTIAL_SHARE) or every piece up to the
    end of a sentence. A short message (``_Entry.anchored``) is read only where a message
    starts, with the spacing the log gives it."""
    best: list[int] = []
    for squeezed in (False, True):
        if squeezed and entry.anchored:
            break  # a short message is read with the spacing the log gives it
        found, whole = (
            _walk(entry, entry.squeezed, window.squeezed)
            if squeezed  # made only when the spaced reading was not whole
            else _walk(entry, entry.pieces, window.spaced, window if entry.anchored else None)
        )
        if whole:
            return True, entry.literal_chars, entry.ends[-1]
        if sum(len(entry.pieces[i]) for i in found) > sum(len(entry.pieces[i]) for i in best):
            best = found
    if not best or best[0] != 0:
        return None
    matched = sum(len(entry.pieces[i]) for i in best)
    if max(len(entry.pieces[i]) for i in best) < 12 or matched < MIN_SENTENCE:
        return None
    last = entry.pieces[best[-1]].rstrip()
    if matched >= PARTIAL_SHARE * entry.literal_chars or last.endswith((".", "!", "?")):
        return False, matched, entry.ends[best[-1]]
    return None
