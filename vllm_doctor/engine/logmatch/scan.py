"""One scan of a log for everything: the rules' signatures and the catalogue's messages from
one literal pass, and a rule named through the catalogue message its signature quotes.

A signature that quotes one catalogue message (every literal run of it, in order, in the
message's template) also finds the failure wherever the catalogue found that message, in full
or in part (``LogScan.message_lines``), so a rule is named from a wrapped line or a
neighbouring release's wording of its message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from vllm_doctor.engine.logmatch.catalogue import Catalogue, CatalogueHit, display
from vllm_doctor.engine.logmatch.signature import Signature, signature_spans
from vllm_doctor.engine.logmatch.text import (
    PREFIX,
    SMALL_LOG,
    clean,
    finder,
    line_at,
    scan_indexed,
)

MAX_MESSAGE_HITS = 50  # catalogue messages one scan keeps for the rules named through them


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

    def rule_lines(self, signatures: list[Signature], limit: int = 3) -> list[str]:
        """Where the signatures match, else where the catalogue found a message they quote."""
        return self.signature_lines(signatures, limit) or self.message_lines(signatures, limit)


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
        literals |= catalogue.anchors()
    return LogScan(cleaned, finder(frozenset(literals)).scan(cleaned), catalogue)
