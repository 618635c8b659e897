"""The check result as one document that every output format renders.

The JSON form is versioned (``DOCUMENT_SCHEMA_VERSION``) and documented in docs/json-output.md;
CI systems parse it, so fields are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_doctor import __version__
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, Finding
from vllm_doctor.engine.rule import SEVERITY_RANK, fill_placeholders
from vllm_doctor.facts.model import Facts

DOCUMENT_SCHEMA_VERSION = 1


@dataclass
class FixSuggestion:
    """A ready-to-copy result of applying a rule's workaround to the user's serve line."""

    code: str
    title: str
    command: str | None  # corrected `vllm serve ...` command, when the workaround edits it
    env: list[str]  # `NAME=value` / `unset NAME`
    cost: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "title": self.title,
            "command": self.command,
            "env": self.env,
            "cost": self.cost,
        }


@dataclass
class RuleBase:
    """What the findings were judged by: the rule base's version and the knowledge's reach."""

    version: str  # "<package version>+<digest of the rule files>"
    rules: int  # rules loaded (before --select/--ignore)
    newest_release: str  # the newest vLLM release the generated knowledge covers

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "rules": self.rules, "newest_release": self.newest_release}


@dataclass
class CheckDocument:
    facts: Facts
    findings: list[Finding]
    fail_on: str
    rules_checked: int
    duration_s: float
    suggestions: dict[str, list[FixSuggestion]] = field(default_factory=dict)
    probes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # vLLM's own messages found in the crash log (engine.logreport.CatalogueMessage)
    log_messages: list[Any] = field(default_factory=list)
    # the messages of the packages around vLLM in the log (engine.logreport.PackageMessage)
    log_package_messages: list[Any] = field(default_factory=list)
    strict: bool = False
    rulebase: RuleBase | None = None
    # the files the user passed, by option ("serve_config", "model_config", "report", "log"):
    # SARIF, GitHub and GitLab findings point at the first that exists
    inputs: dict[str, str] = field(default_factory=dict)
    # strict-mode problems that fail the run whatever the findings are
    strict_failures: list[str] = field(default_factory=list)
    # the settings file used (config.Config: its path, what it turned off); None: no file
    settings: Any = None
    # the manifest container judged (serveline.manifest.Target), None for a serve line
    target: Any = None
    # check --recommend: the release to install (commands/recommend.py Recommendation)
    recommendation: Any = None

    # -- views ---------------------------------------------------------------
    def active(self, verdict: str) -> list[Finding]:
        chosen = [f for f in self.findings if f.verdict == verdict and not f.suppressed]
        return sorted(chosen, key=lambda f: (-SEVERITY_RANK[f.severity], f.rule.code))

    @property
    def applies(self) -> list[Finding]:
        return self.active(APPLIES)

    @property
    def undecided(self) -> list[Finding]:
        return self.active(UNDECIDED)

    @property
    def suppressed(self) -> list[Finding]:
        return [f for f in self.findings if f.suppressed]

    def count(self, severity: str) -> int:
        return sum(1 for f in self.applies if f.severity == severity)

    def failing(self) -> list[Finding]:
        """Findings at or above --fail-on (the ones that make the exit code 1); with --strict,
        undecided rules at or above it too: the gate could not prove they do not apply —
        except those left open only by facts this kind of input can never supply (a package
        no release's collect-env lists): known to be unknowable, they are named, not failed."""
        if self.fail_on == "never":
            return []
        threshold = SEVERITY_RANK[self.fail_on]
        open_ = [f for f in self.undecided if not f.unknowable_here] if self.strict else []
        chosen = self.applies + open_
        return [f for f in chosen if SEVERITY_RANK[f.severity] >= threshold]

    def is_failing(self, finding: Finding) -> bool:
        return any(f is finding for f in self.failing())

    def next_step(self) -> dict[str, Any] | None:
        """The input most undecided rules need and how to supply it (report/summary.py)."""
        from vllm_doctor.report.summary import next_step

        return next_step(self)

    def undecided_hint(self) -> str | None:
        """The one input that would decide most of what was not decided."""
        step = self.next_step()
        if not step:
            return None
        total, count = step["of"], step["undecided"]
        if total == 1:
            return f"the undecided rule needs {step['need']}: {step['how']}"
        share = "all" if count == total else f"{count} of the"
        verb = "needs" if count == 1 else "need"
        return f"{share} {total} undecided {verb} {step['need']}: {step['how']}"

    def summary_line(self) -> str:
        parts = [
            f"{self.count(s)} {s}{'s' if self.count(s) != 1 and s != 'info' else ''}"
            for s in ("error", "warning", "info")
        ]
        extra = f", {len(self.undecided)} undecided" if self.undecided else ""
        extra += f", {len(self.suppressed)} ignored" if self.suppressed else ""
        undecided_failing = [f for f in self.failing() if f.verdict == UNDECIDED]
        tail = (
            f"; --strict: {len(undecided_failing)} undecided at or above --fail-on "
            f"{self.fail_on} fail the run"
            if undecided_failing
            else ""
        )
        hint = self.undecided_hint()
        tail += f"; {hint}" if hint else ""
        return (
            f"{', '.join(parts)}{extra} ({self.rules_checked} rules checked in "
            f"{self.duration_s:.2f} s){tail}"
        )

    def target_line(self, f: Finding) -> int | None:
        """For a manifest target: the line of the finding's first serve-line fact the file
        states (the flag in the args), else of its first other fact there (the image, the GPU
        limit), else the container's."""
        place = self.target_place(f)
        return place[1] if place else None

    def target_place(self, f: Finding) -> tuple[str, int] | None:
        """(file, line) of ``target_line``: a fact read from another file of a directory (a
        KServe runtime's args) is placed in that file."""
        if self.target is None:
            return None
        other_files = getattr(self.target, "fact_files", {})
        for ev in sorted(f.evidence, key=lambda ev: not ev.path.startswith("serve.")):
            if ev.path in self.target.fact_lines:
                file = other_files.get(ev.path, self.target.file)
                return file, self.target.fact_lines[ev.path]
        return self.target.file, self.target.line

    def to_dict(self) -> dict[str, Any]:
        def finding(f: Finding) -> dict[str, Any]:
            data = f.to_dict()
            # the facts a workaround names, as values (engine/rule.py fill_placeholders), in
            # copies: the rule's own data keeps its placeholders for the next document
            data["workarounds"] = [
                {
                    key: fill_placeholders(value, self.facts)
                    if key in ("title", "cost") and isinstance(value, str)
                    else value
                    for key, value in workaround.items()
                }
                if isinstance(workaround, dict)
                else workaround
                for workaround in data.get("workarounds") or ()
            ]
            place = self.target_place(f)
            if place is not None:
                data["location"] = {"file": place[0], "line": place[1]}
            data["suggestions"] = [s.to_dict() for s in self.suggestions.get(f.rule.code, [])]
            data["document"] = f"vllm-doctor explain {f.rule.code}"
            data["failing"] = self.is_failing(f)
            return data

        from vllm_doctor.memory.summary import report_summary as memory_summary
        from vllm_doctor.report.summary import input_statuses, next_step

        statuses = input_statuses(self)

        return {
            "schema_version": DOCUMENT_SCHEMA_VERSION,
            "tool": {"name": "vllm-doctor", "version": __version__},
            "rulebase": self.rulebase.to_dict() if self.rulebase else None,
            "summary": {
                "errors": self.count("error"),
                "warnings": self.count("warning"),
                "infos": self.count("info"),
                "undecided": len(self.undecided),
                "suppressed": len(self.suppressed),
                "rules_checked": self.rules_checked,
                "fail_on": self.fail_on,
                "strict": self.strict,
                "failing": [f.rule.code for f in self.failing()],
                "duration_s": round(self.duration_s, 4),
                "inputs": [status.to_dict() for status in statuses],
                "next_step": next_step(self, statuses),
            },
            "findings": [finding(f) for f in self.applies],
            "undecided": [finding(f) for f in self.undecided],
            "suppressed": [finding(f) for f in self.suppressed],
            "not_applicable": sorted(
                f.rule.code for f in self.findings if f.verdict == NOT_APPLIES and not f.suppressed
            ),
            "probes": self.probes,
            "log_messages": [m.to_dict() for m in self.log_messages],
            "log_package_messages": [m.to_dict() for m in self.log_package_messages],
            "notes": self.notes,
            "settings": self.settings.describe() if self.settings else None,
            "memory": memory_summary(self.facts),
            **(
                {"recommend": self.recommendation.to_dict()}
                if self.recommendation is not None
                else {}
            ),
            "facts": self.facts.to_dict(),
            **(
                {
                    "target": {
                        "file": self.target.file,
                        "line": self.target.line,
                        "kind": self.target.kind,
                        "name": self.target.name,
                    }
                }
                if self.target is not None
                else {}
            ),
        }
