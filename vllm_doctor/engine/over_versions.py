"""With a companion's version unknown but bounded by the judged release's requirement: judge
the rules it left open over the versions that requirement admits.

A vLLM release bounds transformers (``Requires-Dist``); where the installed transformers is
not known, ``facts/stack.py`` infers ``packages.transformers`` as that range of possible
versions, and a version test decides only where every admitted version agrees
(``engine.conditions``). A rule whose *only* open fact is such a version, and which takes an inferred value of it as
evidence for a warning (``warn_when: {fact: packages.transformers, inferred: true}``: its
author judged that the range the release admits is the risk, as ENV009's "vLLM 0.24-0.27
require transformers>=5.5.3 with no upper bound, so a fresh install picks 5.15+"), is
evaluated once per released version of the package the requirement admits
(``knowledge/requires.json``):

* it applies for some of them: a finding at warning level at most, naming the admitted
  versions where it applies and where it does not, and the fact that decides (``pip show``):
  a fresh install brings the newest admitted version, and an inferred version never decides
  an error;
* it applies for none of the versions read: it stays open (a version released after the
  knowledge was generated may still be admitted);
* undecided for any of them: it stays as it was.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vllm_doctor.engine.conditions import Condition, Group, Test
from vllm_doctor.engine.evaluate import APPLIES, UNDECIDED, Finding, MissingFact, evaluate_rule
from vllm_doctor.engine.rule import lower_confidence
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.schema import supply_hint
from vllm_doctor.knowledge.ranges import release_spans as spans


def _takes_inferred(condition: Condition | None, path: str) -> bool:
    """The condition holds a test ``{fact: path, inferred: true}``."""
    if isinstance(condition, Group):
        return any(_takes_inferred(part, path) for part in condition.parts)
    return (
        isinstance(condition, Test)
        and condition.path == path
        and condition.op == "inferred"
        and bool(condition.operand)
    )


def _open_version(finding: Finding, facts: Facts) -> tuple[str, str, str] | None:
    """(path, admitted spec, what it was inferred from) when the finding waits only for one
    inferred package version that the rule's warn_when takes as evidence."""
    if finding.verdict != UNDECIDED or finding.log_matches or not finding.missing:
        return None
    paths = {m.path for m in finding.missing}
    if len(paths) != 1:
        return None
    path = paths.pop()
    if not _takes_inferred(finding.rule.warn_when, path):
        return None
    fact = facts.get(path)
    if (
        not path.startswith("packages.")
        or fact is None
        or not fact.inferred
        or not isinstance(fact.possible, str)
    ):
        return None
    return path, fact.possible, fact.detail or ""


def _with_version(facts: Facts, path: str, version: str, basis: str) -> Facts:
    copy = facts.copy()
    del copy.values[path]
    copy.infer(path, version, basis)
    return copy


def judge_over_admitted_versions(
    findings: list[Finding], facts: Facts, log: Any = None
) -> list[Finding]:
    """Decide, at warning level, the findings open only for a package version the release's
    requirement bounds, where some admitted version applies."""
    from vllm_doctor.knowledge import requires

    for index, finding in enumerate(findings):
        found = _open_version(finding, facts)
        if found is None:
            continue
        path, spec, inferred_from = found
        dist = path.split(".", 1)[1]
        versions = requires.versions_within(dist, spec)
        if not versions:
            continue
        basis = f"one of the versions {dist}{spec} admits"
        results = {
            v: evaluate_rule(finding.rule, _with_version(facts, path, v, basis), log)
            for v in versions
        }
        verdicts = {v: r.verdict for v, r in results.items()}
        applying = {v for v, verdict in verdicts.items() if verdict == APPLIES}
        if not applying or UNDECIDED in verdicts.values():
            continue
        rest = set(versions) - applying
        where = spans(versions, applying)
        reason = MissingFact(
            path,
            f"the installed {dist} is not known ({inferred_from}): of the versions "
            f"read that {dist}{spec} admits, it applies with {where}"
            + (f" and not with {spans(versions, rest)}" if rest else "")
            + f"; a fresh install brings the newest, {versions[-1]}",
            supply_hint(path),
        )
        newest = max(applying, key=versions.index)
        result = results[newest]
        findings[index] = replace(
            result,
            confidence=lower_confidence(result.confidence),
            severity_cap="warning",
            missing=[reason],
        )
    return findings
