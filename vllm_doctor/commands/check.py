"""`vllm-doctor check`: facts → rules → findings → a report, with CI exit codes."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from vllm_doctor.commands import inputs
from vllm_doctor.errors import EXIT_FINDINGS, EXIT_OK, InputError, step
from vllm_doctor.facts.model import Source

if TYPE_CHECKING:
    from vllm_doctor.facts.collect import CollectOptions

FORMATS = ("text", "json", "markdown", "sarif", "junit")
FAIL_ON = ("error", "warning", "info", "never")


def examples_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "examples"


@dataclass
class Example:
    name: str
    description: str
    serve: str | None
    model_config: Path | None
    report: Path | None
    log: Path | None


def load_examples() -> dict[str, Example]:
    from vllm_doctor import yaml_io

    examples = {}
    for scenario in sorted(examples_dir().glob("*/scenario.yaml")):
        data = yaml_io.safe_load(scenario.read_text(encoding="utf-8"))
        base = scenario.parent

        def path(key: str) -> Path | None:
            return base / data[key] if data.get(key) else None

        examples[base.name] = Example(base.name, data.get("description", ""), data.get("serve"),
                                      path("model_config"), path("report"), path("log"))
    return examples


def _suggestions(doc, facts) -> None:
    """Turn each applicable workaround into a ready-to-copy command."""
    from vllm_doctor.report.document import FixSuggestion

    argv = facts.value("serve.argv")
    line = None
    if argv:
        try:
            from vllm_doctor.serve_args import parse_serve_argv

            line = parse_serve_argv(list(argv))
        except (ImportError, InputError):
            line = None
    for finding in doc.applies:
        out = []
        for w in finding.rule.workarounds:
            command = None
            if w.edits_serve_line and line is not None:
                from vllm_doctor.redact import shell_words
                from vllm_doctor.serve_args import render_command

                command = render_command(line, set=w.serve_set, remove=w.serve_remove)
                # `KEY=VALUE vllm serve ...`: keep the variables the user put before the command,
                # less those the workaround unsets or sets itself
                prefix = [f"{path[4:]}={fact.value}" for path, fact in facts.area("env")
                          if fact.source == Source.SERVE and path[4:] not in w.env_unset
                          and path[4:] not in w.env_set]
                if prefix:  # a secret's value is a "$NAME" placeholder, never '<redacted>'
                    command = f"{shell_words(prefix)} {command}"
            env = [f"export {k}={v}" for k, v in w.env_set.items()] + [f"unset {k}" for k in w.env_unset]
            out.append(FixSuggestion(finding.rule.code, w.title, command, env, w.cost))
        if out:
            doc.suggestions[finding.rule.code] = out


def _attach_probes(doc, facts, findings, tp: int | None, device: str, timeout: float) -> None:
    """Run the probes linked to applicable/undecided findings and fold their results in."""
    from vllm_doctor.commands.probe import model_dims
    from vllm_doctor.probes import run_probes

    wanted = sorted({f.rule.probe for f in findings if f.rule.probe and f.verdict != "not-applies"})
    if not wanted:
        doc.notes.append("--probe: no finding has a confirming probe")
        return
    results = [r.to_dict() for r in run_probes(wanted, tp=tp or 1, device=device,
                                                timeout=timeout, model=model_dims(facts))]
    doc.probes = results
    for finding in findings:
        for result in results:
            if finding.rule.code in result.get("rules_confirmed", []) + result.get("rules_refuted", []):
                finding.probe_results.append(result)


def run_check(
    options: "CollectOptions",
    fmt: str = "text",
    fail_on: str = "error",
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    ignore_file: Path | None = None,
    verbose: bool = False,
    output: Path | None = None,
    example: str | None = None,
    probe: bool = False,
    rules_dirs: list[Path] | None = None,
    probe_timeout: float = 120.0,
) -> int:
    started = time.perf_counter()
    if fmt not in FORMATS:
        raise InputError("--format", f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if fail_on not in FAIL_ON:
        raise InputError("--fail-on", f"unknown level {fail_on!r} (one of {', '.join(FAIL_ON)})")
    if example:
        examples = load_examples()
        if example == "list":
            for ex in examples.values():
                typer.echo(f"{ex.name:28} {ex.description}")
            return EXIT_OK
        if example not in examples:
            raise InputError("--example", f"no example {example!r} (try --example list)")
        ex = examples[example]
        options = dataclasses.replace(
            options, serve_string=options.serve_string or ex.serve,
            model_config=options.model_config or ex.model_config,
            report=options.report or ex.report, log=options.log or ex.log, probe_machine=False)

    from vllm_doctor.facts.crashlog import read_log
    from vllm_doctor.engine.evaluate import evaluate_rules
    from vllm_doctor.engine.ignore import apply_ignores, load_ignore_file
    from vllm_doctor.engine.loader import load_rules, select_rules
    from vllm_doctor.facts.collect import collect_facts
    from vllm_doctor.report.document import CheckDocument

    with step("ignore file"):
        entries = load_ignore_file(ignore_file) if ignore_file else []
    with step("rules"):
        rules = select_rules(load_rules(rules_dirs), select, ignore)
    with step("facts"):
        facts = collect_facts(options)
    with step("crash log"):
        log_text = read_log(options.log) if options.log else None
    log_report = None
    with step("rule evaluation"):
        if log_text:
            # one scan of the log for the rules' signatures and the error catalogue (loaded
            # only here)
            from vllm_doctor.engine.logreport import analyse_log, scan_for_check

            scan = scan_for_check(log_text, rules)
            findings = evaluate_rules(rules, facts, scan)
            version = facts.value("vllm.version")
            log_report = analyse_log(log_text, rules, str(version) if version else None,
                                     "facts" if version else "", scan=scan)
        else:
            findings = evaluate_rules(rules, facts)
    doc = CheckDocument(facts, findings, fail_on, len(rules), 0.0)
    if log_report is not None:
        doc.log_messages = log_report.messages
    doc.notes.extend(apply_ignores(findings, entries))
    for crash in facts.crashes:
        doc.notes.append(f"could not finish: {crash.line()}: the rules that need its facts "
                         "are undecided because of this crash, and the run exits 3")
    if example:
        doc.notes.append(f"bundled example {example!r}: facts come from its files, not this machine")
    with step("suggested commands"):
        _suggestions(doc, facts)
    if probe and (options.report or not options.probe_machine):
        doc.notes.append("--probe: not run — the facts come from a report, and probes confirm a "
                         "failure on the machine they run on; run `vllm-doctor probe` there")
    elif probe:
        # the serve line's TP when it was given, else every visible GPU (as `probe` does)
        tp_fact = facts.get("serve.tensor_parallel_size")
        given = tp_fact is not None and tp_fact.source != Source.DEFAULT
        tp = tp_fact.value if given else (facts.value("gpu.count") or 1)
        _attach_probes(doc, facts, findings, tp, "cuda" if facts.value("gpu.count") else "cpu", probe_timeout)
    doc.duration_s = time.perf_counter() - started

    if fmt == "text":
        from rich.console import Console

        from vllm_doctor.report.text import render_text

        if output:
            with output.open("w", encoding="utf-8") as handle:
                render_text(doc, Console(file=handle, width=100, no_color=True,
                                         color_system=None), verbose)
        else:
            render_text(doc, Console(), verbose)
    else:
        from vllm_doctor.report import formats

        render = {"json": formats.render_json, "markdown": formats.render_markdown,
                  "sarif": formats.render_sarif, "junit": formats.render_junit}[fmt]
        text = render(doc)
        if output:
            output.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    if facts.crashes:
        return crashed(facts.crashes)
    print(f"vllm-doctor: {doc.summary_line()}", file=sys.stderr)
    return EXIT_FINDINGS if doc.failing() else EXIT_OK


def crashed(crashes: list) -> int:
    """One line for the first crashed collector (all of them with --debug); exit code 3."""
    from vllm_doctor.errors import DEBUG_HINT, EXIT_INTERNAL, debug_enabled

    if debug_enabled():
        for crash in crashes:
            print(crash.traceback, file=sys.stderr, end="")
    more = f" (and {len(crashes) - 1} more)" if len(crashes) > 1 else ""
    hint = "" if debug_enabled() else f"; {DEBUG_HINT}"
    print(f"vllm-doctor: could not finish: {crashes[0].line()}{more}: the report is incomplete"
          f"{hint}", file=sys.stderr)
    return EXIT_INTERNAL


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check(
        serve_tokens: Optional[List[str]] = typer.Argument(
            None, metavar="[-- vllm serve MODEL ...]", help="The serve line, after `--`."),
        serve: Optional[str] = inputs.SERVE,
        serve_config: Optional[Path] = inputs.SERVE_CONFIG,
        model_config: Optional[Path] = inputs.MODEL_CONFIG,
        report: Optional[Path] = inputs.REPORT,
        log: Optional[Path] = inputs.LOG,
        vllm_version: Optional[str] = inputs.VLLM_VERSION,
        torch_version: Optional[str] = inputs.TORCH_VERSION,
        fmt: str = typer.Option("text", "--format", "-f", help="text, json, markdown, sarif or junit."),
        fail_on: str = typer.Option("error", "--fail-on", help="Exit 1 on findings at or above: error, warning, info, never."),
        select: Optional[List[str]] = typer.Option(None, "--select", help="Only rule codes with these prefixes."),
        ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Skip rule codes with these prefixes."),
        ignore_file: Optional[Path] = typer.Option(None, "--ignore-file", help="YAML of accepted findings (reason, expiry)."),
        verbose: bool = inputs.VERBOSE,
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to a file."),
        example: Optional[str] = typer.Option(None, "--example", help="Run on a bundled scenario (`--example list`)."),
        probe: bool = typer.Option(False, "--probe", help="Run the probes linked to the findings."),
        rules_dir: Optional[List[Path]] = typer.Option(None, "--rules-dir", help="Rule directory instead of the shipped one."),
    ) -> None:
        """Check this stack, model and serve line against the known failures."""
        options = inputs.collect_options(serve_tokens, serve, serve_config, model_config,
                                         report, log, vllm_version, torch_version)
        raise typer.Exit(run_check(
            options, fmt=fmt, fail_on=fail_on, select=inputs.split_commas(select),
            ignore=inputs.split_commas(ignore), ignore_file=ignore_file, verbose=verbose, output=output,
            example=example, probe=probe, rules_dirs=list(rules_dir) if rules_dir else None,
        ))
