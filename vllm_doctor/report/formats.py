"""Machine formats of the check document: JSON, markdown (GitHub issues), SARIF, JUnit XML."""

from __future__ import annotations

import json
from typing import Any
from html import escape as _escape

from vllm_doctor import __version__
from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, Finding
from vllm_doctor.engine.fixstate import UNVERSIONED
from vllm_doctor.report.document import CheckDocument

def xml_escape(text: str) -> str:
    return _escape(text, quote=False)


def quoteattr(text: str) -> str:
    return f'"{_escape(text, quote=True)}"'


SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def render_json(doc: CheckDocument) -> str:
    return json.dumps(doc.to_dict(), indent=2, default=str) + "\n"


def _md_cell(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: CheckDocument) -> str:
    out = ["## vllm-doctor report", "", f"**{doc.summary_line()}**", ""]
    if doc.applies:
        out += ["| | code | severity | summary | fix |", "|---|---|---|---|---|"]
        for f in doc.applies:
            mark = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}[f.severity]
            fix = f"vLLM ≥ {f.rule.fix.version}" if f.rule.fix and f.rule.fix.version else ""
            out.append(f"| {mark} | `{f.rule.code}` | {f.severity} | {_md_cell(f.rule.summary)} | {fix} |")
        out.append("")
        for f in doc.applies:
            out += [f"### `{f.rule.code}` {f.rule.summary}", ""]
            for ev in f.evidence:
                out.append(f"- `{ev.path}` = `{_md_cell(ev.value)}` ({ev.source})")
            if f.fix_state and f.fix_state.state != UNVERSIONED:
                out.append(f"- {'source' if f.fix_state.method == 'fingerprint' else 'version'}: {f.fix_state.detail}")
            for line in f.log_matches:
                out.append(f"- seen in the log: `{line}`")
            for sugg in doc.suggestions.get(f.rule.code, []):
                out.append(f"- workaround: {sugg.title}" + (f" (cost: {sugg.cost})" if sugg.cost else ""))
                if sugg.command or sugg.env:
                    out += ["", "```bash", *sugg.env, *( [sugg.command] if sugg.command else []), "```"]
            out += [f"- references: {', '.join(f.rule.references)}", ""]
    else:
        out += ["None of the known failures applies.", ""]
    if doc.undecided:
        n = len(doc.undecided)
        out += ["<details><summary>Cannot decide "
                f"({n} rule{'s' if n != 1 else ''} need{'s' if n == 1 else ''} more facts)</summary>", ""]
        for f in doc.undecided:
            needs = ", ".join(f"`{m.path}` ({m.reason})" for m in f.missing) or "vLLM version"
            out.append(f"- `{f.rule.code}` {f.rule.summary} — missing {needs}")
        out += ["", "</details>", ""]
    if doc.log_messages:
        out += ["### vLLM messages in the log", ""]
        for m in doc.log_messages:
            sites = "; ".join(f"`vllm/{path}` in `{func}`" + (f" when `{_md_cell(cond)}`" if cond else "")
                              for path, func, cond in m.sites())
            out.append(f"- `{_md_cell(m.hit.cls)}: {_md_cell(m.hit.template)}` — raised in {sites}; "
                       f"releases {m.release_ranges()}" + (f". {_md_cell(m.note)}" if m.note else ""))
        out.append("")
    out += ["<details><summary>Facts</summary>", "", "| fact | value | source |", "|---|---|---|"]
    for path in sorted(doc.facts.values):
        fact = doc.facts.values[path]
        if path in ("serve.argv",):
            continue
        out.append(f"| `{path}` | {_md_cell(fact.value)} | {_md_cell(fact.describe_source())} |")
    for key, reason in sorted(doc.facts.missing.items()):
        out.append(f"| `{key}` | _not available_ | {_md_cell(reason)} |")
    out += ["", "</details>", "", f"<sub>vllm-doctor {__version__}</sub>", ""]
    return "\n".join(out)


def render_sarif(doc: CheckDocument) -> str:
    rules_seen: dict[str, Finding] = {}
    for f in doc.applies + doc.undecided:
        rules_seen.setdefault(f.rule.code, f)
    driver_rules = [{
        "id": code,
        "name": f.rule.slug,
        "shortDescription": {"text": f.rule.summary},
        "fullDescription": {"text": f.rule.details.strip()[:2000]},
        "helpUri": f.rule.references[0] if f.rule.references else f.rule.url,
        "defaultConfiguration": {"level": SARIF_LEVEL[f.rule.severity]},
        "properties": {"confidence": f.rule.confidence, "phase": f.rule.phase},
    } for code, f in sorted(rules_seen.items())]
    index = {r["id"]: i for i, r in enumerate(driver_rules)}
    results = []
    for f in doc.applies:
        evidence = "; ".join(f"{e.path}={e.value} ({e.source})" for e in f.evidence)
        results.append({
            "ruleId": f.rule.code,
            "ruleIndex": index[f.rule.code],
            "level": SARIF_LEVEL[f.rule.severity],
            "message": {"text": f"{f.rule.summary}. Evidence: {evidence or 'crash log'}"},
            "properties": {"confidence": f.confidence, "verdict": APPLIES,
                           "fix_state": f.fix_state.to_dict() if f.fix_state else None},
        })
    for f in doc.undecided:
        results.append({
            "ruleId": f.rule.code,
            "ruleIndex": index[f.rule.code],
            "level": "none",
            "kind": "review",
            "message": {"text": f"cannot decide: missing {', '.join(m.path for m in f.missing)}"},
            "properties": {"verdict": UNDECIDED},
        })
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "vllm-doctor", "version": __version__,
                                "informationUri": "https://github.com/vllm-doctor/vllm-doctor",
                                "rules": driver_rules}},
            "results": results,
        }],
    }
    return json.dumps(sarif, indent=2, default=str) + "\n"


def render_junit(doc: CheckDocument) -> str:
    cases = []
    failures = skipped = 0
    for f in sorted(doc.findings, key=lambda f: f.rule.code):
        name = quoteattr(f"{f.rule.code} {f.rule.slug}")
        head = f'    <testcase classname="vllm-doctor.{f.rule.category}" name={name}>'
        if f.suppressed:
            skipped += 1
            cases.append(f"{head}<skipped message={quoteattr('ignored: ' + f.suppressed)}/></testcase>")
        elif f.verdict == APPLIES:
            failures += 1
            body = "\n".join(f"{e.path} = {e.value} ({e.source})" for e in f.evidence)
            cases.append(f"{head}<failure type={quoteattr(f.severity)} message={quoteattr(f.rule.summary)}>"
                         f"{xml_escape(body)}</failure></testcase>")
        elif f.verdict == UNDECIDED:
            skipped += 1
            msg = "cannot decide: missing " + ", ".join(m.path for m in f.missing)
            cases.append(f"{head}<skipped message={quoteattr(msg)}/></testcase>")
        else:
            assert f.verdict == NOT_APPLIES
            cases.append(f"{head}</testcase>")
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            f'<testsuites name="vllm-doctor">\n  <testsuite name="vllm-doctor check" '
            f'tests="{len(cases)}" failures="{failures}" errors="0" skipped="{skipped}" '
            f'time="{doc.duration_s:.3f}">\n' + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n")
