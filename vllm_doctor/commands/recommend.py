"""`check --recommend`: which vLLM release to install, judged over every covered release.

Two answers, each with the reasons for the releases it passes over:

* **runs here**: the newest covered release that runs on this driver, these GPUs and (when
  ``--torch-version`` keeps one) this torch: the release judged with the stack alone (the
  serve line, the model and what is computed from them set aside), drawing no error;
* **clears the findings**: the oldest release at or above the judged version (every covered
  release when the version is unknown) that draws no error with this serve line and model,
  and for each error finding of the judged version, the first release that clears it.

Each release is judged as engine/over_releases.py judges an unknown version: its own facts
(``release.*``, the torch and transformers it pins) in place of the installed vLLM's,
everything else as collected. Installing a release brings the torch and transformers it pins
(pip resolves them), so the torch and transformers of this machine or of a report are set
aside unless ``--torch-version`` names a torch to keep. The memory estimate is the one of the
run (its per-release formula is not recomputed for each release).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Facts, Source

if TYPE_CHECKING:
    from vllm_doctor.engine.evaluate import Finding

# what a release judged "with the stack alone" sets aside
_SERVE_AREAS = ("serve", "model", "memory", "derived", "log", "deploy")


@dataclass
class ReleaseVerdict:
    release: str
    errors: list[str]  # the codes of the error findings that apply
    # per code, the facts that made it apply in this release ("driver.cuda_version = 12.2")
    because: dict[str, str] = field(default_factory=dict)

    @property
    def clear(self) -> bool:
        return not self.errors


@dataclass
class Recommendation:
    releases: list[str]  # the covered releases, oldest first
    judged: str | None  # the version the run judged (installed, report, --vllm-version)
    torch_kept: str | None  # --torch-version, kept for every release
    # the stack alone, from the newest release down to the newest that runs here
    stack: list[ReleaseVerdict] = field(default_factory=list)
    # the whole serve line, from the judged version up to the oldest that clears it
    full: list[ReleaseVerdict] = field(default_factory=list)
    # per error finding of the judged version: the first release at or above it that clears it
    clears: dict[str, str | None] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    # the newest release that runs here, judged with the whole serve line
    running_full: ReleaseVerdict | None = None

    @property
    def newest_running(self) -> str | None:
        return next((v.release for v in self.stack if v.clear), None)

    def not_running(self) -> list[ReleaseVerdict]:
        """The releases newer than the newest that runs here, oldest first, each with why."""
        return [v for v in reversed(self.stack) if not v.clear]

    def from_judged(self) -> list[str]:
        """The covered releases at or above the judged version (all, when it is unknown)."""
        if self.judged is None:
            return list(self.releases)
        try:
            judged = Version(self.judged)
        except InvalidVersion:
            return list(self.releases)
        return [r for r in self.releases if Version(r) >= judged]

    @property
    def oldest_clearing(self) -> str | None:
        return next((v.release for v in self.full if v.clear), None)

    def skipped(self) -> list[ReleaseVerdict]:
        """The releases from the judged version up to the oldest that clears, with why."""
        return [v for v in self.full if not v.clear]

    def to_dict(self) -> dict[str, Any]:
        def reasons(verdicts: list[ReleaseVerdict]) -> list[dict[str, Any]]:
            return [
                {"releases": span, "errors": first.errors, "because": first.because}
                for span, first in grouped(self.releases, verdicts)
            ]

        return {
            "judged": self.judged,
            "torch": self.torch_kept or "each release's pin",
            "covered": [self.releases[0], self.releases[-1]] if self.releases else [],
            "newest_running": self.newest_running,
            "not_running": reasons(self.not_running()),
            "oldest_clearing": self.oldest_clearing,
            "skipped": reasons(self.skipped()),
            "clears": self.clears,
            "newest_running_errors": self.running_full.errors if self.running_full else None,
            "errors": self.summaries,
        }


def grouped(
    releases: list[str], verdicts: list[ReleaseVerdict]
) -> list[tuple[str, ReleaseVerdict]]:
    """Consecutive releases with the same errors as one span ("0.20.0–0.33.0"), each with the
    verdict of its first release."""
    from vllm_doctor.knowledge.ranges import release_spans

    out: list[tuple[str, ReleaseVerdict]] = []
    run: list[ReleaseVerdict] = []
    for verdict in sorted(verdicts, key=lambda v: releases.index(v.release)):
        if run and verdict.errors != run[0].errors:
            out.append((release_spans(releases, {v.release for v in run}), run[0]))
            run = []
        run.append(verdict)
    if run:
        out.append((release_spans(releases, {v.release for v in run}), run[0]))
    return out


def _base(facts: Facts, keep_torch: bool) -> Facts:
    """The run's facts with the vLLM (and, unless kept, torch and transformers) set aside:
    each release brings its own."""
    copy = facts.copy()
    copy.drop_area("vllm")
    if not keep_torch:
        copy.drop_area("torch")
        for path in ("packages.torch", "packages.transformers"):
            copy.values.pop(path, None)
    return copy


def _stack_only(facts: Facts) -> Facts:
    copy = Facts(
        values={p: f for p, f in facts.values.items() if p.split(".", 1)[0] not in _SERVE_AREAS},
        missing={p: r for p, r in facts.missing.items() if p.split(".", 1)[0] not in _SERVE_AREAS},
        unknowable=set(facts.unknowable),
        listings=dict(facts.listings),
    )
    for area in _SERVE_AREAS:
        copy.mark_missing(area, "set aside: the release is judged with the stack alone")
    return copy


def _errors(rules: Any, facts: Facts) -> list[Finding]:
    from vllm_doctor.engine.evaluate import APPLIES, defer, evaluate_rules

    findings = defer(evaluate_rules(rules, facts))
    return [f for f in findings if f.verdict == APPLIES and f.severity == "error"]


def recommend(facts: Facts, rules: Any, judged: list[Finding]) -> Recommendation:
    """The newest release that runs here (the stack alone judged from the newest release
    down, until one runs) and the oldest that clears the serve line (judged from the judged
    version up, until one draws no error): only the releases an answer passes over are
    judged."""
    from vllm_doctor.engine.over_releases import facts_for_release
    from vllm_doctor.knowledge import covered_releases

    torch = facts.get("torch.version")
    keep_torch = torch is not None and torch.source == Source.USER
    version = facts.value("vllm.version")
    base = _base(facts, keep_torch)
    stack = _stack_only(base)
    result = Recommendation(
        covered_releases(),
        str(version) if version is not None else None,
        str(torch.value) if keep_torch and torch is not None else None,
    )

    def verdict(target: Facts, release: str) -> ReleaseVerdict:
        errors = sorted(
            _errors(rules, facts_for_release(target, release)), key=lambda f: f.rule.code
        )
        for finding in errors:
            result.summaries.setdefault(finding.rule.code, finding.rule.summary)
        return ReleaseVerdict(
            release,
            [f.rule.code for f in errors],
            {
                f.rule.code: ", ".join(
                    f"{ev.path} = {_value(ev.value)}" for ev in f.evidence if ev.supports
                )
                for f in errors
            },
        )

    for release in reversed(result.releases):
        result.stack.append(verdict(stack, release))
        if result.stack[-1].clear:
            break
    for release in result.from_judged():
        result.full.append(verdict(base, release))
        if result.full[-1].clear:
            break
    newest = result.newest_running
    if newest is not None:
        done = {v.release: v for v in result.full}
        result.running_full = done.get(newest) or verdict(base, newest)
    for finding in judged:
        code = finding.rule.code
        result.summaries.setdefault(code, finding.rule.summary)
        result.clears[code] = next((v.release for v in result.full if code not in v.errors), None)
    return result


def _value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"
