"""The check result as one document that every output format renders.

The JSON form is versioned (``DOCUMENT_SCHEMA_VERSION``) and documented in docs/json-output.md;
CI systems parse it, so fields are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_doctor import __version__
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, Finding
from vllm_doctor.engine.rule import SEVERITY_RANK
from vllm_doctor.facts.model import Facts

DOCUMENT_SCHEMA_VERSION = 1

# The input that supplies the facts of an area, and how the summary names it. Derived and
# release facts are computed from the others, so they name no input of their own.
INPUT_OF_AREA = {
    "serve": "serve",
    "model": "model",
    "log": "log",
    **dict.fromkeys(("vllm", "torch", "packages", "driver", "gpu", "topology", "env"), "report"),
}
INPUT_PHRASE = {
    "serve": "the serve line (after `--`: vllm-doctor check -- vllm serve MODEL ...)",
    "model": "the model's config.json (--model-config PATH)",
    "report": "the target machine's `vllm collect-env` report (--report FILE, or run on that machine)",
    "log": "the crash log (--log FILE)",
}


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

    def given_inputs(self) -> set[str]:
        """The inputs of INPUT_PHRASE this run had."""
        given = {key for key in ("report", "log") if self.inputs.get(key)}
        if self.facts.get("serve.argv") is not None:
            given.add("serve")
        if self.inputs.get("model_config") or self.facts.get("model.config_path") is not None:
            given.add("model")
        return given

    def most_needed_input(self) -> tuple[str, int] | None:
        """The input most undecided rules lack, and how many lack it. An input already given
        is not named again (what it lacks, giving it once more would not supply); None when
        no undecided rule names an input still to give."""
        from collections import Counter

        given = self.given_inputs()
        needs: Counter[str] = Counter()
        for f in self.undecided:
            needs.update(
                {
                    INPUT_OF_AREA[area]
                    for area in (m.path.split(".", 1)[0] for m in f.missing)
                    if area in INPUT_OF_AREA and INPUT_OF_AREA[area] not in given
                }
            )
        if not needs:
            return None
        key, count = needs.most_common(1)[0]
        return INPUT_PHRASE[key], count

    def undecided_hint(self) -> str | None:
        """The one input that would decide most of what was not decided."""
        wanted = self.most_needed_input()
        if not wanted:
            return None
        what, count = wanted
        total = len(self.undecided)
        if total == 1:
            return f"the undecided rule needs {what}"
        return f"{'all' if count == total else f'{count} of the'} {total} undecided need {what}"

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
        if self.target is None:
            return None
        for ev in sorted(f.evidence, key=lambda ev: not ev.path.startswith("serve.")):
            if ev.path in self.target.fact_lines:
                return self.target.fact_lines[ev.path]
        return self.target.line

    def to_dict(self) -> dict[str, Any]:
        def finding(f: Finding) -> dict[str, Any]:
            data = f.to_dict()
            if self.target is not None:
                data["location"] = {"file": self.target.file, "line": self.target_line(f)}
            data["suggestions"] = [s.to_dict() for s in self.suggestions.get(f.rule.code, [])]
            data["document"] = f"vllm-doctor explain {f.rule.code}"
            data["failing"] = self.is_failing(f)
            return data

        from vllm_doctor.memory.estimate import report_summary as memory_summary

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
            },
            "findings": [finding(f) for f in self.applies],
            "undecided": [finding(f) for f in self.undecided],
            "suppressed": [finding(f) for f in self.suppressed],
            "not_applicable": sorted(
                f.rule.code for f in self.findings if f.verdict == NOT_APPLIES and not f.suppressed
            ),
            "probes": self.probes,
            "log_messages": [m.to_dict() for m in self.log_messages],
            "notes": self.notes,
            "settings": self.settings.describe() if self.settings else None,
            "memory": memory_summary(self.facts),
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
