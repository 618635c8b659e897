"""With the vLLM version unknown: judge the version-dependent rules over every covered release.

A rule left undecided only for want of the version (its fix range, the release's options,
pins, registry or kernels, the torch a release pins) is evaluated once per covered release,
with the facts that release implies (``release.*``, the inferred torch and transformers, the
derived facts) and everything else as collected:

* it applies in every release: as good as applies ("applies in every release 0.8.0–0.33.0");
* it applies in none: it does not apply;
* it applies in some and not in others: a finding at warning level at most, naming the
  releases and the fact that decides (``vllm.version``) — an error needs proof, and an
  unknown version is none;
* undecided in any release for another reason: it stays undecided, as it was.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vllm_doctor.engine.evaluate import (
    APPLIES,
    NOT_APPLIES,
    UNDECIDED,
    Finding,
    MissingFact,
    evaluate_rule,
)
from vllm_doctor.engine.fixstate import AFFECTED, FIXED, FixState
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.schema import supply_hint
from vllm_doctor.knowledge.ranges import release_spans as spans

# each release is judged as a what-if (Source.USER): installing it brings its own pins
SOURCE_DETAIL = "each covered release in turn (the vLLM version is unknown)"
_CONFIDENCE_DOWN = {"high": "medium", "medium": "low", "low": "low"}
# facts a known version would settle: the rule may be decided over the releases
_VERSION_PATHS = (
    "vllm.version",
    "vllm.location",
    "release.",
    "torch.",
    "packages.transformers",
    "derived.driver_supports_torch_cuda",
)


def _waits_for_version(finding: Finding) -> bool:
    return (
        finding.verdict == UNDECIDED
        and not finding.log_matches
        and (
            (finding.fix_state is not None and finding.fix_state.state == "unknown")
            or any(m.path.startswith(_VERSION_PATHS) for m in finding.missing)
        )
    )


def facts_for_release(facts: Facts, release: str) -> Facts:
    """The facts as if vLLM ``release`` were installed: what the release implies recomputed,
    everything collected kept."""
    from vllm_doctor.facts.derived import compute_derived
    from vllm_doctor.facts.release import collect_release
    from vllm_doctor.facts.release_kernels import collect_release_kernels
    from vllm_doctor.facts.stack import infer_stack

    copy = Facts(
        values={
            p: f
            for p, f in facts.values.items()
            if not f.inferred or not p.startswith(("torch.", "packages."))
        },
        missing=dict(facts.missing),
    )
    copy.drop_area("release")
    copy.set("vllm.version", release, Source.USER, SOURCE_DETAIL)
    infer_stack(copy)
    # of the derived facts only these follow the version (through the torch it pins, and the
    # release's default --gpu-memory-utilization)
    compute_derived(
        copy,
        only=("derived.driver_supports_torch_cuda", "derived.free_memory_below_utilization"),
    )
    collect_release(copy)
    collect_release_kernels(copy)
    return copy


def judge_over_releases(findings: list[Finding], facts: Facts, log: Any = None) -> list[Finding]:
    """Decide, where the covered releases agree, the findings an unknown version left open."""
    if "vllm.version" in facts:
        return findings
    waiting = [i for i, f in enumerate(findings) if _waits_for_version(f)]
    if not waiting:
        return findings
    from vllm_doctor.knowledge import covered_releases

    releases = covered_releases()
    per_release = [(r, facts_for_release(facts, r)) for r in releases]
    first, last = releases[0], releases[-1]
    why = facts.why_missing("vllm.version") or "the vLLM version is not known"
    for index in waiting:
        finding = findings[index]
        results = {r: evaluate_rule(finding.rule, f, log) for r, f in per_release}
        verdicts = {r: res.verdict for r, res in results.items()}
        applying = {r for r, v in verdicts.items() if v == APPLIES}
        if UNDECIDED in verdicts.values():
            if applying:  # say where it would apply; what else is missing stays listed
                open_ = {r for r, v in verdicts.items() if v == UNDECIDED}
                not_ = set(releases) - applying - open_
                finding.missing.insert(
                    0,
                    MissingFact(
                        "vllm.version",
                        f"{why}: applies in "
                        f"{spans(releases, applying)}, cannot decide in {spans(releases, open_)}"
                        + (f", not in {spans(releases, not_)}" if not_ else ""),
                        supply_hint("vllm.version"),
                    ),
                )
            continue
        if not applying:
            findings[index] = replace(
                finding,
                verdict=NOT_APPLIES,
                missing=[],
                fix_state=FixState(
                    FIXED,
                    "release-range",
                    f"applies in no release {first}–{last} (your vLLM version is unknown)",
                ),
            )
            continue
        newest = results[max(applying, key=releases.index)]
        if len(applying) == len(releases):
            findings[index] = replace(
                newest,
                fix_state=FixState(
                    AFFECTED,
                    "release-range",
                    f"applies in every release {first}–{last} (your vLLM version is unknown)",
                ),
            )
            continue
        where = spans(releases, applying)
        findings[index] = replace(
            newest,
            confidence=_CONFIDENCE_DOWN[newest.confidence],
            severity_cap="warning",
            missing=[
                MissingFact(
                    "vllm.version",
                    f"{why}: applies in {where}, not in "
                    f"{spans(releases, set(releases) - applying)}",
                    supply_hint("vllm.version"),
                )
            ],
            fix_state=FixState(
                AFFECTED,
                "release-range",
                f"applies in {where} (your vLLM version is unknown; vllm.version decides)",
                True,
            ),
        )
    return findings
