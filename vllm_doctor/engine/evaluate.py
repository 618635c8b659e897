"""Evaluate rules against facts (and a crash log): one Finding per rule, three verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.errors import CRASH_HINT, CRASH_PREFIX
from vllm_doctor.redact import redact_text
from vllm_doctor.engine.fixstate import AFFECTED, FIXED, UNVERSIONED, FixState, fix_state
from vllm_doctor.engine.rule import Rule
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.schema import supply_hint

APPLIES, NOT_APPLIES, UNDECIDED = "applies", "not-applies", "undecided"
_CONFIDENCE_DOWN = {"high": "medium", "medium": "low", "low": "low"}


@dataclass
class Evidence:
    path: str
    value: Any
    source: str
    test: str  # what the rule asked of the fact ("gt 1", "contains X")

    def to_dict(self) -> dict[str, Any]:
        return {"fact": self.path, "value": self.value, "source": self.source, "test": self.test}


@dataclass
class MissingFact:
    path: str
    reason: str
    how: str

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.path, "reason": self.reason, "how_to_supply": self.how}


@dataclass
class Finding:
    rule: Rule
    verdict: str
    confidence: str
    evidence: list[Evidence] = field(default_factory=list)
    missing: list[MissingFact] = field(default_factory=list)
    fix_state: FixState | None = None
    log_matches: list[str] = field(default_factory=list)
    suppressed: str | None = None  # reason from the ignore file
    probe_results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def severity(self) -> str:
        return self.rule.severity

    def to_dict(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "code": rule.code,
            "slug": rule.slug,
            "verdict": self.verdict,
            "severity": rule.severity,
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
            "references": list(rule.references),
            "suppressed": self.suppressed,
            "url": rule.url,
        }


def match_signatures(rule: Rule, log_text: str | None, limit: int = 3) -> list[str]:
    """Lines of the log where one of the rule's signatures matched."""
    if not log_text:
        return []
    hits: list[str] = []
    for pattern in rule.signatures:
        for match in pattern.finditer(log_text):
            # the line where the match ends: for a multi-line signature, the error line
            last = max(match.start(), match.end() - 1)
            start = log_text.rfind("\n", 0, last) + 1
            end = log_text.find("\n", last)
            line = log_text[start: end if end != -1 else len(log_text)].strip()
            if len(line) > 300:  # keep the part around the match
                offset = max(0, min(len(line), match.end() - start) - 240)
                line = ("…" if offset else "") + line[offset:offset + 300]
            line = redact_text(line)  # a quoted log line never carries a secret out
            if line not in hits:
                hits.append(line)
            if len(hits) >= limit:
                return hits
    return hits


def _missing(facts: Facts, paths: list[str]) -> list[MissingFact]:
    seen, result = set(), []
    for path in paths:
        if path in seen:
            continue
        seen.add(path)
        reason = facts.why_missing(path) or "not in the inputs given"
        # undecided because a collector crashed: say so, rather than ask for an input
        hint = CRASH_HINT if CRASH_PREFIX in reason else supply_hint(path)
        result.append(MissingFact(path, reason, hint))
    return result


def evaluate_rule(rule: Rule, facts: Facts, log_text: str | None = None,
                  vllm_tree: Path | None = None) -> Finding:
    outcome = rule.when.evaluate(facts)
    log_matches = match_signatures(rule, log_text)
    confidence = rule.confidence
    if outcome.value is False and not log_matches:
        return Finding(rule, NOT_APPLIES, confidence)
    evidence: dict[str, Evidence] = {}  # one line per fact, listing every test made of it
    for test in outcome.evidence:
        known = evidence.get(test.path)
        if known is not None:
            if test.describe() not in known.test.split("; "):
                known.test += f"; {test.describe()}"
            continue
        fact = facts.get(test.path)
        if fact is not None:
            evidence[test.path] = Evidence(test.path, fact.value, fact.describe_source(), test.describe())
        elif test.op != "exists":
            evidence[test.path] = Evidence(test.path, None, "absent from the inputs", test.describe())

    state = fix_state(rule, facts, vllm_tree)
    if state.lowers_confidence:
        confidence = _CONFIDENCE_DOWN[confidence]
    finding = Finding(rule, UNDECIDED, confidence, list(evidence.values()), fix_state=state,
                      log_matches=log_matches)
    if log_matches:
        # The failure was seen: the log is stronger evidence than any fact.
        finding.verdict = APPLIES
        finding.confidence = rule.confidence
        return finding
    if outcome.value is None:
        finding.missing = _missing(facts, outcome.missing)
        return finding
    if state.state in (AFFECTED, UNVERSIONED):
        finding.verdict = APPLIES
    elif state.state == FIXED:
        finding.verdict = NOT_APPLIES
    else:
        finding.missing = _missing(facts, ["vllm.version"]) if "vllm.version" not in facts else [
            MissingFact("vllm.location", state.detail, supply_hint("vllm"))]
    return finding


def evaluate_rules(rules: list[Rule], facts: Facts, log_text: str | None = None) -> list[Finding]:
    return [evaluate_rule(rule, facts, log_text) for rule in rules]
