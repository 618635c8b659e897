"""What a crash log says: the curated rules it matches, then the vLLM messages it contains.

Used by ``explain --log`` and by ``check --log`` (one scan of the log for both). Curated
rules come first: they name a cause and a fix. Which rules the log shows is decided by the
engine (``evaluate_rules``: the signatures, the rule's log reader, ``defers_to``) on the facts
the command has: ``check`` passes its findings, ``explain --log`` lets the engine judge the
log alone (``log_findings``), so both name the same rules with the same reading. The error catalogue (knowledge table
``errors``) names only what the release source shows — which vLLM file and function raise the
message, under which condition, in which releases — and what that means for the vLLM version
the user runs, never a cause it cannot support.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_doctor.knowledge import ReleaseMatch, Table

from vllm_doctor.engine.evaluate import APPLIES, Finding, evaluate_rules
from vllm_doctor.engine.logmatch import (
    CatalogueHit,
    LogScan,
    display,
    load_catalogue,
    scan_log,
    version_in_log,
)
from vllm_doctor.facts.model import Facts, Source

MAX_MESSAGES = 5  # catalogue messages reported per log (the first is nearest the root cause)


@dataclass
class CatalogueMessage:
    hit: CatalogueHit
    kind: str  # raise | assert | log | assert-line | response
    releases: list[dict[str, Any]]  # [{first, last, sites}] from the knowledge table
    version: str | None = None  # the user's vLLM version, when known
    release: str | None = None  # the covered release it is judged by
    at_release: list[list[str]] | None = None  # sites in that release (None: not raised there)
    note: str = ""  # what the release knowledge says about the user's case
    # the judged release's own wording of the message, when the log line shows it too and
    # the release does not raise the line's wording: template, releases, complete, raised_at
    other_wording: dict[str, Any] | None = None

    @property
    def first(self) -> str:
        return str(self.releases[0]["first"])

    @property
    def last(self) -> str:
        return str(self.releases[-1]["last"])

    def release_ranges(self) -> str:
        return ", ".join(
            r["first"] if r["first"] == r["last"] else f"{r['first']}–{r['last']}"
            for r in self.releases
        )

    def sites(self) -> list[list[str]]:
        """The sites in the user's release, else in the newest release that has the message."""
        return self.at_release if self.at_release is not None else self.releases[-1]["sites"]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.hit.to_dict(),
            "kind": self.kind,
            "raised_at": [
                {"file": f"vllm/{path}", "function": func, "condition": cond or None}
                for path, func, cond in self.sites()
            ],
            "releases": [{"first": r["first"], "last": r["last"]} for r in self.releases],
            "vllm_version": self.version,
            "judged_by_release": self.release,
            "in_that_release": None if self.release is None else self.at_release is not None,
            "release_wording": self.other_wording,
            "note": self.note,
        }


@dataclass
class PackageMessage:
    """A message of a package around vLLM (knowledge table ``stack_errors``): which versions
    of which package raise it, and where; with the vLLM version known, the version of that
    package the release pins."""

    hit: CatalogueHit
    package: str
    spans: list[dict[str, Any]]  # [{first, last, sites}] over the package's versions read
    versions: list[str]  # the package's versions the knowledge read
    note: str = ""
    installed: str | None = None  # the package's version the facts or the log state
    installed_source: str = ""  # where that version was read
    installed_note: str = ""  # whether that version raises the message

    def ranges(self) -> str:
        return ", ".join(
            s["first"] if s["first"] == s["last"] else f"{s['first']}–{s['last']}"
            for s in self.spans
        )

    def sites(self) -> list[tuple[str, str, str | None]]:
        """(file, function, condition) of the newest span; the table keeps file and function
        (the condition only where an older table has it)."""
        return [(s[0], s[1], s[2] if len(s) > 2 else None) for s in self.spans[-1]["sites"]]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.hit.to_dict(),
            "package": self.package,
            "raised_at": [
                {"file": path, "function": func, "condition": cond or None}
                for path, func, cond in self.sites()
            ],
            "versions": [{"first": s["first"], "last": s["last"]} for s in self.spans],
            "versions_read": f"{self.versions[0]}–{self.versions[-1]}" if self.versions else None,
            "installed": self.installed,
            "installed_source": self.installed_source or None,
            "installed_note": self.installed_note or None,
            "note": self.note,
        }


def package_messages(
    scan: LogScan, version: str | None, limit: int = MAX_MESSAGES, facts: Facts | None = None
) -> list[PackageMessage]:
    """The messages of the packages around vLLM the log shows (FlashInfer's JIT and packaging
    checks, transformers, the Hub, torch.distributed, Ray, LMCache, ...), each with the package
    versions that raise it, the version installed (``facts``, else the log's own package
    lines) and the version the vLLM release pins."""
    catalogue = load_catalogue()
    out: list[PackageMessage] = []
    for hit in _hits(catalogue, scan):
        if len(out) >= limit:
            break
        if hit.key not in catalogue.packages:
            continue
        for package, spans in sorted(catalogue.packages[hit.key].items()):
            versions = list(catalogue.package_versions.get(package, ()))
            message = PackageMessage(hit, package, spans, versions)
            message.note = _package_note(package, spans, versions, version)
            message.installed, message.installed_source = _installed(package, facts, scan.text)
            if message.installed is not None:
                message.installed_note = installed_note(message.installed, spans, versions)
            out.append(message)
    return out


def _hits(catalogue: Any, scan: LogScan) -> list[CatalogueHit]:
    """Every catalogue message the log shows, the cause first: vLLM's and the packages' are
    cut to MAX_MESSAGES each, so that one kind never crowds the other out."""
    hits: list[CatalogueHit] = catalogue.match(scan.text, scan.hits, limit=len(catalogue.keys))
    return hits


def _installed(package: str, facts: Facts | None, text: str) -> tuple[str | None, str]:
    """The package's installed version: the facts' ``packages.<name>``, else a package line of
    the log itself (``pip list`` / ``pip freeze`` / collect-env's ``[pip3]`` lines)."""
    fact = facts.get(f"packages.{package}") if facts is not None else None
    if fact is not None and fact.value:
        return str(fact.value), fact.describe_source()
    found = version_in_log_lines(text, package)
    return (found, "a package line of the log") if found else (None, "")


def version_in_log_lines(text: str, package: str) -> str | None:
    """The version a line of the log gives the package: ``name==1.2.3`` anywhere (pip freeze,
    ``vLLM is using nccl==2.28.9``), or a line that starts with the name and a version
    (``pip list``, collect-env's ``[pip3] name==v`` / ``[conda] name v``, ``name: v``).
    Underscores, dots and dashes of the name are one; a CUDA suffix (``-cu12``) is allowed."""
    import re

    name = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", package))
    version = r"v?(\d+(?:\.\d+)+(?:[\w.+!-]*\w)?)"
    pinned = re.compile(rf"(?<![\w.-]){name}(?:-cu\d+)?==\s*{version}", re.IGNORECASE)
    listed = re.compile(
        rf"^[^\S\n]*(?:\[(?:pip3?|conda)\][^\S\n]*)?{name}(?:-cu\d+)?"
        rf"(?:[^\S\n]+version)?(?::[^\S\n]*|[^\S\n]+){version}",
        re.IGNORECASE | re.MULTILINE,
    )
    found = pinned.search(text) or listed.search(text)
    return found.group(1) if found else None


def installed_note(installed: str, spans: list[dict[str, Any]], versions: list[str]) -> str:
    """Whether the installed version lies in a span of the read versions that raise the
    message (a version between two read ones is judged by its neighbours)."""
    from packaging.version import InvalidVersion, Version

    try:
        have = Version(installed)
        inside = any(Version(s["first"]) <= have <= Version(s["last"]) for s in spans)
        newest = Version(versions[-1]) if versions else None
    except InvalidVersion:
        return ""
    if inside:
        return f"{installed} is in the versions that raise it"
    if newest is not None and have > newest:
        return f"{installed} is newer than the versions read (up to {versions[-1]})"
    return (
        f"{installed} is not among the versions that raise it: the message comes from "
        "another install of the package than the one stated (a second environment, a "
        "vendored copy), or the log is from another version"
    )


def _package_note(
    package: str, spans: list[dict[str, Any]], versions: list[str], vllm_version: str | None
) -> str:
    """What the judged vLLM release's pin of the package says about the message."""
    if vllm_version is None:
        return ""
    from vllm_doctor import knowledge

    judged = knowledge.match_release(vllm_version, tuple(knowledge.covered_releases()))
    if judged.release is None:
        return ""
    requirement = knowledge.load("dependencies").get(package, judged.release)
    spec = (
        requirement.value.get("spec")
        if requirement and isinstance(requirement.value, dict)
        else None
    )
    if not spec or not spec.startswith("==") or "," in spec:
        return f"vLLM {judged.release} does not pin {package}" + (
            f" ({package}{spec})" if spec else ""
        )
    pinned = spec[2:]
    if pinned not in versions:
        return (
            f"vLLM {judged.release} pins {package}=={pinned}, a version the knowledge did not read"
        )
    index = versions.index
    raises = any(index(s["first"]) <= index(pinned) <= index(s["last"]) for s in spans)
    return f"vLLM {judged.release} pins {package}=={pinned}, which " + (
        "raises this message" if raises else "does not raise it (another version is installed?)"
    )


@dataclass
class LogReport:
    """One log's report: the rules it shows, the catalogue's messages, the refused options."""

    scan: LogScan
    # (Rule, matched lines, what its log reader found or None): the applying findings that
    # matched the log, in the rules' order
    rule_hits: list[tuple[Any, list[str], Any]] = field(default_factory=list)
    messages: list[CatalogueMessage] = field(default_factory=list)
    package_messages: list[PackageMessage] = field(default_factory=list)
    version: str | None = None
    version_source: str = ""  # "log" | "facts" | "option"
    # argparse's "unrecognized arguments": what the options table says of each refused word
    refused_options: list[str] = field(default_factory=list)


def catalogue_messages(
    scan: LogScan, version: str | None, limit: int = MAX_MESSAGES
) -> list[CatalogueMessage]:
    catalogue = load_catalogue()
    table = catalogue.table
    judged = table.match(version) if version else None
    out: list[CatalogueMessage] = []
    for hit in _hits(catalogue, scan):
        if len(out) == limit:
            break
        spans = table.spans(hit.key)
        if not spans:
            continue
        releases = [{"first": s.first, "last": s.last, "sites": s.value["sites"]} for s in spans]
        releases = _merge_adjacent(releases, table.releases)
        message = CatalogueMessage(hit, _kind(hit), releases, version)
        if judged is not None and version is not None:
            message.release = judged.release
            message.note = _note(table, hit.key, version, judged, message)
        out.append(message)
    return out


def _merge_adjacent(spans: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Spans that follow each other (the message moved, its text did not) as one range; the
    newest span's sites are kept (the user's own release is looked up separately)."""
    index = {r: i for i, r in enumerate(order)}
    merged: list[dict[str, Any]] = []
    for span in spans:
        if merged and index[span["first"]] == index[merged[-1]["last"]] + 1:
            merged[-1] = {
                "first": merged[-1]["first"],
                "last": span["last"],
                "sites": span["sites"],
            }
        else:
            merged.append(dict(span))
    return merged


def _kind(hit: CatalogueHit) -> str:
    if hit.cls.startswith("log."):
        return "log"
    if hit.cls == "response":
        return "response"
    if hit.cls == "AssertionError":
        return "assert-line" if hit.template.startswith("assert ") else "assert"
    return "raise"


def _note(
    table: Table, key: str, version: str, judged: ReleaseMatch, message: CatalogueMessage
) -> str:
    if judged.release is None:
        return f"vLLM {version}: {judged.note}; the message is in {message.release_ranges()}"
    span = table.get(key, judged.release)
    prefix = f"vLLM {version}" + ("" if judged.exact else f" (judged by {judged.release})")
    if span is None:
        message.at_release = None
        index = table.releases.index
        if index(message.first) > index(judged.release):
            change = f"it first appears in {message.first}"
        elif index(message.last) < index(judged.release):
            change = f"it was removed or reworded after {message.last}"
        else:
            change = f"it is in {message.release_ranges()} only"
        reworded = _release_wording(table, message.hit, judged.release)
        if reworded is None:
            return (
                f"{prefix} does not raise this message ({change}); the log may "
                "come from another vLLM version, or from code outside vLLM with the same text"
            )
        other, complete, other_span = reworded
        message.other_wording = {
            "template": display(other.partition(": ")[2]),
            "releases": _ranges(table, other),
            "complete": complete,
            "raised_at": [
                {"file": f"vllm/{path}", "function": func, "condition": cond or None}
                for path, func, cond in other_span.value["sites"]
            ],
        }
        words = message.other_wording["template"]
        words = words if len(words) <= 160 else words[:159] + "…"
        shows = "all of it" if complete else "its first part"
        return (
            f"{prefix} does not raise this wording ({change}); it raises the message in "
            f"other words ({words!r}, releases {message.other_wording['releases']}; the log "
            f"shows {shows})"
        )
    message.at_release = span.value["sites"]
    return f"{prefix} raises this message at the place shown"


def _release_wording(table: Table, hit: CatalogueHit, release: str) -> tuple[str, bool, Any] | None:
    """(key, complete, span) of another wording of the hit's message, one the same log
    line shows too, that the judged release raises (the message reworded between releases:
    a tail added or dropped, a parenthesis, a typo fixed)."""
    for key, complete, _shown in hit.wordings:
        span = table.get(key, release)
        if span is not None:
            return key, complete, span
    return None


def _ranges(table: Table, key: str) -> str:
    spans = _merge_adjacent(
        [{"first": s.first, "last": s.last, "sites": []} for s in table.spans(key)],
        table.releases,
    )
    return ", ".join(
        s["first"] if s["first"] == s["last"] else f"{s['first']}–{s['last']}" for s in spans
    )


def log_only_facts(version: str | None) -> Facts:
    """The facts of a log judged alone: nothing known of the machine, the serve line or the
    model (every area missing, so a rule's condition is unknown and only its signatures and
    log reader decide), and the vLLM version when it is given or the log states it."""
    from vllm_doctor.facts.schema import FACTS

    facts = Facts()
    for area in sorted({path.split(".", 1)[0] for path in FACTS}):
        facts.mark_missing(area, "explain --log reads the log alone")
    if version:
        facts.set("vllm.version", version, Source.USER, "--vllm-version, or the log's own line")
    return facts


def log_findings(rules: list[Any], scan: LogScan, version: str | None) -> list[Finding]:
    """The rules judged on a log alone (``explain --log``): the same engine ``check --log``
    uses, on ``log_only_facts``."""
    return evaluate_rules(rules, log_only_facts(version), scan)


def analyse_log(
    text: str,
    rules: list[Any],
    version: str | None = None,
    version_source: str = "",
    scan: LogScan | None = None,
    findings: list[Finding] | None = None,
    facts: Facts | None = None,
) -> LogReport:
    """Curated rule matches and catalogue messages for one log (one literal scan for both).

    ``findings`` are the engine's findings for the log (``check --log`` passes its own); without
    them the rules are judged on the log alone (``log_findings``); ``facts`` (``check``'s)
    give the installed versions of the packages whose messages the log shows."""
    signatures = [s.compiled() for rule in rules for s in rule.signatures]
    scan = scan or scan_log(text, signatures, load_catalogue())
    report = LogReport(scan)
    if version is None:
        version = version_in_log(scan.text)
        version_source = "log" if version else ""
    if findings is None:
        findings = log_findings(rules, scan, version)
    report.rule_hits = [
        (f.rule, f.log_matches, f.reading)
        for f in findings
        if f.verdict == APPLIES and f.log_matches
    ]
    report.version, report.version_source = version, version_source
    report.messages = catalogue_messages(scan, version)
    report.package_messages = package_messages(scan, version, facts=facts)
    report.refused_options = refused_options(scan.text, version)
    return report


def refused_options(text: str, version: str | None) -> list[str]:
    """For each word of the log's ``unrecognized arguments`` lines: the releases that accept
    the option, the nearest spelling and what the user's release (when known) does."""
    from vllm_doctor.logreaders.options import UNRECOGNIZED

    words = [word for match in UNRECOGNIZED.finditer(text) for word in match.group(1).split()]
    if not words:
        return []
    from vllm_doctor.facts.release import refused_option_hints  # only then: it imports packaging

    return refused_option_hints(words[:100], version)


def scan_for_check(text: str, rules: list[Any]) -> LogScan:
    """The scan `check --log` shares between the rules' signatures and the catalogue."""
    return scan_log(
        text, [s.compiled() for rule in rules for s in rule.signatures], load_catalogue()
    )
