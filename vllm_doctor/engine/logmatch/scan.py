"""One scan of a log for everything: the rules' signatures and the catalogue's messages from
one literal pass, and a rule named through the catalogue message its signature quotes.

A signature that quotes one catalogue message (every literal run of it, in order, in the
message's template) also finds the failure wherever the catalogue found that message, in full
or in part (``LogScan.message_lines``), so a rule is named from a wrapped line or a
neighbouring release's wording of its message. A signature that quotes no catalogue message (a
driver's, a runtime's, a package's words) is read across wrapped lines itself
(``LogScan.wrapped_lines``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from vllm_doctor.engine.logmatch.catalogue import (
    WRAP_LINES,
    Catalogue,
    CatalogueHit,
    display,
    strip_prefix,
)
from vllm_doctor.engine.logmatch.signature import Signature, signature_spans
from vllm_doctor.engine.logmatch.text import (
    PREFIX,
    SMALL_LOG,
    clean,
    finder,
    line_at,
    occurrences,
    scan_both,
    scan_indexed,
)

MAX_MESSAGE_HITS = 50  # catalogue messages one scan keeps for the rules named through them
# a line this long (with its prefix) may go on on the next one: a terminal's or a logger's wrap
WRAPPED_LINE = 50
MAX_WRAP_WINDOWS = 8  # lines around a signature's literals one signature is read across
WRAP_PIECE = 12  # characters of a literal's start or end looked for where a wrap cut it
# characters up to which a cut literal's pieces are looked for (a pasted log)
WRAP_SEARCH_LOG = 300_000


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
        or in part: then the line says which message it was read as), in the wording the
        log shows or in another release's wording of it that the same line shows too."""
        hits = self.catalogue_hits()
        if not hits:
            return []
        lines: list[str] = []
        for sig in signatures:
            if sig.unless is not None and signature_spans(sig.unless, self.text, self.hits, 1):
                continue
            for hit in hits:
                reading = _quoted_reading(sig, hit)
                if reading is None:
                    continue
                key, complete = reading
                template = display(key.partition(": ")[2])
                shown = template if len(template) <= 120 else template[:119] + "…"
                line = hit.line if complete else f"{hit.line}  [read as: {shown}]"
                if line not in lines:
                    lines.append(line)
                if len(lines) >= limit:
                    return lines
        return lines

    def wrapped_lines(self, signatures: Iterable[Signature], limit: int = 3) -> list[str]:
        """The message a signature matches once a wrapped line is joined with the lines it
        goes on to (each without its record prefix, joined as cut or with the space a wrap
        at a word's end drops), where it matched on no line alone. Only lines long enough to
        have been wrapped are joined, so two records are not read as one message."""
        lines: list[str] = []
        for sig in signatures:
            if sig.unless is not None and signature_spans(sig.unless, self.text, self.hits, 1):
                continue
            starts: set[int] = set()
            for pos in self._wrap_candidates(sig):
                starts.add(self.text.rfind("\n", 0, pos) + 1)
            for start in sorted(starts)[:MAX_WRAP_WINDOWS]:
                pieces = [strip_prefix(line) for line in self._wrapped_around(start)]
                if len(pieces) < 2:
                    continue
                for joined in ("".join(pieces), " ".join(p.strip() for p in pieces)):
                    found = {
                        lit: occurrences(joined, lit) for lit in sig.literals() if lit in joined
                    }
                    spans = signature_spans(sig, joined, found, 1)
                    if spans:
                        line = line_at(joined, spans[0][0], limit=400)
                        if line not in lines:
                            lines.append(line)
                        break
                if len(lines) >= limit:
                    return lines
        return lines

    def _wrap_candidates(self, sig: Signature) -> list[int]:
        """Where a signature's literals, or the start or end of one (a wrap may cut a literal
        in two), occur: the places its message may have been wrapped."""
        found: list[int] = []
        for literal in sig.literals():
            found += self.hits.get(literal, ())[:MAX_WRAP_WINDOWS]
            if len(self.text) > WRAP_SEARCH_LOG or len(literal) < 2 * WRAP_PIECE:
                continue
            for piece in (literal[:WRAP_PIECE], literal[-WRAP_PIECE:]):
                found += occurrences(self.text, piece, MAX_WRAP_WINDOWS)
        return found

    def _wrapped_around(self, start: int) -> list[str]:
        """The line at ``start`` with the lines before it that wrap on to it and the lines it
        wraps on to (a line of at least WRAPPED_LINE characters goes on on the next)."""
        text = self.text
        end = text.find("\n", start)
        line = text[start : len(text) if end == -1 else end]
        before: list[str] = []
        at = start
        while at > 0 and len(before) < WRAP_LINES:
            previous = text.rfind("\n", 0, at - 1) + 1
            candidate = text[previous : at - 1]
            if len(candidate) < WRAPPED_LINE:
                break
            before.insert(0, candidate)
            at = previous
        after: list[str] = []
        last, at = line, end
        while at != -1 and len(last) >= WRAPPED_LINE and len(after) < WRAP_LINES:
            nxt = text.find("\n", at + 1)
            last = text[at + 1 : len(text) if nxt == -1 else nxt]
            if not last.strip():
                break
            after.append(last)
            at = nxt
        return [*before, line, *after]

    def rule_lines(self, signatures: list[Signature], limit: int = 3) -> list[str]:
        """Where the signatures match, else where the catalogue found a message they quote,
        else where they match across wrapped lines."""
        return (
            self.signature_lines(signatures, limit)
            or self.message_lines(signatures, limit)
            or self.wrapped_lines(signatures, limit)
        )


def _quoted_reading(sig: Signature, hit: CatalogueHit) -> tuple[str, bool] | None:
    """(key, complete) of the first reading of the hit's line (its message, then the other
    releases' wordings of it the line shows) that the signature quotes. A message seen in
    part names the signature's failure only when the part the log shows holds the
    signature's longest literal run (what makes it that failure)."""
    for key, complete, shown in hit.readings():
        if not sig.quotes(key.partition(": ")[2]):
            continue
        if complete or max(sig.runs(), key=len) in shown:
            return key, complete
    return None


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
        return LogScan(cleaned, scan_indexed(cleaned, index), catalogue)
    if catalogue is not None:
        return LogScan(cleaned, scan_both(cleaned, catalogue.anchor_set, literals), catalogue)
    return LogScan(cleaned, finder(frozenset(literals)).scan(cleaned), catalogue)
