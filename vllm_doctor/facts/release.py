"""What the judged vLLM release itself would refuse: facts under ``release.*``.

The release is the covered release (``knowledge.match_release``) that the vLLM version in
the facts — installed, ``--vllm-version`` or a report's — is judged by: the release itself,
or for a dev build, release candidate or local build the release it descends from. A
version outside the covered releases (or none) leaves the release-specific facts missing
with that reason, so the rules that need them cannot decide instead of guessing.

Computed from the generated knowledge tables (``knowledge/data/*.json``, written by
``tools/gen_knowledge.py`` from the release wheels):

* options (release_options.py): every option on the serve line the release does not accept,
  the nearest valid spelling (difflib over the release's options), the releases that do accept
  it, and the serve line corrected for the release; options no covered release accepts at all
  (decided without a version); values outside an option's choices in that release;
* the model (release_model.py): whether the release registers one of the model's
  architectures (and the first release that does), and whether it would try its Transformers
  backend instead; whether the architecture it would load implements SupportsLoRA; a
  ``speculative_config.method`` the release refuses, and a target model the method's check in
  the release refuses; the dtype it computes in;
* pins (release_pins.py): transformers and torch against the release's ``Requires-Dist``;
* start-up checks (release_startup.py): a ``--tool-call-parser`` / ``--reasoning-parser`` name
  the release does not register, where the release refuses it for this line (argparse choices,
  or its start-up check with the options that check reads); an option given without the option
  the release checks it needs; the backend for a world larger than the node.

This module judges the version and runs those collectors in turn (``collect_release``).

Options that the curated removed-flag rules (ARGS001, ARGS004) already explain are left
out of ``release.unaccepted_options``: those rules carry the migration advice, and one
cause gives one finding.
"""

from __future__ import annotations

from collections.abc import Callable

from vllm_doctor.facts.model import Fact, Facts, Source
from vllm_doctor.facts.release_model import _effective_dtype, _lora, _registry, _speculative

# the options' facts live in release_options (the names below are this module's face too)
from vllm_doctor.facts.release_options import (
    CURATED_FLAG_RULES,
    SOURCE,
    _accepts,
    _given_words,
    _options,
    curated_flag_patterns,
    refused_option_hints,
)
from vllm_doctor.facts.release_pins import _pins
from vllm_doctor.facts.release_startup import _parallel, _parsers, _requirements, _world_nodes


def judge_release(facts: Facts, releases: tuple[str, ...]) -> tuple[str | None, str, str]:
    """(release or None, coverage, note): the covered release ``vllm.version`` is judged by
    (``knowledge.match_release``); coverage is covered, outside or unknown; the note says why
    (empty for a release judged exactly)."""
    from vllm_doctor.knowledge import match_release

    version = facts.value("vllm.version")
    if version is None:
        reason = facts.why_missing("vllm.version") or "the vLLM version is not known"
        return None, "unknown", reason
    match = match_release(str(version), releases)
    if match.release is None:
        return None, "outside", match.note
    return match.release, "covered", match.note


# The facts of this module that need a judged release (release.coverage says whether there
# is one; release.unknown_options is decided over every covered release, without a version).
_VERSION_FREE = (
    "release.coverage",
    "release.unknown_options",
    "release.unread_values",
    "release.world_spans_nodes",
)


def _release_paths() -> list[str]:
    from vllm_doctor.facts.schema import FACTS

    return [
        p
        for p in FACTS
        if p.startswith("release.") and p.count(".") == 1 and p not in _VERSION_FREE
    ]


def collect_release(facts: Facts) -> None:
    from vllm_doctor import knowledge

    releases = tuple(knowledge.covered_releases())
    release, coverage, note = judge_release(facts, releases)
    facts.set(
        "release.coverage",
        coverage,
        SOURCE,
        f"releases {releases[0]}–{releases[-1]}" if coverage == "covered" else note,
    )
    if release is None:
        reason = f"no covered release to judge by: {note} (covered: {releases[0]}–{releases[-1]})"
        for path in _release_paths():
            facts.mark_missing(path, reason)
    else:
        facts.set(
            "release.judged",
            release,
            SOURCE,
            note or f"vLLM {facts.value('vllm.version')} is release {release}",
        )
    _options(facts, release)
    _world_nodes(facts)
    if release is not None:
        _registry(facts, release)
        _pins(facts, release)
        _effective_dtype(facts, release)
        _parsers(facts, release)
        _requirements(facts, release)
        _lora(facts, release)
        _parallel(facts, release)
        _speculative(facts, release)


# Facts that say which release judged the version: they differ between the two runs by design.
_JUDGE_PATHS = {
    "release.coverage",
    "release.judged",
    "release.quant.judged_release",
    "release.attention.judged_release",
}


# the words of a reason judged_between_releases writes: the releases the build may be differ
DIFFER_HERE = "which differ here"


def judged_between_releases(facts: Facts, collect: Callable[[Facts], None]) -> None:
    """Run a ``release.*`` collector; for a dev build or release candidate, keep only what
    every release it may resemble agrees on.

    A nightly such as 0.20.2rc1.dev562 descends from 0.20.1 but may carry code that only a
    later release ships (it had 0.22.0's Model Runner V2 default for Qwen3): an option,
    architecture, default or kernel limit a later release brought may already be in it. So
    the collector runs again as if the version were each later candidate
    (``knowledge.match_release``'s ``candidates``), and every fact on which they differ is
    missing, with each release's answer in the reason, instead of an error the facts do not
    prove (engine/over_releases.py then judges the rules over those releases).
    """
    from vllm_doctor import knowledge

    before = set(facts.values) | set(facts.missing)
    collect(facts)
    version = facts.value("vllm.version")
    if version is None:
        return
    match = knowledge.match_release(str(version), tuple(knowledge.covered_releases()))
    if match.release is None or len(match.candidates) < 2:
        return
    # the paths this collector wrote (another release.* collector may have run before it)
    written = (set(facts.values) | set(facts.missing)) - before - _JUDGE_PATHS
    answers: dict[str, dict[str, Fact | None]] = {p: {match.release: facts.get(p)} for p in written}
    for release in match.candidates[1:]:
        later = Facts.from_dict(facts.to_dict())
        for path in written:
            later.values.pop(path, None)
            later.missing.pop(path, None)
        later.set("vllm.version", release, SOURCE)
        # the collectors that read the judged release (release_env.py) judge it as that one too
        if "release.judged" in later:
            later.set("release.judged", release, SOURCE)
        collect(later)
        for path in written:
            answers[path][release] = later.get(path)
    commit = f" (git commit {match.commit})" if match.commit else ""
    for path in sorted(written):
        here = answers[path][match.release]
        if all(
            _same_answer(here, there, match.release, r)
            for r, there in answers[path].items()
            if r != match.release
        ):
            continue
        between = f"vLLM {version}{commit} is a build between {match.release} and {match.upper}, "
        shown = _answers_by_release(answers[path])
        decide = (
            "; the build's commit, `vllm --version` where it runs, or the release it "
            "matches (--vllm-version) decides"
        )
        facts.values.pop(path, None)
        if here is None:
            # already open at the release it descends from, for a reason of this build's own
            # (a source build's torch): the releases' answers do not settle it
            first = facts.why_missing(path) or "not known"
            facts.mark_missing(path, f"{first}; {between}which also differ here ({shown})")
            continue
        facts.mark_missing(path, f"{between}{DIFFER_HERE} ({shown}){decide}")


def _answers_by_release(answers: dict[str, Fact | None]) -> str:
    """'0.20.1–0.21.0: off; 0.22.0–0.23.0: auto': consecutive releases whose answers agree
    (each release's own name set aside, as _same_answer compares) joined, each shown as the
    first of them has it."""
    groups: list[tuple[list[str], Fact | None]] = []
    for release, fact in answers.items():
        if groups and _same_answer(fact, groups[-1][1], release, groups[-1][0][0]):
            groups[-1][0].append(release)
        else:
            groups.append(([release], fact))
    return "; ".join(
        f"{rs[0] if len(rs) == 1 else f'{rs[0]}–{rs[-1]}'}: "
        + ("not known" if fact is None else str(fact.value))
        for rs, fact in groups
    )


def _same_answer(here: Fact | None, there: Fact | None, release: str, upper: str) -> bool:
    """The two runs say the same, once each release's own name is set aside (a hint that
    reads "vLLM 0.23.0 does not accept it" agrees with "vLLM 0.24.0 does not accept it")."""
    import json

    if here is None or there is None:
        return here is there
    text = json.dumps(there.value, sort_keys=True, default=str)
    return json.dumps(here.value, sort_keys=True, default=str) == text.replace(upper, release)


def collect(facts: Facts) -> None:
    collect_release(facts)


__all__ = [
    "CURATED_FLAG_RULES",
    "SOURCE",
    "Source",
    "_accepts",
    "_given_words",
    "collect_release",
    "curated_flag_patterns",
    "refused_option_hints",
]
