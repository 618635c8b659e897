"""`vllm-doctor explain CODE` (a rule's document) and `explain --log crash.txt`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from vllm_doctor.commands.inputs import complete_rule_codes
from vllm_doctor.errors import EXIT_FINDINGS, InputError
from vllm_doctor.report.output import echo


def rule_markdown(rule) -> str:
    """A rule's document as markdown: header, summary, fix, workarounds, details, references."""
    lines = [
        f"# {rule.code} · {rule.slug}",
        "",
        f"**{rule.summary}**",
        "",
        f"Severity: {rule.severity} · confidence: {rule.confidence} · shows at: {rule.phase}"
        f" · status: {rule.status}",
        "",
    ]
    if rule.log_only:
        lines += [
            "Applies when a crash log shows the message below; the facts in `when` confirm "
            "the cause.",
            "",
        ]
    if rule.ranges:
        spans = ", ".join(
            f"{r.introduced} ≤ vLLM < {r.fixed}"
            if r.fixed
            else f"vLLM ≥ {r.introduced} (no fix released)"
            for r in rule.ranges
        )
        lines += [f"Affected releases: {spans}", ""]
    if rule.fingerprints:
        lines.append("Source fingerprints (read from the installed vllm package):")
        lines += [
            f"- `{fp.path}`: `{fp.pattern.pattern}` means {fp.means}" for fp in rule.fingerprints
        ]
        lines.append("")
    if rule.fix:
        fix = rule.fix
        parts = [f"status {fix.status}"]
        if fix.version:
            parts.append(f"released in {fix.version}")
        if fix.pr:
            parts.append(f"PR #{fix.pr}")
        if fix.commit:
            parts.append(f"commit {fix.commit[:12]}")
        lines += [f"Fix: {', '.join(parts)}", ""]
    if rule.workarounds:
        lines.append("Workarounds:")
        for w in rule.workarounds:
            edits = [f"--{k} {v}" if v is not True else f"--{k}" for k, v in w.serve_set.items()]
            edits += [f"drop --{k}" for k in w.serve_remove]
            edits += [f"{k}={v}" for k, v in w.env_set.items()] + [
                f"unset {k}" for k in w.env_unset
            ]
            cost = f" (cost: {w.cost})" if w.cost else ""
            lines.append(
                f"- {w.title}: `{' '.join(edits)}`{cost}" if edits else f"- {w.title}{cost}"
            )
        lines.append("")
    if rule.probe:
        lines += [f"Confirming probe: `vllm-doctor probe --only {rule.probe}`", ""]
    if rule.signatures:
        lines.append("Crash-log signatures:")
        lines += [f"- `{s.pattern}`" for s in rule.signatures]
        lines.append("")
    lines += [rule.details.strip(), "", "References:"]
    lines += [f"- {ref}" for ref in rule.references]
    return "\n".join(lines) + "\n"


def _find(code: str, rules_dirs: list[Path] | None):
    from vllm_doctor.engine.loader import load_rules

    wanted = code.strip().upper()
    for rule in load_rules(rules_dirs):
        if rule.code == wanted or rule.slug == code.strip().lower() or code in rule.aliases:
            return rule
    raise InputError(code, "no such rule (see `vllm-doctor rules list`)")


def print_rule(code: str, rules_dirs: list[Path] | None, plain: bool = False) -> None:
    from vllm_doctor.report.output import print_rich, stdout_is_terminal, write_stdout

    text = rule_markdown(_find(code, rules_dirs))
    if plain or not stdout_is_terminal():
        # piped or redirected: the markdown itself, unwrapped (as --plain)
        write_stdout(text if text.endswith("\n") else text + "\n")
        return
    from rich.markdown import Markdown

    print_rich(lambda console: console.print(Markdown(text)))


LOG_FORMATS = ("text", "json")


def _memory_readback(
    text: str,
    version: str | None,
    model_config: Path | None,
    gpu: str | None,
    gpus: int | None,
    serve: str | None,
) -> dict[str, Any] | None:
    """vLLM's printed memory figures and, given the model, GPU and serve line, the doctor's
    estimate beside them (memory/readback.py); None when the log prints no figure."""
    from vllm_doctor.memory.readback import compare, printed

    figures = printed(text)
    if figures is None:
        return None
    result: dict[str, Any] = {
        "printed": figures,
        "estimate": None,
        "comparison": [],
        "missing": None,
        "release": None,
        "release_note": None,
    }
    if not (model_config or gpu or serve):
        result["missing"] = (
            "pass --model-config, --gpu and --serve to compare them with the doctor's estimate"
        )
        return result
    from vllm_doctor.facts.collect import CollectOptions, collect_facts
    from vllm_doctor.facts.hardware import TargetHardware

    facts = collect_facts(
        CollectOptions(
            serve_string=serve,
            model_config=model_config,
            target=TargetHardware(gpu=gpu, count=gpus) if gpu is not None else None,
            vllm_version=version,
            probe_machine=False,
            offline=True,
        )
    )
    # the log's own inputs of the estimate (a multimodal model's encoder budget) count, as in
    # `check --log`
    from vllm_doctor.facts.model import Source
    from vllm_doctor.memory.facts import compute_memory
    from vllm_doctor.memory.readback import formula_release

    facts.set("log.memory_figures", figures, Source.LOG, "the log")
    compute_memory(facts)
    # whose formula the estimate follows: --vllm-version's, the log's release, else the newest
    release, why = formula_release(facts.value("vllm.version") or facts.value("release.judged"))
    if not version:
        why = f"{why}; pass --vllm-version to judge the release the log ran"
    result["release"], result["release_note"] = release, why
    result["estimate"] = facts.value("memory.estimate_line")
    result["comparison"] = compare(figures, facts)
    if result["estimate"] is None:
        result["missing"] = facts.why_missing("memory.kv_cache_gib")
    return result


def _print_memory(memory: dict[str, Any]) -> None:
    from vllm_doctor.memory.readback import describe, row_line

    echo(f"vLLM's memory figures: {describe(memory['printed'])}")
    if memory["estimate"]:
        echo(f"    estimate: {memory['estimate']}")
        note = f" ({memory['release_note']})" if memory["release_note"] else ""
        echo(f"    by the formula of vLLM {memory['release']}{note}")
    for row in memory["comparison"]:
        echo(f"    {row_line(row)}")
    if memory["missing"]:
        echo(f"    no estimate: {memory['missing']}")


def _check_serve(serve: str) -> None:
    """The serve line's own parse errors (as `check` reports them); words vLLM's parser would
    refuse as a second positional argument mean the text is no serve line at all."""
    from vllm_doctor.serveline.command import parse_serve_string

    if not serve.strip():
        raise InputError("--serve", "the serve line is empty")
    line = parse_serve_string(serve)
    stray = [word for word in line.unknown_flags if not word.startswith("-")]
    if stray:
        raise InputError(
            "--serve",
            f"not a serve line: vLLM takes one positional word (the model), not "
            f'{" ".join(stray)!r} (give "vllm serve MODEL ...")',
        )


def explain_log(
    log_path: Path,
    rules_dirs: list[Path] | None,
    fmt: str = "text",
    vllm_version: str | None = None,
    model_config: Path | None = None,
    gpu: str | None = None,
    gpus: int | None = None,
    serve: str | None = None,
) -> int:
    """Name the known failure (curated rules), else the vLLM message, behind a crash log;
    read back the memory figures a start-up log prints."""
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.engine.logreport import analyse_log
    from vllm_doctor.facts.crashlog import read_log

    if fmt not in LOG_FORMATS:
        raise InputError("--format", f"unknown format {fmt!r} (one of {', '.join(LOG_FORMATS)})")
    if vllm_version is not None:
        from vllm_doctor.commands.inputs import check_version

        check_version("--vllm-version", vllm_version)
    if gpu is not None:
        from vllm_doctor.facts.hardware import resolve_gpu

        resolve_gpu(gpu)
    if serve is not None:
        _check_serve(serve)
    text = read_log(log_path)
    report = analyse_log(
        text, load_rules(rules_dirs), vllm_version, "option" if vllm_version else ""
    )
    name = "standard input" if str(log_path) == "-" else str(log_path)
    memory = _memory_readback(text, vllm_version or report.version, model_config, gpu, gpus, serve)
    if fmt == "json":
        import json

        data = log_report_dict(report, name)
        data["memory"] = memory
        echo(json.dumps(data, indent=2))
    else:
        if memory is None or _found(report):
            _print_log_report(report, name)
        if memory is not None:
            _print_memory(memory)
    return EXIT_FINDINGS if _found(report) else 0


def _found(report) -> bool:
    return bool(
        report.rule_hits or report.messages or report.package_messages or report.refused_options
    )


def log_report_dict(report, name: str) -> dict:
    """The JSON of `explain --log` (docs/json-output.md)."""
    return {
        "log": name,
        "vllm_version": report.version,
        "vllm_version_source": report.version_source or None,
        "known_failures": [
            {
                "code": rule.code,
                "slug": rule.slug,
                "severity": rule.severity,
                "confidence": rule.confidence,
                "summary": rule.summary,
                "matched_lines": lines,
                "fix": rule.raw.get("fix"),
                "workarounds": rule.raw.get("workarounds", []),
                "log_reading": reading.to_dict() if reading else None,
                "references": list(rule.references),
                "url": rule.url,
            }
            for rule, lines, reading in report.rule_hits
        ],
        "vllm_messages": [m.to_dict() for m in report.messages],
        "package_messages": [m.to_dict() for m in report.package_messages],
        "refused_options": report.refused_options,
    }


def _print_log_report(report, name: str) -> None:
    if not _found(report):
        echo(f"No known failure and no vLLM error message found in {name}.")
        return
    if report.refused_options:
        echo("vLLM's argument parser refused (the options of every release 0.8.0 on):")
        for hint in report.refused_options:
            echo(f"    {hint}")
        if report.version is None:
            echo("    (pass --vllm-version V to judge them by your release)")
        if report.rule_hits or report.messages:
            echo("")
    for rule, lines, reading in report.rule_hits:
        echo(f"{rule.code} [{rule.severity}] {rule.summary}")
        for line in lines:
            echo(f"    matched: {line}")
        if reading is not None:
            echo(f"    cause: {reading.cause}")
            for fix in reading.fixes:
                echo(f"    fix: {fix}")
            for line in reading.read:
                echo(f"    read: {line}")
        if rule.fix and rule.fix.version:
            echo(f"    fix: upgrade to vLLM {rule.fix.version} or later")
        for w in rule.workarounds:
            cost = f" (cost: {w.cost})" if w.cost else ""
            echo(f"    workaround: {w.title}{cost}")
            for line in w.env_commands():  # as `check` prints them
                echo(f"      {line}")
        echo(f"    more: vllm-doctor explain {rule.code}")
    sections = [render_messages(report)] if report.messages else []
    if report.package_messages:
        # vLLM's messages that only point elsewhere ("See root cause above.") come after the
        # packages' messages, which may hold that root cause
        wrappers_only = all(m.hit.points_elsewhere for m in report.messages)
        sections.insert(0 if wrappers_only else len(sections), render_package_messages(report))
    for section in sections:
        if report.rule_hits or section is not sections[0]:
            echo("")
        echo(section)


def render_package_messages(report) -> str:
    """The messages of the packages around vLLM (stack knowledge), as text."""
    out = [
        "Messages of the packages around vLLM in the log (stack knowledge, read from each "
        "package's wheels or tagged source):"
    ]
    for message in report.package_messages:
        hit = message.hit
        out.append(f"  {message.package} {hit.cls}: {hit.template}")
        out.append(
            f"    seen: {hit.line}" + ("" if hit.complete else "  (message cut short in the log)")
        )
        for path, func, cond in message.sites():
            out.append(f"    raised in {path}, in {func}" + (f", when {cond}" if cond else ""))
        read = f" (of the versions read: {message.versions[0]}–{message.versions[-1]})"
        out.append(f"    {message.package} versions: {message.ranges()}" + read)
        if message.installed is not None:
            out.append(
                f"    installed: {message.package} {message.installed} "
                f"({message.installed_source})"
                + (f": {message.installed_note}" if message.installed_note else "")
            )
        if message.note:
            out.append(f"    {message.note}")
    return "\n".join(out)


def _messages_order(messages) -> str:
    """What the order of vLLM's messages says: the first names the cause, unless every one
    only points at a cause shown elsewhere in the log."""
    if all(m.hit.points_elsewhere for m in messages):
        return "each only points at a root cause shown elsewhere in the log"
    return "the first is the nearest to the root cause"


def render_messages(report) -> str:
    """The catalogue part of a log report, as text (explain --log and check --log)."""
    out = [
        f"vLLM error messages in the log (error catalogue, {len(report.messages)} shown; "
        + _messages_order(report.messages)
        + "):"
    ]
    for message in report.messages:
        hit = message.hit
        label = (
            f"logged at {hit.cls[4:]} level"
            if hit.cls.startswith("log.")
            else "the API server's error reply"
            if hit.cls == "response"
            else hit.cls
        )
        out.append(f"  {label}: {hit.template}")
        out.append(
            f"    seen: {hit.line}" + ("" if hit.complete else "  (message cut short in the log)")
        )
        verb = "returned by" if hit.cls == "response" else "raised in"
        for path, func, cond in message.sites():
            where = f"vllm/{path}, in {func}"
            out.append(f"    {verb} {where}" + (f", when {cond}" if cond else ""))
        out.append(f"    releases: {message.release_ranges()}")
        if message.note:
            out.append(f"    {message.note}")
    if report.version is None:
        out.append("  (pass --vllm-version V to say what your release does with these messages)")
    return "\n".join(out)


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain(
        code: str | None = typer.Argument(
            None,
            help="Rule code (e.g. MODEL001) or slug.",
            autocompletion=complete_rule_codes,
        ),
        log: Path | None = typer.Option(
            None,
            "--log",
            help="Name the known failure behind a crash log (`-` reads standard input).",
        ),
        fmt: str = typer.Option("text", "--format", "-f", help="For --log: text or json."),
        vllm_version: str | None = typer.Option(
            None,
            "--vllm-version",
            help="For --log: the vLLM version that wrote the log (else read from the log).",
        ),
        plain: bool = typer.Option(
            False, "--plain", help="Markdown text instead of the rendered view."
        ),
        rules_dir: list[Path] | None = typer.Option(
            None, "--rules-dir", help="Rule directory to use."
        ),
        model_config: Path | None = typer.Option(
            None,
            "--model-config",
            help="For --log: the model's config.json or directory, to compare a start-up log's memory figures with the estimate.",
        ),
        gpu: str | None = typer.Option(
            None,
            "--gpu",
            help='For --log: the GPU the log ran on ("H100 80GB"), for the memory estimate.',
        ),
        gpus: int | None = typer.Option(None, "--gpus", help="For --log: how many of them."),
        serve: str | None = typer.Option(
            None,
            "--serve",
            help='For --log: the serve line the log ran ("vllm serve MODEL ..."), for the memory estimate.',
        ),
    ) -> None:
        """Print a rule's document, or name the known failure behind a crash log."""
        if fmt not in LOG_FORMATS:
            raise InputError(
                "--format", f"unknown format {fmt!r} (one of {', '.join(LOG_FORMATS)})"
            )
        dirs = list(rules_dir) if rules_dir else None
        if log is not None:
            raise typer.Exit(
                explain_log(log, dirs, fmt, vllm_version, model_config, gpu, gpus, serve)
            )
        if not code:
            raise InputError("explain", "give a rule code or --log FILE")
        print_rule(code, dirs, plain)
