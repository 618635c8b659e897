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

The covered releases are what *could be installed* only where nothing is installed yet: a
serve line checked on a machine without vLLM, in CI, or with no machine at all (a fresh
install brings a covered release and its pins). Where the facts describe a stack that exists
(a collect-env report, this machine) and its vLLM version is unknown — torch's own
collect_env, a report without a vLLM section, a version the report does not state — the vLLM
beside that stack may be one the knowledge does not cover (older than its oldest release) or
none at all (no vLLM pins nothing): an unknown version is not a version inside the covered
range. Nothing is decided over the releases there; the finding stays undecided and says where
it would apply (``existing_stack``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import Any

from vllm_doctor.engine.evaluate import (
    APPLIES,
    NOT_APPLIES,
    UNDECIDED,
    Finding,
    MissingFact,
    evaluate_rule,
    verdict_of,
)
from vllm_doctor.engine.fixstate import AFFECTED, FIXED, FixState
from vllm_doctor.engine.rule import lower_confidence
from vllm_doctor.facts.model import EACH_RELEASE, Facts, Source
from vllm_doctor.facts.schema import supply_hint
from vllm_doctor.knowledge.ranges import release_spans as spans

# each release is judged as a what-if (Source.USER): installing it brings its own pins
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


def existing_stack(facts: Facts) -> str | None:
    """Why the unknown vLLM version may lie outside the covered releases (see the module
    docstring), or None where the covered releases are what would be installed."""
    if facts.value("vllm.installed") is False:
        return None  # nothing installed: a fresh install brings a covered release
    torch = facts.get("torch.version") or facts.get("packages.torch")
    if torch is None or torch.inferred or torch.source in (Source.USER, Source.DEFAULT):
        return None  # no observed stack: the release to install decides it
    where = "the report" if torch.source == Source.REPORT else "this machine"
    return (
        f"{where} has torch {torch.value} but states no vLLM version: the vLLM beside it may "
        "be older than the releases the knowledge covers, or not installed (no vLLM pins "
        "nothing)" + _older_pin_hint(str(torch.value))
    )


def _older_pin_hint(torch: str) -> str:
    """'; torch X is older than every covered release's pin (0.8.0 pins 2.6.0)' where so."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor import knowledge

    pins = knowledge.load("pins")
    oldest = pins.releases[0]
    pin = (pins.at(oldest).get("torch") or {}).get("pin")
    try:
        older = pin is not None and Version(torch.split("+")[0]) < Version(str(pin))
    except InvalidVersion:
        return ""
    return (
        f"; torch {torch} is older than every covered release's pin ({oldest} pins {pin})"
        if older
        else ""
    )


def facts_for_release(facts: Facts, release: str, reads: Collection[str] | None = None) -> Facts:
    """The facts as if vLLM ``release`` were installed: what the release implies recomputed,
    everything collected kept. ``reads``: the only fact paths the caller will read (the
    judged rules' conditions, ``_read_paths``), where a release variable's value is wanted
    only if read; None: every fact."""
    from vllm_doctor.facts.derived import compute_derived
    from vllm_doctor.facts.release import collect_release
    from vllm_doctor.facts.release_env import collect_release_env
    from vllm_doctor.facts.release_kernels import collect_release_kernels
    from vllm_doctor.facts.stack import infer_stack

    copy = Facts(
        values={
            p: f
            for p, f in facts.values.items()
            if not f.inferred or not p.startswith(("torch.", "packages."))
        },
        missing=dict(facts.missing),
        unknowable=set(facts.unknowable),
        listings=dict(facts.listings),
    )
    copy.drop_area("release")
    copy.set("vllm.version", release, Source.USER, EACH_RELEASE)
    infer_stack(copy)
    # of the derived facts only these follow the version (through the torch it pins, the
    # release's default --gpu-memory-utilization, its drafting slots and batch defaults)
    compute_derived(
        copy,
        only=(
            "derived.driver_supports_torch_cuda",
            "derived.free_memory_below_utilization",
            "derived.spec_drafting_slots",
            "derived.spec_scheduled_tokens",
        ),
    )
    collect_release(copy)
    collect_release_kernels(copy)
    # the release's own gates (its variables' defaults, Model Runner V2, DeepGEMM, AITER):
    # without them a rule over release.env or release.model_runner_v2 would read as
    # applying in no release
    collect_release_env(copy, _env_names(reads))
    return copy


_ENV_PREFIX = "release.env."


def _read_paths(findings: Iterable[Finding]) -> set[str]:
    """Every fact path the findings' rules test (their conditions and warning margins, the
    facts compared against included): all that evaluate_rule reads of a release's facts
    besides the vLLM version and location."""
    paths: set[str] = set()
    for finding in findings:
        rule = finding.rule
        paths.update(rule.when.paths())
        if rule.warn_when is not None:
            paths.update(rule.warn_when.paths())
    return paths


def _env_names(reads: Collection[str] | None) -> set[str] | None:
    """The variables of ``release.env.<NAME>`` among ``reads``; None (every one) where the
    paths read include the area itself."""
    if reads is None or any(p in ("release", "release.env") for p in reads):
        return None
    return {p[len(_ENV_PREFIX) :] for p in reads if p.startswith(_ENV_PREFIX)}


def _explain_only(
    finding: Finding, releases: list[str], verdicts: dict[str, str], why: str, outside: str
) -> None:
    """The finding stays undecided: say where it would apply among the covered releases,
    and why those are not all that could be installed."""
    applying = {r for r, v in verdicts.items() if v == APPLIES}
    open_ = {r for r, v in verdicts.items() if v == UNDECIDED}
    not_ = set(releases) - applying - open_
    parts = [
        f"{label} {spans(releases, chosen)}"
        for label, chosen in (
            ("applies in", applying),
            ("cannot decide in", open_),
            ("does not apply in", not_),
        )
        if chosen
    ]
    finding.missing = [
        MissingFact(
            "vllm.version",
            f"{why}: among the covered releases it {', '.join(parts)}; {outside}",
            supply_hint("vllm.version"),
        ),
        *[m for m in finding.missing if m.path != "vllm.version"],
    ]


def _dev_build_releases(facts: Facts) -> tuple[str, ...]:
    """For a dev build or release candidate: every covered release it may resemble
    (knowledge.match_release), else ()."""
    from vllm_doctor.knowledge import covered_releases, match_release

    version = facts.value("vllm.version")
    if version is None:
        return ()
    match = match_release(str(version), tuple(covered_releases()))
    return match.candidates if len(match.candidates) > 1 else ()


def judge_dev_build(findings: list[Finding], facts: Facts, log: Any = None) -> list[Finding]:
    """A dev build may be any of the releases from the one it descends from to the first
    whose code main may already hold: a finding the build's own facts left open for a
    version-dependent fact, or one that applies, is judged once per such release. Where
    they disagree it is at most a warning naming the releases and what decides (the
    build's commit, ``vllm --version``, a release): an error never rests on a release the
    build may not be."""
    releases = list(_dev_build_releases(facts))
    if not releases:
        return findings
    from vllm_doctor.facts.release import DIFFER_HERE

    # open because the releases differ on a fact (facts/release.py), not for a reason of the
    # build's own (a source build's torch, a fact never collected): those stay as they are
    judged = [
        i
        for i, f in enumerate(findings)
        if not f.log_matches
        and (
            f.verdict == APPLIES
            or (
                f.verdict == UNDECIDED
                and f.missing
                and all(DIFFER_HERE in m.reason for m in f.missing)
            )
        )
    ]
    if not judged:
        return findings
    version = facts.value("vllm.version")
    sha = facts.value("vllm.git_sha")
    build = f"vLLM {version}" + (f" (git commit {sha})" if sha else "")
    decide = (
        "the build's commit, `vllm --version` where it runs, or the release it matches "
        "(--vllm-version X.Y.Z) decides"
    )
    reads = _read_paths(findings[i] for i in judged)
    per_release = {r: facts_for_release(facts, r, reads) for r in releases}
    every = spans(releases, set(releases))
    for index in judged:
        finding = findings[index]
        verdicts = {r: verdict_of(finding.rule, f, log) for r, f in per_release.items()}
        applying = {r for r, v in verdicts.items() if v == APPLIES}
        open_ = {r for r, v in verdicts.items() if v == UNDECIDED}
        if len(applying) == len(releases):
            if finding.verdict == UNDECIDED:  # the releases agree: decided as they are
                # shown with the evidence of the release it descends from (surely in it)
                findings[index] = replace(
                    evaluate_rule(finding.rule, per_release[releases[0]], log),
                    facts_release=releases[0],
                    fix_state=FixState(
                        AFFECTED, "dev-version", f"{build} may be any of {every}: applies in all"
                    ),
                )
            continue
        if not applying:
            # an applying finding stays: what decided it is not the release (a dev build's own
            # facts); an open one none of the releases would raise does not apply
            if finding.verdict == UNDECIDED and not open_:
                findings[index] = replace(
                    finding,
                    verdict=NOT_APPLIES,
                    missing=[],
                    fix_state=FixState(
                        FIXED, "dev-version", f"{build} may be any of {every}: applies in none"
                    ),
                )
            continue
        where = spans(releases, applying)
        not_ = set(releases) - applying - open_
        reason = MissingFact(
            "vllm.version",
            f"{build} is a build between {releases[0]} and {releases[-1]}: applies in {where}"
            + (f", cannot decide in {spans(releases, open_)}" if open_ else "")
            + (f", not in {spans(releases, not_)}" if not_ else "")
            + f"; {decide}",
            supply_hint("vllm.version"),
        )
        if finding.verdict == UNDECIDED and open_:
            # still open in some: say where it would apply; what else is missing stays listed
            finding.missing.insert(0, reason)
            continue
        newest_release = max(applying, key=releases.index)
        newest = replace(
            evaluate_rule(finding.rule, per_release[newest_release], log),
            facts_release=newest_release,
        )
        findings[index] = replace(
            newest,
            confidence=lower_confidence(newest.confidence),
            severity_cap="warning",
            missing=[reason, *[m for m in newest.missing if m.path != "vllm.version"]],
            fix_state=FixState(
                AFFECTED, "dev-version", f"{build} may be any of {every}; applies in {where}", True
            ),
        )
    return findings


def judge_over_releases(findings: list[Finding], facts: Facts, log: Any = None) -> list[Finding]:
    """Decide, where the covered releases agree, the findings an unknown version left open;
    for a dev build, where the releases it may resemble agree (judge_dev_build); with the
    version known, a finding open only for a companion version the release's requirement
    bounds, over the versions it admits (engine/over_versions.py)."""
    if "vllm.version" in facts:
        from vllm_doctor.engine.over_versions import judge_over_admitted_versions

        return judge_over_admitted_versions(judge_dev_build(findings, facts, log), facts, log)
    waiting = [i for i, f in enumerate(findings) if _waits_for_version(f)]
    if not waiting:
        return findings
    from vllm_doctor.knowledge import covered_releases

    releases = covered_releases()
    reads = _read_paths(findings[i] for i in waiting)
    per_release = {r: facts_for_release(facts, r, reads) for r in releases}
    first, last = releases[0], releases[-1]
    why = facts.why_missing("vllm.version") or "the vLLM version is not known"
    outside = existing_stack(facts)
    for index in waiting:
        finding = findings[index]
        verdicts = {r: verdict_of(finding.rule, f, log) for r, f in per_release.items()}
        applying = {r for r, v in verdicts.items() if v == APPLIES}
        if outside is not None:
            _explain_only(finding, releases, verdicts, why, outside)
            continue
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
        newest_release = max(applying, key=releases.index)
        newest = replace(
            evaluate_rule(finding.rule, per_release[newest_release], log),
            facts_release=newest_release,
        )
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
            confidence=lower_confidence(newest.confidence),
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
