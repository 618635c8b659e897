"""Terminal output in the doctor convention: a section per area with ✓ / ! / ✗ marks,
each finding with its evidence, fix and ready-to-copy corrected command; details behind -v."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from vllm_doctor.engine.evaluate import NOT_APPLIES, Finding
from vllm_doctor.engine.fixstate import UNVERSIONED
from vllm_doctor.report.document import CheckDocument
from vllm_doctor.report.output import escape
from vllm_doctor.report.summary import first_line, root_reason

# section marks as in the facts view; finding marks without brackets
OK, WARN, FAIL, UNKNOWN = r"[green]\[✓][/]", r"[yellow]\[!][/]", r"[red]\[✗][/]", r"[cyan]\[?][/]"
MARK_FOR_SEVERITY = {"error": "[red]✗[/]", "warning": "[yellow]![/]", "info": "[blue]i[/]"}

# the fact sections shown above the findings (the facts view renders them)
FACT_SECTIONS = ("Stack", "GPUs and links", "Model", "Serve arguments")


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()) or "{}"
    return str(value)


def _finding(console: Console, doc: CheckDocument, f: Finding, verbose: bool) -> None:
    rule = f.rule
    mark = MARK_FOR_SEVERITY[f.severity]
    console.print(
        f"  {mark} [bold]{rule.code}[/] {escape(f'[{f.severity}]')} {escape(rule.summary)}"
        f" [dim](confidence {f.confidence}; shows at {rule.phase})[/]"
    )
    place = doc.target_place(f)
    if place is not None and place[0] != "-":  # "-": a target in no file
        console.print(f"      at {escape(place[0])}:{place[1]}")
    for ev in f.evidence:
        console.print(
            f"      {ev.label} {escape(ev.path)} = {escape(_fmt(ev.value))}"
            f" [dim]({escape(ev.source)})[/]"
        )
    if f.fix_state and f.fix_state.state != UNVERSIONED:
        label = "source" if f.fix_state.method == "fingerprint" else "version"
        console.print(f"      {label}: {escape(f.fix_state.detail)}")
    for line in f.log_matches:
        console.print(f"      seen in the log: [italic]{escape(line)}[/]")
    if f.reading is not None:
        console.print(f"      cause: {escape(f.reading.cause)}")
        for fix in f.reading.fixes:
            console.print(f"      [green]fix:[/] [bold]{escape(fix)}[/]", soft_wrap=True)
        for line in f.reading.read:
            console.print(f"      [dim]read: {escape(line)}[/]")
    if f.probe_results:
        from vllm_doctor.probes.render import LEVEL_STYLES as PROBE_LEVEL_STYLES
    for probe in f.probe_results:
        # the joined verdict for this rule: the mechanism here and the judged vLLM's fix state
        for v in probe.get("verdicts", []):
            if v.get("rule") != rule.code:
                continue
            style = PROBE_LEVEL_STYLES.get(v.get("level"), "dim")
            console.print(
                f"      probe {escape(str(probe.get('name')))}: [{style}]{escape(str(v.get('text')))}[/]"
            )
            if v.get("workaround"):
                console.print(f"        {escape(str(v['workaround']))}")
        # isolated sub-checks (e.g. the transient CUDA-graph pattern) carry their own outcome
        for part, sub in (probe.get("metrics") or {}).items():
            if isinstance(sub, dict) and "status" in sub:
                outcome = sub.get("outcome") or sub.get("error") or sub.get("reason") or ""
                console.print(
                    f"        {escape(part)}: {sub['status']} — {escape(str(outcome))[:200]}"
                )
    fix = rule.fix
    if fix and fix.version:
        pr = f" (PR #{fix.pr})" if fix.pr else ""
        console.print(f"      [green]fix:[/] upgrade to vLLM {fix.version} or later{pr}")
    elif fix and fix.status == "merged":
        console.print(f"      [green]fix:[/] merged upstream (PR #{fix.pr}), not yet in a release")
    for sugg in doc.suggestions.get(rule.code, []):
        cost = f" [dim](cost: {escape(sugg.cost)})[/]" if sugg.cost else ""
        console.print(f"      [green]workaround:[/] {escape(sugg.title)}{cost}")
        for env in sugg.env:
            console.print(f"        {escape(env)}")
        if sugg.command:
            console.print(f"        [bold]{escape(sugg.command)}[/]", soft_wrap=True)
    console.print(f"      [dim]more: vllm-doctor explain {rule.code}[/]")
    if verbose:
        for ref in rule.references:
            console.print(f"      [dim]{ref}[/]")


def _log_messages(console: Console, doc: CheckDocument) -> None:
    """vLLM's own messages in the crash log, with where and in which releases vLLM raises them."""
    order = (
        "each only points at a root cause shown elsewhere in the log"
        if all(m.hit.points_elsewhere for m in doc.log_messages)
        else "the first is the nearest to the root cause"
    )
    console.print(f"{UNKNOWN} [bold]vLLM messages in the log[/] (error catalogue; {order})")
    for m in doc.log_messages:
        console.print(f"  {escape(m.hit.cls)}: {escape(m.hit.template)}", soft_wrap=True)
        console.print(f"      seen in the log: [italic]{escape(m.hit.line)}[/]")
        for path, func, cond in m.sites():
            console.print(
                f"      raised in vllm/{escape(path)}, in {escape(func)}"
                + (f", when {escape(cond)}" if cond else "")
            )
        console.print(f"      releases: {escape(m.release_ranges())}")
        if m.note:
            console.print(f"      {escape(m.note)}")


def _log_package_messages(console: Console, doc: CheckDocument) -> None:
    """The messages of the packages around vLLM in the crash log (stack knowledge)."""
    console.print(
        f"{UNKNOWN} [bold]Messages of the packages around vLLM in the log[/] (stack knowledge)"
    )
    for m in doc.log_package_messages:
        console.print(f"  {escape(m.package)} {escape(m.hit.cls)}: {escape(m.hit.template)}")
        console.print(f"      seen in the log: [italic]{escape(m.hit.line)}[/]")
        for path, func, cond in m.sites():
            console.print(
                f"      raised in {escape(path)}, in {escape(func)}"
                + (f", when {escape(cond)}" if cond else "")
            )
        console.print(f"      {escape(m.package)} versions: {escape(m.ranges())}")
        if m.note:
            console.print(f"      {escape(m.note)}")


def _undecided(console: Console, doc: CheckDocument, verbose: bool, said: set[str]) -> None:
    n = len(doc.undecided)
    failing = [f for f in doc.undecided if doc.is_failing(f)]
    strict = f", {len(failing)} fail the run under --strict" if failing else ""
    console.print(
        f"{UNKNOWN} [bold]Cannot decide[/] ({n} rule{'s' if n != 1 else ''} "
        f"need{'s' if n == 1 else ''} more facts{strict})"
    )
    # the failing ones always; the rest up to 8 unless -v
    shown = (
        doc.undecided
        if verbose
        else (failing + [f for f in doc.undecided if f not in failing])[: max(8, len(failing))]
    )
    for f in shown:
        needs = ", ".join(m.path for m in f.missing) or "the vLLM version"
        mark = "[red]✗[/]" if doc.is_failing(f) else "[cyan]?[/]"
        console.print(
            f"  {mark} {f.rule.code} {escape(f'[{f.severity}]')} {escape(f.rule.summary)}"
        )
        console.print(
            f"      missing: {escape(needs)}"
            + (" (cannot be known from this input)" if f.unknowable_here else "")
        )
    if len(doc.undecided) > len(shown):
        console.print(f"  [dim]… {len(doc.undecided) - len(shown)} more (-v lists them)[/]")
    # why each fact is missing and how to supply it: one line per reason, however many
    # facts and rules share it
    reasons: dict[str, tuple[list[str], list[str]]] = {}
    for f in doc.undecided:
        for m in f.missing:
            paths, hows = reasons.setdefault(root_reason(m.reason), ([], []))
            if m.path not in paths:
                paths.append(m.path)
            if m.how not in hows:
                hows.append(m.how)
    console.print("    to decide them:")
    for reason, (paths, hows) in reasons.items():
        said.add(reason)
        more = f" (+{len(paths) - 3})" if len(paths) > 3 else ""
        console.print(f"      {escape(', '.join(paths[:3]))}{more}: {escape(reason)}")
        for how in hows:
            if how not in reason:
                console.print(f"        [dim]→ {escape(how)}[/]")


def recommendation_lines(result: Any) -> list[str]:
    """check --recommend in words (commands/recommend.py Recommendation), one line each."""
    from vllm_doctor.commands.recommend import grouped

    def why(first: Any) -> str:
        return "; ".join(
            f"{code} ({result.summaries.get(code, '')})"
            + (f": {first.because[code]}" if first.because.get(code) else "")
            for code in first.errors
        )

    span = f"{result.releases[0]}–{result.releases[-1]}" if result.releases else "none"
    torch = (
        f"torch {result.torch_kept} kept" if result.torch_kept else "each with the torch it pins"
    )
    lines = [f"Recommended release (judged over the covered releases {span}, {torch}):"]
    hardware = "this driver and these GPUs" + (" with this torch" if result.torch_kept else "")
    newest = result.newest_running
    lines.append(
        f"  runs here: vLLM {newest}, the newest release that runs on {hardware}"
        if newest
        else f"  runs here: no covered release runs on {hardware}"
    )
    for releases, first in grouped(result.releases, result.not_running()):
        lines.append(f"    not {releases}: {why(first)}")
    if result.running_full is not None:
        lines.append(
            f"    and with this serve line: {why(result.running_full)}"
            if result.running_full.errors
            else f"    and no error applies to it with this serve line: install vllm=={newest}"
        )
    start = f"at or above {result.judged}" if result.judged else "of the covered ones"
    oldest = result.oldest_clearing
    lines.append(
        f"  clears the findings: vLLM {oldest}, the oldest release {start} with no error for "
        "this serve line"
        if oldest
        else f"  clears the findings: no release {start} is without an error for this serve line"
    )
    for releases, first in grouped(result.releases, result.skipped()):
        lines.append(f"    skips {releases}: {why(first)}")
    for code, release in result.clears.items():
        lines.append(
            f"    {code} is cleared from {release}"
            if release
            else f"    {code} is not cleared by any covered release {start}"
        )
    return lines


def _recommendation(console: Console, doc: CheckDocument) -> None:
    """check --recommend: the release to install, and why the others are passed over."""
    if doc.recommendation is None:
        return
    for line in recommendation_lines(doc.recommendation):
        console.print(escape(line), highlight=False)


def _memory_line(console: Console, doc: CheckDocument) -> None:
    """The memory estimate in one line (memory/estimate.py), when the facts allow one."""
    from vllm_doctor.memory.summary import report_line

    line = report_line(doc.facts)
    if line is not None:
        # ✓ only where the estimate decides that a request fits (undecided, tight: !)
        verdict = doc.facts.value("memory.kv_verdict")
        budget = doc.facts.value("memory.kv_budget_room")  # with --kv-cache-memory-bytes
        mark = FAIL if verdict == "does-not-fit" else OK if verdict == "fits" else WARN
        if budget == "none":
            mark = FAIL
        elif budget == "tight" and mark == OK:
            mark = WARN
        if doc.facts.value("memory.estimate_line") is None:  # vLLM's figures alone
            mark = WARN
        console.print(f"{mark} [bold]Memory[/]: {escape(line)}")


def render_text(
    doc: CheckDocument, console: Console, verbose: bool = False, quiet: bool = False
) -> None:
    """What was read (one line), then the findings, then what could not be decided, then the facts: a line per section
    (every fact with its source under ``verbose``). ``quiet``: the first line and the findings."""
    from vllm_doctor.report.facts_view import SECTIONS, render_facts, section_digest, shown_notes

    applies = doc.applies
    # what was read and what was not, and the one next step: always the first line
    console.print(escape(first_line(doc)), highlight=False)
    if quiet:
        for f in applies:
            _finding(console, doc, f, verbose)
        _recommendation(console, doc)
        for f in doc.undecided:
            if doc.is_failing(f):
                needs = ", ".join(m.path for m in f.missing) or "the vLLM version"
                console.print(
                    f"  [red]✗[/] {f.rule.code} {escape(f'[{f.severity}]')} cannot decide "
                    f"(--strict): {escape(f.rule.summary)} — missing {escape(needs)}"
                )
        return
    worst = FAIL if doc.count("error") else (WARN if applies or doc.undecided else OK)
    base = ""
    if doc.rulebase:
        base = (
            f"; rule base {doc.rulebase.version}, knowledge up to vLLM "
            f"{doc.rulebase.newest_release}"
        )
    console.print(f"{worst} [bold]Known failures[/] ({doc.rules_checked} rules{escape(base)})")
    if not applies and doc.undecided:  # "none applies" would claim what was not checked
        decided = doc.rules_checked - len(doc.undecided)
        hint = doc.undecided_hint()
        console.print(
            f"    none of the {decided} rules decided applies; "
            + escape(hint or f"{len(doc.undecided)} could not be decided")
        )
    elif not applies:
        console.print("    none of the known failures applies")
    for f in applies:
        _finding(console, doc, f, verbose)
    said: set[str] = set()
    if doc.undecided:
        _undecided(console, doc, verbose, said)
    _recommendation(console, doc)
    # a curated rule seen in the log names the cause; the log's messages are then detail (-v)
    if verbose or not any(f.log_matches for f in applies):
        # vLLM's messages that only point elsewhere ("See root cause above.") come after the
        # packages' messages, which may hold that root cause
        wrappers_only = all(m.hit.points_elsewhere for m in doc.log_messages)
        if doc.log_package_messages and wrappers_only:
            _log_package_messages(console, doc)
        if doc.log_messages:
            _log_messages(console, doc)
        if doc.log_package_messages and not wrappers_only:
            _log_package_messages(console, doc)
    for f in doc.suppressed:
        console.print(f"  [dim]- {f.rule.code} ignored: {escape(f.suppressed or '')}[/]")
    if doc.probes:
        from vllm_doctor.probes.render import LEVEL_STYLES as PROBE_LEVEL_STYLES

        console.print("[bold]Probes[/]")
        for p in doc.probes:
            console.print(
                f"    {p.get('name')}: {p.get('status')} {escape(str(p.get('reason') or ''))}"
            )
            for v in p.get("verdicts", []):
                style = PROBE_LEVEL_STYLES.get(v.get("level"), "dim")
                console.print(
                    f"      [{style}]{escape(str(v.get('rule')))} {escape(str(v.get('level')))}: "
                    f"{escape(str(v.get('text')))}[/]"
                )
    if verbose:
        render_facts(doc.facts, console, verbose=True, only=FACT_SECTIONS, notes=False)
        clear = sorted(f.rule.code for f in doc.findings if f.verdict == NOT_APPLIES)
        console.print(f"[dim]does not apply: {', '.join(clear) or '(none)'}[/]")
        console.print(f"[dim]checked in {doc.duration_s:.3f} s[/]")
    else:
        marks = {"✓": OK, "!": WARN, "✗": FAIL}
        for section in SECTIONS:
            if section.title in FACT_SECTIONS:
                mark, line = section_digest(doc.facts, section, said)
                console.print(f"{marks[mark]} [bold]{escape(section.title)}[/]: {escape(line)}")
    _memory_line(console, doc)
    for note in dict.fromkeys(doc.notes + shown_notes(doc.facts)):
        console.print(f"[dim]note: {escape(note)}[/]")
