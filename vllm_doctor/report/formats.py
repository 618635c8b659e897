"""Machine formats of the check document: JSON, markdown (GitHub issues), SARIF 2.1.0 (code
scanning), JUnit XML, GitHub workflow annotations and GitLab Code Quality JSON.

Every format agrees with the exit code: what it marks as failing is exactly
``CheckDocument.failing()`` (findings at or above --fail-on; with --strict, undecided rules at
or above it too).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from html import escape as _escape
from pathlib import Path
from typing import Any

from vllm_doctor import __version__
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, Finding
from vllm_doctor.engine.fixstate import UNVERSIONED
from vllm_doctor.errors import printable
from vllm_doctor.report.document import CheckDocument
from vllm_doctor.report.output import dump_json, json_safe

# the SARIF location of findings when no input file was passed: the serve line is no file
PLACEHOLDER_URI = "vllm-serve"
# the SARIF base of repository-relative URIs (GitHub code scanning's convention)
SRCROOT = "%SRCROOT%"

# characters XML 1.0 cannot carry at all (ANSI colour codes in crash logs are the usual case)
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """Text safe inside an XML element or attribute: illegal characters spelled as \\xNN."""
    return _XML_ILLEGAL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def xml_escape(text: str) -> str:
    return _escape(xml_text(text), quote=False)


def quoteattr(text: str) -> str:
    """An attribute value: one line, control characters spelled out (a JUnit viewer shows a
    test's name as given), XML-escaped."""
    return f'"{_escape(printable(xml_text(text)), quote=True)}"'


SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def render_json(doc: CheckDocument) -> str:
    return dump_json(doc.to_dict())


def _md_cell(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def _rulebase_line(doc: CheckDocument) -> str:
    if not doc.rulebase:
        return f"vllm-doctor {__version__}"
    return (
        f"vllm-doctor {__version__} · rule base {doc.rulebase.version} · knowledge up to "
        f"vLLM {doc.rulebase.newest_release}"
    )


def render_markdown(doc: CheckDocument) -> str:
    from vllm_doctor.report.summary import first_line

    out = [
        "## vllm-doctor report",
        "",
        f"**{doc.summary_line()}**",
        "",
        _md_cell(first_line(doc)),
        "",
    ]
    if doc.recommendation is not None:
        from vllm_doctor.report.text import recommendation_lines

        head, *rest = recommendation_lines(doc.recommendation)
        out += [f"**{head}**", "", *[f"- {_md_cell(line.strip())}" for line in rest], ""]
    if doc.applies:
        out += ["| | code | severity | summary | fix |", "|---|---|---|---|---|"]
        for f in doc.applies:
            mark = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}[f.severity]
            fix = f"vLLM ≥ {f.rule.fix.version}" if f.rule.fix and f.rule.fix.version else ""
            out.append(
                f"| {mark} | `{f.rule.code}` | {f.severity} | {_md_cell(f.rule.summary)} | {fix} |"
            )
        out.append("")
        for f in doc.applies:
            out += [f"### `{f.rule.code}` {f.rule.summary}", ""]
            for ev in f.evidence:
                out.append(f"- {ev.aside}`{ev.path}` = `{_md_cell(ev.value)}` ({ev.source})")
            if f.fix_state and f.fix_state.state != UNVERSIONED:
                out.append(
                    f"- {'source' if f.fix_state.method == 'fingerprint' else 'version'}: {f.fix_state.detail}"
                )
            for line in f.log_matches:
                out.append(f"- seen in the log: `{line}`")
            if f.reading is not None:
                out.append(f"- cause: {f.reading.cause}")
                out += [f"- fix: `{fix}`" for fix in f.reading.fixes]
            for sugg in doc.suggestions.get(f.rule.code, []):
                out.append(
                    f"- workaround: {sugg.title}" + (f" (cost: {sugg.cost})" if sugg.cost else "")
                )
                if sugg.command or sugg.env:
                    out += [
                        "",
                        "```bash",
                        *sugg.env,
                        *([sugg.command] if sugg.command else []),
                        "```",
                    ]
            out += [f"- references: {', '.join(f.rule.references)}", ""]
    else:
        out += ["None of the known failures applies.", ""]
    if doc.undecided:
        n = len(doc.undecided)
        out += [
            "<details><summary>Cannot decide "
            f"({n} rule{'s' if n != 1 else ''} need{'s' if n == 1 else ''} more facts)</summary>",
            "",
        ]
        for f in doc.undecided:
            needs = ", ".join(f"`{m.path}` ({m.reason})" for m in f.missing) or "vLLM version"
            strict = " **(fails the run: --strict)**" if doc.is_failing(f) else ""
            out.append(f"- `{f.rule.code}` {f.rule.summary} — missing {needs}{strict}")
        out += ["", "</details>", ""]
    if doc.log_messages:
        out += ["### vLLM messages in the log", ""]
        for m in doc.log_messages:
            sites = "; ".join(
                f"`vllm/{path}` in `{func}`" + (f" when `{_md_cell(cond)}`" if cond else "")
                for path, func, cond in m.sites()
            )
            out.append(
                f"- `{_md_cell(m.hit.cls)}: {_md_cell(m.hit.template)}` — raised in {sites}; "
                f"releases {m.release_ranges()}" + (f". {_md_cell(m.note)}" if m.note else "")
            )
        out.append("")
    from vllm_doctor.memory.summary import report_line

    memory = report_line(doc.facts)
    if memory is not None:
        out += [f"**Memory:** {printable(memory)}", ""]
    out += ["<details><summary>Facts</summary>", "", "| fact | value | source |", "|---|---|---|"]
    for path in sorted(doc.facts.values):
        fact = doc.facts.values[path]
        if path == "serve.argv":
            continue
        out.append(f"| `{path}` | {_md_cell(fact.value)} | {_md_cell(fact.describe_source())} |")
    for key, reason in sorted(doc.facts.missing.items()):
        out.append(f"| `{key}` | _not available_ | {_md_cell(reason)} |")
    out += ["", "</details>", ""]
    for note in doc.notes:
        out.append(f"> {note.replace(chr(10), ' ')}")
    out += ["", f"<sub>{_rulebase_line(doc)}</sub>", ""]
    return printable("\n".join(out), keep="\n\t")  # no terminal sequence from any value


# -- locations -------------------------------------------------------------------------------


class Location:
    """Where a finding points: an input file and a line (1 when no line of the file names
    the finding's value), or the placeholder when the serve line is in no file."""

    def __init__(self, uri: str, line: int, path: Path | None):
        self.uri = uri  # relative to the repository root, or an absolute file URI outside it
        self.line = line
        self.path = path  # the file on disk, None for the placeholder

    @property
    def is_file(self) -> bool:
        return self.path is not None

    @property
    def in_repository(self) -> bool:
        return self.is_file and not self.uri.startswith("file:")

    def line_text(self) -> str:
        if self.path is None:
            return ""
        lines = _lines(self.path)
        return lines[self.line - 1].strip() if 0 < self.line <= len(lines) else ""


def repository_root() -> Path:
    """The root the locations are relative to: the Actions workspace, else the git checkout
    around the working directory, else the working directory."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace and Path(workspace).is_dir():
        return Path(workspace).resolve()
    cwd = Path.cwd().resolve()
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return cwd


def _relative_uri(path: Path) -> str:
    """A path relative to the repository root when it is under it (how code scanning, GitHub
    annotations and GitLab name repository files), else an absolute file URI."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(repository_root()).as_posix()
    except ValueError:
        return resolved.as_uri()


def _directory_uri(path: Path) -> str:
    """A directory's file URI with the trailing slash SARIF's base URIs need."""
    uri = path.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _line_of(path: Path, needles: list[str]) -> int:
    """The first line holding the first needle found; 1 when none is."""
    lines = _lines(path)
    for needle in needles:
        if not needle:
            continue
        for number, line in enumerate(lines, 1):
            if needle in line:
                return number
    return 1


def workflow_file() -> Path | None:
    """The workflow file of the GitHub Actions run (GITHUB_WORKFLOW_REF is
    ``owner/repo/.github/workflows/ci.yml@refs/...``), when it is in the checkout: it holds a
    serve line given to the Action's ``args``."""
    ref = os.environ.get("GITHUB_WORKFLOW_REF", "")
    parts = ref.split("@", 1)[0].split("/", 2)
    if len(parts) < 3:
        return None
    path = repository_root() / parts[2]
    return path if path.is_file() else None


def _serve_file(doc: CheckDocument) -> tuple[Path, list[str]] | None:
    """The file that holds the serve line and how a flag is spelt in it: the serve config
    (``tensor-parallel-size:``), else, for a serve line given on the command line in GitHub
    Actions, the workflow that passed it (the flag as written, ``-tp 2``)."""
    serve_config = doc.inputs.get("serve_config")
    if serve_config and Path(serve_config).is_file():
        return Path(serve_config), ["{dashed}:", "{key}:"]
    if doc.facts.get("serve.argv") is not None:
        workflow = workflow_file()
        if workflow is not None:
            return workflow, ["{detail}", "--{dashed}", "--{key}"]
    return None


def location(doc: CheckDocument, f: Finding) -> Location:
    """The input file a finding is about, in the order a user would fix it: the manifest line
    of a manifest target; the line of the file holding the serve line that names the finding's
    serve evidence (the serve config, or the workflow that passed the serve line), the
    config.json key its model evidence names, the log line it matched, else line 1 of the
    first input file given (the serve line's own file first), else the placeholder."""
    place = doc.target_place(f)
    if place is not None and place[0] != "-":
        path = Path(place[0])
        return Location(_relative_uri(path), place[1] or 1, path)
    model_config = doc.facts.value("model.config_path") if doc.inputs.get("model_config") else None
    log = doc.inputs.get("log")
    serve = _serve_file(doc)
    holders = [
        ("serve", serve[0], serve[1]) if serve else None,
        ("model", Path(str(model_config)), ['"{key}"']) if model_config else None,
    ]
    for area_wanted, path, spellings in filter(None, holders):
        if not path.is_file():
            continue
        for ev in f.evidence:
            area, _, key = ev.path.partition(".")
            if area == area_wanted:
                fact = doc.facts.get(ev.path)
                detail = (fact.detail or "") if fact is not None else ""  # "-tp 2" as written
                needles = [
                    s.format(key=key, dashed=key.replace("_", "-"), detail=detail)
                    for s in spellings
                ]
                return Location(_relative_uri(path), _line_of(path, needles), path)
    if f.log_matches and log and Path(log).is_file():
        head = f.log_matches[0].lstrip("…")[:80]
        return Location(_relative_uri(Path(log)), _line_of(Path(log), [head]), Path(log))
    for candidate in (serve[0] if serve else None, model_config, doc.inputs.get("report"), log):
        if candidate and Path(str(candidate)).is_file():
            return Location(_relative_uri(Path(str(candidate))), 1, Path(str(candidate)))
    return Location(PLACEHOLDER_URI, 1, None)


def _fingerprint(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def value_text(value: Any) -> str:
    """A fact's value as a reader writes it: lists joined, NaN spelled, no Python repr."""
    value = json_safe(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value) or "(none)"
    if isinstance(value, dict):
        return json.dumps(value, default=str, sort_keys=True)
    return str(value)


def _evidence_text(f: Finding) -> str:
    return "; ".join(f"{e.aside}{e.path}={value_text(e.value)} ({e.source})" for e in f.evidence)


def _message(doc: CheckDocument, f: Finding) -> str:
    # a target that is about one thing of several (a node of a fleet) names it in every message
    subject = getattr(doc.target, "subject", None)
    head = f"{subject}: " if subject else ""
    if f.verdict == UNDECIDED:
        needs = ", ".join(m.path for m in f.missing) or "the vLLM version"
        strict = " (--strict fails the run on it)" if doc.is_failing(f) else ""
        if f.unknowable_here:
            strict = " (cannot be known from this input)"
        return f"{head}{f.rule.code} cannot be decided{strict}: {f.rule.summary}. Missing: {needs}"
    text = f"{head}{f.rule.summary}. Evidence: {_evidence_text(f) or 'crash log'}"
    if f.rule.fix and f.rule.fix.version:
        text += f". Fix: upgrade to vLLM {f.rule.fix.version} or later"
    suggestions = doc.suggestions.get(f.rule.code, [])
    if suggestions:
        text += f". Workaround: {suggestions[0].title}"
    return text


# -- SARIF 2.1.0 -----------------------------------------------------------------------------

_PRECISION = {"high": "very-high", "medium": "high", "low": "medium"}
_PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "info": "recommendation"}


def _sarif_rule(f: Finding) -> dict[str, Any]:
    from vllm_doctor.commands.explain import rule_markdown

    rule = f.rule
    document = rule_markdown(rule)
    entry: dict[str, Any] = {
        "id": rule.code,
        "name": rule.slug,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "help": {
            "text": f"{document}\nRun `vllm-doctor explain {rule.code}` for this document.",
            "markdown": document,
        },
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {
            "tags": ["vllm", rule.category.lower(), rule.phase],
            "precision": _PRECISION.get(rule.confidence, "medium"),
            "problem.severity": _PROBLEM_SEVERITY[rule.severity],
            "confidence": rule.confidence,
            "phase": rule.phase,
            "references": list(rule.references),
        },
    }
    if rule.references:
        entry["helpUri"] = rule.references[0]
    return entry


def render_sarif(doc: CheckDocument) -> str:
    """SARIF 2.1.0 for code scanning. Results: the findings that apply (ignored ones carry a
    suppression) and, under --strict, the undecided rules that fail the run. The other
    undecided rules are listed in the run's properties, not as results: a "cannot decide" is
    no alert to keep open in code scanning."""
    reported = doc.applies + [f for f in doc.undecided if doc.is_failing(f)] + doc.suppressed
    rules_seen: dict[str, Finding] = {}
    for f in reported:
        rules_seen.setdefault(f.rule.code, f)
    driver_rules = [_sarif_rule(f) for _, f in sorted(rules_seen.items())]
    index = {r["id"]: i for i, r in enumerate(driver_rules)}
    results = []
    target = [doc.target.name] if doc.target is not None else []  # one manifest, many targets
    for f in reported:
        where = location(doc, f)
        artifact: dict[str, Any] = {"uri": where.uri}
        if where.in_repository:
            artifact["uriBaseId"] = SRCROOT
        physical = {"artifactLocation": artifact, "region": {"startLine": where.line}}
        result: dict[str, Any] = {
            "ruleId": f.rule.code,
            "ruleIndex": index[f.rule.code],
            "kind": "fail",
            "level": SARIF_LEVEL[f.severity],
            "message": {"text": _message(doc, f)},
            "locations": [{"physicalLocation": physical}],
            # code scanning tracks an alert by primaryLocationLineHash (the line's content,
            # so an alert survives lines added above it); our own key ignores the line
            "partialFingerprints": {
                "primaryLocationLineHash": _fingerprint(
                    f.rule.code, where.uri, *target, where.line_text()
                )[:16]
                + ":1",
                "vllmDoctorFinding/v1": _fingerprint(f.rule.code, where.uri, *target),
            },
            "properties": {
                "verdict": f.verdict,
                "confidence": f.confidence,
                "failing": doc.is_failing(f),
                "fix_state": f.fix_state.to_dict() if f.fix_state else None,
                "evidence": [e.to_dict() for e in f.evidence],
            },
        }
        if f.suppressed:
            result["suppressions"] = [
                {"kind": "external", "status": "accepted", "justification": f.suppressed}
            ]
        results.append(result)
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "vllm-doctor",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": driver_rules,
            }
        },
        "results": results,
        "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(repository_root())}},
        "columnKind": "unicodeCodePoints",
        "properties": {
            "rulebase": doc.rulebase.to_dict() if doc.rulebase else None,
            "fail_on": doc.fail_on,
            "strict": doc.strict,
            "summary": doc.summary_line(),
            "notes": doc.notes,
            "undecided": [
                {
                    "code": f.rule.code,
                    "severity": f.severity,
                    "missing": [m.to_dict() for m in f.missing],
                }
                for f in doc.undecided
                if not doc.is_failing(f)
            ],
        },
    }
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }
    return dump_json(sarif)


# -- JUnit XML -------------------------------------------------------------------------------


def render_junit(doc: CheckDocument) -> str:
    """One test case per rule checked. A failure is exactly a finding that sets exit code 1;
    a finding below --fail-on passes with its text in system-out; an ignored finding and an
    undecided rule are skipped with the reason."""
    cases = []
    failures = skipped = 0
    for f in sorted(doc.findings, key=lambda f: f.rule.code):
        name = quoteattr(f"{f.rule.code} {f.rule.slug}")
        head = f'    <testcase classname="vllm-doctor.{f.rule.category}" name={name}>'
        body = "\n".join(
            f"{e.aside}{e.path} = {value_text(e.value)} ({e.source})" for e in f.evidence
        )
        body += "".join(f"\nseen in the log: {line}" for line in f.log_matches)
        if f.reading is not None:
            body += f"\ncause: {f.reading.cause}" + "".join(f"\nfix: {x}" for x in f.reading.fixes)
        if f.suppressed:
            skipped += 1
            cases.append(
                f"{head}<skipped message={quoteattr('ignored: ' + f.suppressed)}/></testcase>"
            )
        elif doc.is_failing(f):
            failures += 1
            message = (
                f.rule.summary
                if f.verdict == APPLIES
                else ("cannot decide (--strict): " + f.rule.summary)
            )
            if f.verdict == UNDECIDED:
                body = "missing: " + ", ".join(f"{m.path} ({m.reason})" for m in f.missing)
            cases.append(
                f"{head}<failure type={quoteattr(f.severity)} message={quoteattr(message)}>"
                f"{xml_escape(body)}</failure></testcase>"
            )
        elif f.verdict == APPLIES:
            text = (f"{f.severity} below --fail-on {doc.fail_on}: {f.rule.summary}\n{body}").strip()
            cases.append(f"{head}<system-out>{xml_escape(text)}</system-out></testcase>")
        elif f.verdict == UNDECIDED:
            skipped += 1
            msg = "cannot decide: missing " + (
                ", ".join(m.path for m in f.missing) or "the vLLM version"
            )
            cases.append(f"{head}<skipped message={quoteattr(msg)}/></testcase>")
        else:
            assert f.verdict == NOT_APPLIES
            cases.append(f"{head}</testcase>")
    properties = {"fail_on": doc.fail_on, "strict": str(doc.strict).lower()}
    if doc.settings:
        properties["settings"] = doc.settings.describe()
    if doc.rulebase:
        properties.update(
            {
                "rulebase": doc.rulebase.version,
                "knowledge_newest_release": doc.rulebase.newest_release,
            }
        )
    props = "".join(
        f"\n      <property name={quoteattr(k)} value={quoteattr(v)}/>"
        for k, v in properties.items()
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="vllm-doctor">\n  <testsuite name="vllm-doctor check" '
        f'tests="{len(cases)}" failures="{failures}" errors="0" skipped="{skipped}" '
        f'time="{doc.duration_s:.3f}">\n    <properties>{props}\n    </properties>\n'
        + "\n".join(cases)
        + "\n  </testsuite>\n</testsuites>\n"
    )


# -- GitHub workflow commands ----------------------------------------------------------------


def _gh_data(text: str) -> str:
    # the runner turns %0A back into a line break inside the annotation; ESC and the other
    # controls are spelled out
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


_GH_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def render_github(doc: CheckDocument) -> str:
    """Workflow-command annotations (`::error file=…,line=…,title=…::message`), one per finding
    that applies and one per undecided rule that fails the run under --strict."""
    lines = []
    for f in doc.applies + [u for u in doc.undecided if doc.is_failing(u)]:
        where = location(doc, f)
        level = "error" if doc.is_failing(f) else _GH_LEVEL[f.severity]
        if level == "error" and not doc.is_failing(f):
            level = "warning"
        props = []
        if where.in_repository:
            props.append(f"file={_gh_property(where.uri)}")
            props.append(f"line={where.line}")
        props.append(f"title={_gh_property(f'{f.rule.code} {f.rule.summary}')}")
        message = _message(doc, f) + f"\nMore: vllm-doctor explain {f.rule.code}"
        lines.append(f"::{level} {','.join(props)}::{_gh_data(message)}")
    if doc.settings:  # a settings file that turned part of the gate off is a warning to see
        level = "warning" if doc.settings.turned_off() else "notice"
        lines.append(f"::{level} title=vllm-doctor settings::{_gh_data(doc.settings.describe())}")
    return "".join(line + "\n" for line in lines)


# -- GitLab Code Quality ---------------------------------------------------------------------

_GITLAB_SEVERITY = {"error": "critical", "warning": "major", "info": "info"}


def render_gitlab(doc: CheckDocument) -> str:
    """GitLab Code Quality report: a JSON array of issues with description, check_name,
    fingerprint, severity and location (path, lines.begin)."""
    import hashlib

    issues = []
    for f in doc.applies + [u for u in doc.undecided if doc.is_failing(u)]:
        where = location(doc, f)
        issues.append(
            {
                "type": "issue",
                "description": _message(doc, f),
                "check_name": f.rule.code,
                "categories": ["Bug Risk"],
                "fingerprint": hashlib.md5(
                    f"{f.rule.code}\0{where.uri}\0{f.verdict}".encode(), usedforsecurity=False
                ).hexdigest(),
                "severity": _GITLAB_SEVERITY[f.severity] if f.verdict == APPLIES else "major",
                "location": {
                    "path": where.uri
                    if not where.uri.startswith("file:")
                    else os.path.basename(where.uri),
                    "lines": {"begin": where.line},
                },
            }
        )
    if doc.settings:  # Code Quality has no notes: the settings file is an info issue of its own
        note = doc.settings.describe()
        issues.append(
            {
                "type": "issue",
                "description": note,
                "check_name": "settings",
                "categories": ["Security"],
                "severity": "info",
                "fingerprint": hashlib.md5(note.encode(), usedforsecurity=False).hexdigest(),
                "location": {"path": os.path.relpath(doc.settings.path), "lines": {"begin": 1}},
            }
        )
    return dump_json(issues)


RENDERERS: dict[str, Callable[[CheckDocument], str]] = {
    "json": render_json,
    "markdown": render_markdown,
    "sarif": render_sarif,
    "junit": render_junit,
    "github": render_github,
    "gitlab": render_gitlab,
}


# -- several targets (check --manifest) --------------------------------------------------------


def render_targets(docs: list[CheckDocument], fmt: str, render: Any) -> str:
    """One report for every container of a manifest: ``render`` gives each target's report
    in ``fmt``; the machine formats are merged into one document (one SARIF run, one GitLab
    array, one JUnit file with a suite per target, a JSON object with a ``targets`` list)."""
    parts = [render(doc) for doc in docs]
    if fmt == "json":
        return dump_json(
            {
                "schema_version": docs[0].to_dict()["schema_version"],
                "tool": {"name": "vllm-doctor", "version": __version__},
                "failing": any(doc.failing() for doc in docs),
                "targets": [json.loads(part) for part in parts],
            }
        )
    if fmt == "sarif":
        return _merge_sarif([json.loads(part) for part in parts])
    if fmt == "gitlab":
        return dump_json([issue for part in parts for issue in json.loads(part)])
    if fmt == "junit":
        head, tail = '<testsuites name="vllm-doctor">\n', "</testsuites>\n"
        suites = []
        for doc, part in zip(docs, parts, strict=True):
            suite = part.split(head, 1)[1].rsplit(tail, 1)[0]
            # a target about one of several things (a node of a fleet) names it as they do
            named = getattr(doc.target, "subject", None) or doc.target.name
            suites.append(
                suite.replace(
                    'name="vllm-doctor check"',
                    f"name={quoteattr('vllm-doctor check ' + named)}",
                    1,
                )
            )
        return parts[0].split(head, 1)[0] + head + "".join(suites) + tail
    if fmt == "github":
        return "".join(parts)
    heading = "### {}\n\n" if fmt == "markdown" else "── {} ──\n"
    return "\n".join(
        heading.format(printable(f"{doc.target.name} ({doc.target.where})")) + part
        for doc, part in zip(docs, parts, strict=True)
    )


def _merge_sarif(logs: list[dict[str, Any]]) -> str:
    first = logs[0]
    run = first["runs"][0]
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    summaries = []
    for log in logs:
        other = log["runs"][0]
        own = other["tool"]["driver"]["rules"]
        for result in other["results"]:
            rule = own[result["ruleIndex"]]
            if rule["id"] not in index:
                index[rule["id"]] = len(rules)
                rules.append(rule)
            result["ruleIndex"] = index[rule["id"]]
            results.append(result)
        summaries.append(other["properties"])
    run["tool"]["driver"]["rules"] = rules
    run["results"] = results
    run["properties"] = {"targets": summaries}
    return dump_json(first)
