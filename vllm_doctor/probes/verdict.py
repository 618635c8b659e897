"""The joined verdict: one per rule, from what a probe showed here and what `check` knows.

A probe shows whether a failure's *mechanism* exists on this machine (an unsliced block table
makes the varlen kernel raise; a graph replayed over a freed weight is an illegal memory
access) and whether the fix's approach works here. Whether the user's stack has the *bug*
depends on the judged vLLM: does it carry the fix? This module joins the two, per rule:

======================  ==============================  =======================================
mechanism               judged vLLM                     verdict (level)
======================  ==============================  =======================================
present                 lacks the fix                   this failure will happen (the rule's
                                                        severity: error for most; a warning
                                                        where only the CPU variant showed a
                                                        mechanism the GPU decides)
present                 carries the fix                 protected (pass)
present                 no vLLM known                   which releases fail here (info)
present                 no release fixes it             the rule's severity
absent                  any                             not affected whatever the release (pass)
ran, not shown          lacks the fix                   may still fail (warning)
ran, not shown          carries the fix / unknown       pass / info
could not run           any                             could not run: <why> (skip; error when
                                                        the probe crashed or overran)
======================  ==============================  =======================================

A probe whose fix check failed is an error whatever the release: the fix's approach does not
hold on this machine. No torch here: the fix state is the engine's (``engine.fixstate``), read
from the facts the caller collected (`check`'s, or `probe`'s installed vLLM, --vllm-version or
--report).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_doctor.probes.registry import BY_NAME, HARDWARE, ProbeSpec
from vllm_doctor.probes.result import ERROR, FAIL, PASS, SKIP, TIMEOUT, WARN, ProbeResult

if TYPE_CHECKING:
    from vllm_doctor.engine.rule import Rule
    from vllm_doctor.facts.model import Facts

PRESENT, ABSENT, NOT_SHOWN, NOT_RUN = "present", "absent", "not-shown", "not-run"
# verdict levels, worst first; "error" makes `probe` exit 1
LEVELS = ("error", "warning", "info", "pass", "skip")
_RANK = {level: len(LEVELS) - i for i, level in enumerate(LEVELS)}


def worst_level(levels: list[str]) -> str:
    return max(levels, key=lambda lv: _RANK.get(lv, 0), default="skip")


@dataclass
class Verdict:
    rule: str
    level: str
    mechanism: str  # present | absent | not-shown | not-run
    depends: str  # hardware | torch: what decides whether the mechanism exists
    fix_state: str | None  # the engine's: affected | fixed | unknown | unversioned
    text: str
    workaround: str = ""
    release: str = ""  # how the judged vLLM's fix state was decided

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "level": self.level,
            "mechanism": self.mechanism,
            "depends_on": self.depends,
            "fix_state": self.fix_state,
            "text": self.text,
            "workaround": self.workaround,
            "release": self.release,
        }


def mechanism_state(result: ProbeResult, code: str) -> str:
    if code in result.rules_confirmed:
        return PRESENT
    if code in result.rules_refuted:
        return ABSENT
    if result.status in (SKIP, ERROR, TIMEOUT):
        return NOT_RUN
    return NOT_SHOWN


def _where(spec: ProbeSpec, depends: str, device: str, found: str) -> str:
    """``mechanism present here (...)``: where it was shown, and what that says."""
    if depends != HARDWARE:
        return f"mechanism {found} here (a property of torch: any device shows it)"
    if device == "cpu":
        cpu = next((c.cpu for c in spec.checks if c.depends == HARDWARE and c.cpu), None)
        return f"mechanism {found} in the CPU variant ({cpu or 'gloo'}; the GPU part was not run)"
    return f"mechanism {found} on this hardware"


def _judged(facts: Facts | None) -> str:
    """``your vLLM 0.24.0`` / ``vLLM 0.24.0 (--vllm-version)`` / ``the reported vLLM ...``."""
    from vllm_doctor.facts.model import Source

    fact = facts.get("vllm.version") if facts is not None else None
    if fact is None:
        return "vLLM"
    if fact.source == Source.USER:
        return f"vLLM {fact.value} (--vllm-version)"
    if fact.source == Source.REPORT:
        return f"the reported vLLM {fact.value}"
    return f"your vLLM {fact.value}"


def _pr(rule: Rule) -> str:
    return f" (PR #{rule.fix.pr})" if rule.fix and rule.fix.pr else ""


def _releases(rule: Rule) -> str:
    """The affected releases in words: ``0.24.0 to before 0.25.0``."""
    spans = [
        f"{r.introduced} to before {r.fixed}" if r.fixed else f"{r.introduced} and later"
        for r in rule.ranges or ()
    ]
    return "; ".join(spans) or "every release"


def _carries(rule: Rule, facts: Facts | None, judged: str) -> str:
    """``vLLM X carries the fix (PR #N)``, or, for a release older than the failing code,
    ``vLLM X predates the failure (it came in Y)``."""
    from vllm_doctor.engine.conditions import parse_version

    version = parse_version(str(facts.value("vllm.version"))) if facts is not None else None
    given = [parse_version(r.introduced) for r in rule.ranges or () if r.introduced != "0"]
    starts = [s for s in given if s is not None]
    if (
        version is not None
        and starts
        and len(starts) == len(given)
        and all(version < s for s in starts)
    ):
        return f"{judged} predates the failure (it came in {min(starts)})"
    return f"{judged} carries the fix{_pr(rule)}"


def _no_vllm(facts: Facts | None) -> bool:
    return facts is None or (
        facts.get("vllm.version") is None and facts.value("vllm.installed") is False
    )


def _workaround(spec: ProbeSpec, result: ProbeResult, rule: Rule) -> str:
    """What the probe verified of the fix here, and the rule's first two workarounds."""
    others = [w.title for w in rule.workarounds][:2]
    tail = f"; workaround: {' / '.join(others)}" if others else ""
    if result.status == PASS:
        return f"verified here: {spec.verifies}{tail}" if spec.verifies else tail[2:]
    if result.status == FAIL:
        return f"the fix's approach did not check out here: {result.reason}{tail}"
    return f"the fix's approach was not verified here: {result.reason}{tail}"


def join(result: ProbeResult, rule: Rule, facts: Facts | None, device: str) -> Verdict:
    """The joined verdict of one rule a probe covers."""
    from vllm_doctor.engine.fixstate import AFFECTED, FIXED, UNVERSIONED, FixState, fix_state

    spec = BY_NAME[result.name]
    depends = spec.mechanism_of(rule.code)
    found = mechanism_state(result, rule.code)
    if depends == HARDWARE and device == "cpu" and found == ABSENT:
        found = NOT_SHOWN  # a CPU run says nothing about a GPU's hardware
    if facts is None:
        state = FixState("unknown", "none", "no facts about vLLM were collected")
    else:
        state = fix_state(rule, facts)
    judged = _judged(facts)
    affected, fixed = state.state == AFFECTED, state.state == FIXED

    def verdict(level: str, text: str, workaround: str = "") -> Verdict:
        return Verdict(
            rule.code, level, found, depends, state.state, text, workaround, state.detail
        )

    if found == NOT_RUN:
        why = result.reason or result.status
        release = (
            f"; {judged} lacks the fix{_pr(rule)}: `check` decides from the facts"
            if affected
            else f"; {_carries(rule, facts, judged)}"
            if fixed
            else ""
        )
        level = "error" if result.status in (ERROR, TIMEOUT) else "skip"
        return verdict(level, f"could not run: {why}{release}")
    if found == ABSENT:
        place = "on this hardware" if depends == HARDWARE else "with this torch"
        return verdict("pass", f"mechanism absent {place}: not affected whatever the release")
    broken = result.status == FAIL
    if found == NOT_SHOWN:
        head = (
            f"mechanism not shown here ({result.reason})"
            if result.reason
            else "mechanism not shown here"
        )
        if broken:
            return verdict("error", head, _workaround(spec, result, rule))
        if affected:
            return verdict(
                "warning",
                f"{head}; {judged} lacks the fix{_pr(rule)}: the failure can "
                f"still happen elsewhere — {rule.summary}",
                _workaround(spec, result, rule),
            )
        if fixed:
            return verdict("pass", f"{head}; {_carries(rule, facts, judged)}: protected")
        return verdict("info", f"{head}; {state.detail}")
    where = _where(spec, depends, device, "present")
    cpu_only = depends == HARDWARE and device == "cpu"
    if cpu_only:
        # the CPU variant shows the indexing, not the GPU's behaviour: never "will happen"
        where = _where(spec, depends, device, "shown only")
        if affected and not broken:
            return verdict(
                "warning",
                f"{where}; {judged} lacks the fix{_pr(rule)}: this failure can "
                f"happen on a GPU — {rule.summary}",
                _workaround(spec, result, rule),
            )
    if state.state == UNVERSIONED:
        fix = rule.fix.status if rule.fix else "none"
        return verdict(
            "error" if broken else rule.severity,
            f"{where}; no vLLM release changes it (fix: {fix}): {rule.summary}",
            _workaround(spec, result, rule),
        )
    if affected and state.method == "dev-version":  # its commit decides, not its string
        return verdict(
            "error" if broken else "warning",
            f"{where}; {judged} is a dev build that may lack the fix{_pr(rule)} (a "
            f"source fingerprint decides where vLLM is installed): this failure can "
            f"happen — {rule.summary}",
            _workaround(spec, result, rule),
        )
    if affected:
        return verdict(
            "error" if broken else rule.severity,
            f"{where}; {judged} lacks the fix{_pr(rule)}: this failure will happen — "
            f"{rule.summary}",
            _workaround(spec, result, rule),
        )
    if fixed:
        if broken:  # the release's fix is the approach that just failed here
            return verdict(
                "error",
                f"{where}; {judged} carries the fix{_pr(rule)}, but its "
                f"approach did not check out here: {result.reason}",
            )
        return verdict("pass", f"{where}; {_carries(rule, facts, judged)}: protected")
    pr = f", PR #{rule.fix.pr}" if rule.fix and rule.fix.pr else ""
    fixed_in = f" (fixed in {rule.fix.version}{pr})" if rule.fix and rule.fix.version else ""
    if _no_vllm(facts):
        return verdict(
            "error" if broken else "info",
            f"{where}; no vLLM installed: releases {_releases(rule)} "
            f"{'can fail on a GPU' if cpu_only else 'fail on this machine'}{fixed_in}; "
            "--vllm-version V or --report FILE judges one",
            _workaround(spec, result, rule),
        )
    return verdict(
        "error" if broken else "info",
        f"{where}; whether {judged} carries the fix is unknown: {state.detail}{fixed_in}",
        _workaround(spec, result, rule),
    )


def rules_for(codes: set[str]) -> dict[str, Rule]:
    """The shipped rules with these codes (only their files are read)."""
    from vllm_doctor.engine.loader import default_rules_dir, load_rule_file, rule_files

    out = {}
    for path in rule_files(default_rules_dir()):
        if path.stem in codes:
            rule, _ = load_rule_file(path, strict=False)
            if rule is not None:
                out[rule.code] = rule
    return out


def join_results(
    results: list[ProbeResult],
    facts: Facts | None,
    device: str,
    rules: dict[str, Rule] | None = None,
) -> None:
    """Attach the joined verdicts (``result.verdicts``) to each probe result."""
    covered = {
        r.name: list(
            dict.fromkeys(BY_NAME[r.name].rules + tuple(r.rules_confirmed + r.rules_refuted))
        )
        for r in results
        if r.name in BY_NAME
    }
    known = dict(rules or {})
    missing = {c for codes in covered.values() for c in codes} - set(known)
    if missing:
        known.update(rules_for(missing))
    for r in results:
        r.verdicts = [
            join(r, known[c], facts, device).to_dict()
            for c in covered.get(r.name, ())
            if c in known
        ]


def exit_level(results: list[ProbeResult]) -> str:
    """The worst joined level over the results (a probe without verdicts counts by status)."""
    levels: list[str] = []
    for r in results:
        if r.verdicts:
            levels.extend(v["level"] for v in r.verdicts)
        elif r.status in (FAIL, ERROR, TIMEOUT):
            levels.append("error")
        elif r.status == WARN:
            levels.append("warning")
    return worst_level(levels)
