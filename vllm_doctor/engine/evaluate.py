"""Evaluate rules against facts (and a crash log): one Finding per rule, three verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_doctor.engine.fixstate import AFFECTED, FIXED, UNVERSIONED, FixState, fix_state
from vllm_doctor.engine.rule import SEVERITY_RANK, Rule, lower_confidence
from vllm_doctor.errors import CRASH_HINT, CRASH_PREFIX
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_pins import what_if_hint
from vllm_doctor.facts.schema import supply_hint
from vllm_doctor.redact import redact_text

if TYPE_CHECKING:
    from vllm_doctor.engine.logmatch import LogScan
    from vllm_doctor.logreaders import LogReading

APPLIES, NOT_APPLIES, UNDECIDED = "applies", "not-applies", "undecided"


@dataclass
class Evidence:
    """One fact a finding rests on: its value, where it came from, what the rule asked of it."""

    path: str
    value: Any
    source: str
    test: str  # what the rule asked of the fact ("gt 1", "contains X")

    inferred: bool = False
    # False for a fact that was checked but argues against the condition (a false part of an
    # `any`, the facts a log-only rule's log outweighs): shown as "also checked", not "because"
    supports: bool = True

    @property
    def label(self) -> str:
        """The word before the fact in the terminal's "because X = v" lines."""
        return "because" if self.supports else "also checked:"

    @property
    def aside(self) -> str:
        """The prefix of a fact listed without "because" (markdown, SARIF, JUnit)."""
        return "" if self.supports else "also checked: "

    def to_dict(self) -> dict[str, Any]:
        data = {"fact": self.path, "value": self.value, "source": self.source, "test": self.test}
        if self.inferred:
            data["inferred"] = True
        if not self.supports:
            data["supports"] = False
        return data


@dataclass
class MissingFact:
    """A fact an undecided rule needs: why it is missing and how the user can supply it."""

    path: str
    reason: str
    how: str
    # the fact cannot be known from this kind of input at all (Facts.is_unknowable): --strict
    # names it and does not fail on it
    unknowable: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"fact": self.path, "reason": self.reason, "how_to_supply": self.how}
        if self.unknowable:
            data["unknowable"] = True
        return data


@dataclass
class Finding:
    """What one rule says of one set of facts (and crash log): the verdict (applies, does not
    apply, undecided), the evidence, the facts it still needs, the fix state of the judged
    release, the log lines it matched and what its log reader read there. Every report format
    renders findings; ``to_dict`` is the JSON form (docs/json-output.md)."""

    rule: Rule
    verdict: str
    confidence: str
    evidence: list[Evidence] = field(default_factory=list)
    missing: list[MissingFact] = field(default_factory=list)
    fix_state: FixState | None = None
    log_matches: list[str] = field(default_factory=list)
    suppressed: str | None = None  # reason from the ignore file
    deferred_to: str | None = None  # a more precise rule that applies (rule.defers_to)
    probe_results: list[dict[str, Any]] = field(default_factory=list)
    reading: Any = None  # what the rule's log reader found (logreaders.LogReading)
    # the highest severity the finding may have: "warning" for a rule that applies in only
    # some of the releases an unknown vLLM version could be (engine/over_releases.py)
    severity_cap: str | None = None
    # with the vLLM version unknown and the finding decided over the covered releases: the
    # newest release it applies in, whose facts its workarounds' values are read from
    facts_release: str | None = None

    @property
    def unknowable_here(self) -> bool:
        """Undecided only for facts this kind of input can never supply (MissingFact.
        unknowable): --strict does not fail on it."""
        return (
            self.verdict == UNDECIDED
            and bool(self.missing)
            and all(m.unknowable for m in self.missing)
        )

    @property
    def severity(self) -> str:
        """The rule's severity, lowered to ``severity_cap`` where one is set."""
        if (
            self.severity_cap
            and SEVERITY_RANK[self.severity_cap] < SEVERITY_RANK[self.rule.severity]
        ):
            return self.severity_cap
        return self.rule.severity

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON (docs/json-output.md)."""
        rule = self.rule
        return {
            "code": rule.code,
            "slug": rule.slug,
            "verdict": self.verdict,
            "severity": self.severity,
            "confidence": self.confidence,
            "summary": rule.summary,
            "phase": rule.phase,
            "evidence": [e.to_dict() for e in self.evidence],
            "missing": [m.to_dict() for m in self.missing],
            "fix_state": self.fix_state.to_dict() if self.fix_state else None,
            "log_matches": self.log_matches,
            "fix": rule.raw.get("fix"),
            "workarounds": rule.raw.get("workarounds", []),
            "probe": rule.probe,
            "probe_results": self.probe_results,
            "log_reading": self.reading.to_dict() if self.reading else None,
            "references": list(rule.references),
            "suppressed": self.suppressed,
            "url": rule.url,
        }


def match_signatures(rule: Rule, log: str | LogScan | None, limit: int = 3) -> list[str]:
    """Lines of the log where one of the rule's signatures matched, else where the error
    catalogue found a message they quote (engine.logmatch)."""
    if not log or not rule.signatures:
        return []
    from vllm_doctor.engine.logmatch import load_catalogue, scan_log

    signatures = [s.compiled() for s in rule.signatures]
    scan = log if not isinstance(log, str) else scan_log(log, signatures, load_catalogue())
    # a quoted log line never carries a secret out
    return [redact_text(line) for line in scan.rule_lines(signatures, limit)]


def scan_for_rules(rules: list[Rule], log_text: str) -> LogScan:
    """One literal scan of the log for every rule's signatures and the error catalogue."""
    from vllm_doctor.engine.logmatch import load_catalogue, scan_log

    return scan_log(
        log_text, [s.compiled() for rule in rules for s in rule.signatures], load_catalogue()
    )


def read_rule_log(rule: Rule, log: str | LogScan, version: str | None) -> LogReading | None:
    """The rule's log reader on the log (its text, as scanned); the vLLM version is the one
    known from the facts, else the one the log states."""
    from vllm_doctor.engine.logmatch import version_in_log
    from vllm_doctor.logreaders import read_log

    if rule.reader is None:
        return None
    text = log if isinstance(log, str) else log.text
    return read_log(rule.reader, text, version or version_in_log(text))


def _missing(facts: Facts, paths: list[str]) -> list[MissingFact]:
    seen, result = set(), []
    for path in paths:
        if path in seen:
            continue
        seen.add(path)
        fact = facts.get(path)
        if fact is not None and fact.possible is not None:
            shown = (
                fact.possible
                if isinstance(fact.possible, str)
                else ", ".join(str(v) for v in fact.possible)
            )
            reason = (
                f"inferred ({fact.detail}): the values it leaves possible ({shown}) "
                "decide differently"
            )
        else:
            reason = facts.why_missing(path) or "not in the inputs given"
        # undecided because a collector crashed: say so, rather than ask for an input
        hint = CRASH_HINT if CRASH_PREFIX in reason else what_if_hint(reason) or supply_hint(path)
        unknowable = fact is None and facts.is_unknowable(path)
        result.append(MissingFact(path, reason, hint, unknowable))
    return result


def _cap_within_margin(rule: Rule, facts: Facts, finding: Finding) -> None:
    """A rule's ``warn_when`` holds: the finding is a warning, with the facts that say so."""
    if rule.warn_when is None:
        return
    outcome = rule.warn_when.evaluate(facts)
    if outcome.value is not True:
        return
    finding.severity_cap = "warning"
    shown = {e.path for e in finding.evidence}
    for test in outcome.evidence:
        fact = facts.get(test.path)
        if fact is not None and test.path not in shown:
            finding.evidence.append(
                Evidence(
                    test.path,
                    fact.value,
                    fact.describe_source(),
                    f"warning only: {test.describe()}",
                    fact.inferred,
                )
            )
            shown.add(test.path)


@dataclass
class _Decision:
    """What decides a rule's verdict: its condition's outcome, the log lines matched and what
    its reader read there, the judged release's fix state (None where the rule was set aside
    before it: a false condition or a log-only rule without a match, a message not its case)."""

    verdict: str
    outcome: Any
    log_matches: list[str]
    reading: Any = None
    state: FixState | None = None


def _decide(
    rule: Rule, facts: Facts, log_text: str | LogScan | None, vllm_tree: Path | None
) -> _Decision:
    outcome = rule.when.evaluate(facts)
    log_matches = match_signatures(rule, log_text)
    if (outcome.value is False or rule.log_only) and not log_matches:
        return _Decision(NOT_APPLIES, outcome, log_matches)
    reading = None
    if log_matches and rule.reader and log_text is not None:
        reading = read_rule_log(rule, log_text, facts.value("vllm.version"))
        if reading is None:  # the message is not the case the rule's reader names
            return _Decision(NOT_APPLIES, outcome, log_matches)
    state = fix_state(rule, facts, vllm_tree)
    if log_matches:  # the failure was seen: the log is stronger evidence than any fact
        verdict = APPLIES
    elif outcome.value is None:
        verdict = UNDECIDED
    elif state.state in (AFFECTED, UNVERSIONED):
        verdict = APPLIES
    elif state.state == FIXED:
        verdict = NOT_APPLIES
    else:
        verdict = UNDECIDED
    return _Decision(verdict, outcome, log_matches, reading, state)


def verdict_of(rule: Rule, facts: Facts, log_text: str | LogScan | None = None) -> str:
    """``evaluate_rule(rule, facts, log_text).verdict``, without the evidence and missing facts
    a finding lists: a judgement over the covered releases asks each release's verdict and
    reads one release's finding."""
    return _decide(rule, facts, log_text, None).verdict


def evaluate_rule(
    rule: Rule, facts: Facts, log_text: str | LogScan | None = None, vllm_tree: Path | None = None
) -> Finding:
    """One rule against the facts (and a crash log, as text or as a shared ``LogScan``).

    A signature matched in the log decides ``applies`` outright (the failure was seen); a
    log-only rule without a match, or a condition that is false, is ``not-applies``. A rule
    with a log reader whose reader finds the message is not its case does not apply either.
    Otherwise the condition decides: unknown leaves the rule undecided with the facts it
    needs (``Finding.missing``); true makes it apply where the judged release is affected
    (engine/fixstate.py: the rule's ranges, or the installed source's fingerprints under
    ``vllm_tree``) and not apply where it is fixed. ``warn_when`` caps an applying finding at
    a warning. ``defers_to`` is not applied here: ``evaluate_rules`` (``defer``) does that
    over all findings. Used by ``check``, ``explain --log``, ``rules test`` and ``rules
    validate`` alike."""
    decided = _decide(rule, facts, log_text, vllm_tree)
    outcome, log_matches, reading, state = (
        decided.outcome,
        decided.log_matches,
        decided.reading,
        decided.state,
    )
    confidence = rule.confidence
    if state is None:
        return Finding(rule, NOT_APPLIES, confidence)
    evidence: dict[str, Evidence] = {}  # one line per fact, listing every test made of it
    held = {id(test) for test in outcome.support}
    for test in outcome.evidence:
        known = evidence.get(test.path)
        if known is not None:
            if test.describe() not in known.test.split("; "):
                known.test += f"; {test.describe()}"
            known.supports = known.supports or id(test) in held
            continue
        fact = facts.get(test.path)
        if fact is not None:
            evidence[test.path] = Evidence(
                test.path,
                fact.value,
                fact.describe_source(),
                test.describe(),
                fact.inferred,
                id(test) in held,
            )
        elif test.op != "exists":
            evidence[test.path] = Evidence(
                test.path,
                None,
                "absent from the inputs",
                test.describe(),
                supports=id(test) in held,
            )

    if state.lowers_confidence:
        confidence = lower_confidence(confidence)
    finding = Finding(
        rule,
        UNDECIDED,
        confidence,
        list(evidence.values()),
        fix_state=state,
        log_matches=log_matches,
        reading=reading,
    )
    if log_matches:
        # The failure was seen: the log is stronger evidence than any fact.
        finding.verdict = APPLIES
        # facts that contradict the cause a log-only rule names make it less certain
        finding.confidence = (
            lower_confidence(rule.confidence)
            if rule.log_only and outcome.value is False
            else rule.confidence
        )
        return finding
    if outcome.value is None:
        finding.missing = _missing(facts, outcome.missing)
        return finding
    if decided.verdict == APPLIES:
        finding.verdict = APPLIES
        _cap_within_margin(rule, facts, finding)
    elif decided.verdict == NOT_APPLIES:
        finding.verdict = NOT_APPLIES
    else:
        finding.missing = (
            _missing(facts, ["vllm.version"])
            if "vllm.version" not in facts
            else [MissingFact("vllm.location", state.detail, supply_hint("vllm"))]
        )
    return finding


def evaluate_rules(
    rules: list[Rule], facts: Facts, log: str | LogScan | None = None
) -> list[Finding]:
    """Every rule against the same facts and log (the log scanned once for all signatures),
    then ``defer``: the findings in the rules' order."""
    scan = scan_for_rules(rules, log) if isinstance(log, str) and log else log
    return defer([evaluate_rule(rule, facts, scan) for rule in rules])


def defer(findings: list[Finding]) -> list[Finding]:
    """A rule with ``defers_to`` does not apply (and is not undecided) where one of those
    rules applies: the precise, curated rule speaks for the cause, once."""
    applying = {f.rule.code for f in findings if f.verdict == APPLIES}
    read_in_log = {f.rule.code for f in findings if f.verdict == APPLIES and f.reading is not None}
    for finding in findings:
        if finding.verdict == NOT_APPLIES:
            continue
        if finding.log_matches:
            # a message seen in the log steps back only for a log reader's rule that named the
            # cause of the same log
            winner = next((code for code in finding.rule.defers_to if code in read_in_log), None)
            if winner is not None:
                finding.verdict, finding.deferred_to = NOT_APPLIES, winner
            continue
        winner = next((code for code in finding.rule.defers_to if code in applying), None)
        if winner is not None:
            finding.verdict = NOT_APPLIES
            finding.deferred_to = winner
            finding.missing = []
    return findings
