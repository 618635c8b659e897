"""`vllm-doctor check`: facts → rules (with the crash log's matches) → findings, each
corrected command re-checked (and probe verdicts with --probe) → a report, with CI exit codes."""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vllm_doctor.commands import inputs
from vllm_doctor.errors import EXIT_FINDINGS, EXIT_OK, InputError, say, step
from vllm_doctor.facts.model import Source
from vllm_doctor.report import FAIL_ON, FORMATS

if TYPE_CHECKING:
    from vllm_doctor.config import Config
    from vllm_doctor.facts.collect import CollectOptions


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
        model_config, report, log = (
            base / data[key] if data.get(key) else None for key in ("model_config", "report", "log")
        )
        examples[base.name] = Example(
            base.name, data.get("description", ""), data.get("serve"), model_config, report, log
        )
    return examples


def new_run() -> None:
    """A check starts: the Hub's budget of requests and seconds (facts/hub.py) and the secret
    values remembered for redaction (redact.py) are this run's, also for a caller that judges
    many lines in one process."""
    from vllm_doctor.redact import forget_secrets

    forget_secrets()
    hub = sys.modules.get("vllm_doctor.facts.hub")
    if hub is not None:
        hub.reset_budget()


def judge(options: CollectOptions, rules):
    """One serve line judged in-process by ``rules`` (no ignores, no probes): the document."""
    new_run()
    return _judge(
        options,
        rules=rules,
        loaded=rules,
        entries=[],
        fail_on="error",
        strict=False,
        warnings=[],
        example=None,
        probe=False,
        probe_timeout=0.0,
        settings=None,
    )


def _attach_probes(doc, facts, findings, tp: int | None, device: str, timeout: float) -> None:
    """Run the probes linked to applicable/undecided findings and fold their results in, each
    with its joined verdicts (probes.verdict): the mechanism here joined with the fix state of
    the vLLM these facts describe, the same words `probe` prints."""
    from vllm_doctor.commands.probe import model_dims, require_torch
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.probes import run_probes
    from vllm_doctor.probes.verdict import join_results

    wanted = sorted({f.rule.probe for f in findings if f.rule.probe and f.verdict != "not-applies"})
    if not wanted:
        doc.notes.append("--probe: no finding has a confirming probe")
        return
    require_torch(Facts(), device)
    results = run_probes(
        wanted, tp=tp or 1, device=device, timeout=timeout, model=model_dims(facts)
    )
    join_results(results, facts, device, rules={f.rule.code: f.rule for f in findings})
    if device == "cpu":
        from vllm_doctor.probes.render import cpu_variant

        gpu_only = cpu_variant(results)["not_run"]
        doc.notes.append(
            "--probe: no GPU is visible: the probes ran their CPU (gloo) variant with "
            "small shapes"
            + (f"; {', '.join(gpu_only)} need a CUDA GPU and did not run" if gpu_only else "")
            + "; `vllm-doctor probe` says which GPU parts each replaces"
        )
    doc.probes = [r.to_dict() for r in results]
    for finding in findings:
        for result in doc.probes:
            if any(v["rule"] == finding.rule.code for v in result.get("verdicts", [])):
                finding.probe_results.append(result)


def _unknown_prefixes(prefixes: list[str] | None, codes: list[str]) -> list[str]:
    return [p for p in prefixes or () if not any(c.startswith(p.strip().upper()) for c in codes)]


def rulebase_version(rules) -> str:
    """``<package version>+<digest>``: a CRC-32 of the rule files in force (an identifier, not
    a security check; zlib is already loaded where hashlib's OpenSSL would cost an import), so
    two reports judged by the same rules name the same version and an edited rule changes it."""
    import os
    import zlib

    from vllm_doctor import __version__

    ordered = sorted(rules, key=lambda r: r.code)
    # a process that judges many inputs (a corpus, a fleet) reads the files again only when
    # one of them changed: the answer is kept by each file's identity, size and times
    state: list[tuple[Any, ...]] = []
    for rule in ordered:
        try:
            st = os.stat(rule.path)
            state.append((rule.code, str(rule.path), st.st_ino, st.st_size, st.st_mtime_ns,
                          st.st_ctime_ns))  # fmt: skip
        except OSError:
            state.append((rule.code, str(rule.path), rule.summary))
    key = tuple(state)
    if key in _RULEBASE_VERSIONS:
        return _RULEBASE_VERSIONS[key]
    digest = 0
    for rule in ordered:
        digest = zlib.crc32(rule.code.encode(), digest)
        try:
            digest = zlib.crc32(rule.path.read_bytes(), digest)
        except OSError:
            digest = zlib.crc32(rule.summary.encode(), digest)
    if len(_RULEBASE_VERSIONS) >= 8:
        _RULEBASE_VERSIONS.clear()
    version = _RULEBASE_VERSIONS[key] = f"{__version__}+{digest:08x}"
    return version


_RULEBASE_VERSIONS: dict[tuple[Any, ...], str] = {}


def _coverage_note(facts) -> str | None:
    """A note when the vLLM judged is newer than the newest release the knowledge covers."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.knowledge import newest_release

    version = facts.value("vllm.version")
    if not version:
        return None
    newest = newest_release()
    try:
        if Version(str(version)).release[:3] <= Version(newest).release[:3]:
            return None
    except InvalidVersion:
        return None
    fact = facts.get("vllm.version")
    via = " (--vllm-version)" if fact is not None and fact.source == Source.USER else ""
    return (
        f"vLLM {version}{via} is newer than {newest}, the newest release this rule base "
        f"knows: failures that came in after {newest} are not in it, and fixes are judged "
        f"as of {newest}"
    )


def run_check(
    options: CollectOptions,
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
    strict: bool = False,
    quiet: bool = False,
    default_rules: bool = True,
    ignore_entries: list | None = None,
    settings: Config | None = None,
    recommend: bool = False,
) -> int:
    started = time.perf_counter()
    new_run()  # one budget for the Hub across every target of a manifest
    if fmt not in FORMATS:
        raise InputError("--format", f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if fail_on not in FAIL_ON:
        raise InputError("--fail-on", f"unknown level {fail_on!r} (one of {', '.join(FAIL_ON)})")
    if not default_rules and not rules_dirs:
        raise InputError("--no-default-rules", "needs --rules-dir: no rules would be left to check")
    if output is not None:
        from vllm_doctor.report.output import check_output_path

        check_output_path(output)
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
            options,
            serve_string=options.serve_string or ex.serve,
            model_config=options.model_config or ex.model_config,
            report=options.report or ex.report,
            log=options.log or ex.log,
            probe_machine=False,
        )

    from vllm_doctor.engine.ignore import load_ignore_file, unknown_entries
    from vllm_doctor.engine.loader import (
        default_rules_dir,
        load_rules,
        one_machine,
        select_rules,
    )

    entries = (load_ignore_file(ignore_file) if ignore_file else []) + list(ignore_entries or [])
    dirs = ([default_rules_dir()] if default_rules else []) + list(rules_dirs or [])
    with step("rules"):
        loaded = one_machine(load_rules(dirs))  # the FLEET rules are `vllm-doctor fleet`'s
    codes = [r.code for r in loaded]
    # an unknown --select/--ignore prefix is a typo that would silently check less (ruff: an error)
    for option, prefixes in (("--select", select), ("--ignore", ignore)):
        unknown = _unknown_prefixes(prefixes, codes)
        if unknown:
            raise InputError(
                option,
                f"no rule code starts with {', '.join(unknown)} "
                "(`vllm-doctor rules list` shows the codes)",
            )
    rules = select_rules(loaded, select, ignore)
    warnings: list[str] = []
    strict_failures: list[str] = []
    if not rules:
        (strict_failures if strict else warnings).append(
            "no rule selected: --select/--ignore leave nothing to check"
        )
    for entry in unknown_entries(entries, codes):
        (strict_failures if strict else warnings).append(
            f"{entry.where}: ignore entry {entry.code} matches no rule code (a typo, or a rule "
            "that was renamed or removed)"
        )
    if strict_failures:
        raise InputError("--strict", "; ".join(strict_failures))
    targets = manifest_targets(options)
    judge: dict[str, Any] = dict(
        rules=rules,
        loaded=loaded,
        entries=entries,
        fail_on=fail_on,
        strict=strict,
        warnings=warnings,
        example=example,
        probe=probe,
        probe_timeout=probe_timeout,
        settings=settings,
        recommend=recommend,
    )
    if targets:
        docs = [
            _judge(
                dataclasses.replace(
                    options,
                    serve_config=None,
                    manifest=None,
                    manifest_target=target,
                    probe_machine=False,
                ),
                **judge,
            )
            for target in targets
        ]
    else:
        docs = [_judge(options, **judge)]
    for doc in docs:
        doc.duration_s = time.perf_counter() - started

    from vllm_doctor.report.output import write_report

    if targets:
        from vllm_doctor.report.formats import render_targets

        text = render_targets(
            docs,
            fmt,
            lambda d: render_document(
                d, fmt, verbose=verbose, quiet=quiet, to_file=output is not None
            ),
        )
    else:
        text = render_document(
            docs[0], fmt, verbose=verbose, quiet=quiet, to_file=output is not None
        )
    write_report(text, output)
    if settings is not None:
        say(f"{settings.describe()}")
    for warning in dict.fromkeys(warnings):
        say(f"warning: {warning}")
    crashes = [crash for doc in docs for crash in doc.facts.crashes]
    if crashes:
        return crashed(crashes)
    for doc in docs:
        where = f"{doc.target.where} {doc.target.name}: " if doc.target is not None else ""
        say(f"{where}{doc.summary_line()}")
    return EXIT_FINDINGS if any(doc.failing() for doc in docs) else EXIT_OK


def manifest_targets(options: CollectOptions) -> list:
    """The containers that run vLLM in --manifest, or in a --serve-config that is a manifest;
    [] for a serve line. A YAML that is neither a serve config nor a manifest is bad input."""
    if not options.manifest and not options.serve_config:
        return []  # a serve line: the manifest reader is not even imported
    from vllm_doctor.serveline import manifest

    if options.manifest:
        from vllm_doctor.serveline.directory import read_input

        skipped: list[str] = []  # the files of a directory that were not read, with why
        targets = read_input(str(options.manifest), notes=skipped)
        for note in skipped:
            say(note)
    elif options.serve_config and manifest.serve_config_is_manifest(Path(options.serve_config)):
        targets = manifest.read_targets(str(options.serve_config))
    else:
        return []
    # a serve line given with the manifest completes what the file leaves to run time
    given, origin = (
        (list(options.serve_tokens), "the serve line given after --")
        if options.serve_tokens
        else (serve_words(options.serve_string), "--serve")
        if options.serve_string
        else (None, "")
    )
    if given is not None:
        for target in targets:
            target.join(given, origin)
        options.serve_tokens, options.serve_string = None, None
    return targets


def serve_words(text: str) -> list[str]:
    from vllm_doctor.serveline.words import command_words

    if not text.strip():
        raise InputError("--serve", "the serve line is empty")
    return command_words(text)


def _judge(
    options: CollectOptions,
    rules,
    loaded,
    entries,
    fail_on: str,
    strict: bool,
    warnings: list[str],
    example: str | None,
    probe: bool,
    probe_timeout: float,
    settings: Config | None,
    recommend: bool = False,
):
    """Facts → findings → the document for one serve line (one manifest target)."""
    from vllm_doctor.engine.evaluate import evaluate_rules
    from vllm_doctor.engine.ignore import apply_ignores
    from vllm_doctor.facts.collect import collect_facts
    from vllm_doctor.facts.crashlog import read_log
    from vllm_doctor.knowledge import newest_release
    from vllm_doctor.report.document import CheckDocument, RuleBase

    with step("facts"):
        facts = collect_facts(options)
    with step("crash log"):
        log_text = read_log(options.log) if options.log else None
    log_report = None
    with step("rule evaluation"):
        if log_text:
            # one scan of the log for the rules' signatures and the error catalogue (loaded
            # only here)
            from vllm_doctor.engine.logreport import scan_for_check

            scan = scan_for_check(log_text, rules)
            findings = evaluate_rules(rules, facts, scan)
        else:
            scan = None
            findings = evaluate_rules(rules, facts)
    with step("releases"):
        from vllm_doctor.engine.evaluate import defer
        from vllm_doctor.engine.over_releases import judge_over_releases

        findings = defer(judge_over_releases(findings, facts, scan))
    if log_text:
        # the log's report from these findings: explain --log names the same rules through
        # the same engine (engine/logreport.py)
        from vllm_doctor.engine.logreport import analyse_log

        version = facts.value("vllm.version")
        log_report = analyse_log(
            log_text,
            rules,
            str(version) if version else None,
            "facts" if version else "",
            scan=scan,
            findings=findings,
            facts=facts,
        )
    doc = CheckDocument(facts, findings, fail_on, len(rules), 0.0, strict=strict)
    if log_report is not None:
        doc.log_messages = log_report.messages
        doc.log_package_messages = log_report.package_messages
    doc.rulebase = RuleBase(rulebase_version(loaded), len(loaded), newest_release())
    doc.inputs = {
        key: str(value)
        for key, value in (
            ("serve_config", options.serve_config),
            ("model_config", options.model_config),
            ("report", options.report),
            ("log", options.log),
            ("manifest", options.manifest_target.file if options.manifest_target else None),
        )
        if value
    }
    doc.target = options.manifest_target
    from vllm_doctor.report.supply import tailor_findings

    tailor_findings(doc)  # advice on what to supply leaves out what this run was given
    coverage = _coverage_note(facts)
    if coverage and coverage not in warnings:
        warnings.append(coverage)  # on stderr too: a gate judged beyond its knowledge says so
    if settings is not None:
        described = settings.describe()  # None without a settings file
        if described:
            doc.notes.append(described)
        doc.settings = settings
    doc.notes.extend(warnings)
    doc.notes.extend(apply_ignores(findings, entries))
    for crash in facts.crashes:
        doc.notes.append(
            f"could not finish: {crash.line()}: the rules that need its facts "
            "are undecided because of this crash, and the run exits 3"
        )
    if example:
        doc.notes.append(
            f"bundled example {example!r}: facts come from its files, not this machine"
        )
    with step("suggested commands"):
        from vllm_doctor.commands.suggest import suggest

        suggest(doc, facts, rules)
    if recommend:
        with step("recommended release"):
            from vllm_doctor.commands import recommend as recommending

            errors = [f for f in doc.applies if f.severity == "error"]
            doc.recommendation = recommending.recommend(facts, rules, errors)
    if probe and options.manifest_target is not None:
        doc.notes.append(
            "--probe: not run for a manifest — probes confirm a failure on the "
            "machine they run on; run `vllm-doctor probe` on the node"
        )
    elif probe and (options.report or not options.probe_machine):
        doc.notes.append(
            "--probe: not run — the facts come from a report, and probes confirm a "
            "failure on the machine they run on; run `vllm-doctor probe` there"
        )
    elif probe:
        # the serve line's TP when it was given, else every visible GPU (as `probe` does)
        tp_fact = facts.get("serve.tensor_parallel_size")
        given = tp_fact is not None and tp_fact.source != Source.DEFAULT
        tp = tp_fact.value if tp_fact is not None and given else (facts.value("gpu.count") or 1)
        _attach_probes(
            doc, facts, findings, tp, "cuda" if facts.value("gpu.count") else "cpu", probe_timeout
        )
    return doc


def crashed(crashes: list) -> int:
    """One line for the first crashed collector (all of them with --debug); exit code 3."""
    from vllm_doctor.errors import DEBUG_HINT, EXIT_INTERNAL, debug_enabled

    if debug_enabled():
        for crash in crashes:
            print(crash.traceback, file=sys.stderr, end="")
    more = f" (and {len(crashes) - 1} more)" if len(crashes) > 1 else ""
    hint = "" if debug_enabled() else f"; {DEBUG_HINT}"
    say(f"could not finish: {crashes[0].line()}{more}: the report is incomplete{hint}")
    return EXIT_INTERNAL


def render_document(
    doc, fmt: str, verbose: bool = False, quiet: bool = False, to_file: bool = False
) -> str:
    """The report as text. The text format is soft-wrapped (one line per line, whatever its
    length) unless it goes to a terminal, where it fits the terminal's width."""
    if fmt == "text":
        import io

        from vllm_doctor.report.output import make_console, stdout_is_terminal
        from vllm_doctor.report.text import render_text

        buffer = io.StringIO()
        render_text(doc, make_console(buffer, not to_file and stdout_is_terminal()), verbose, quiet)
        return buffer.getvalue()
    from vllm_doctor.report import formats

    return formats.RENDERERS[fmt](doc)


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check(
        serve_tokens: list[str] | None = typer.Argument(
            None, metavar="[-- vllm serve MODEL ...]", help="The serve line, after `--`."
        ),
        serve: str | None = inputs.SERVE,
        serve_config: Path | None = inputs.SERVE_CONFIG,
        manifest: str | None = inputs.MANIFEST,
        model_config: Path | None = inputs.MODEL_CONFIG,
        report: Path | None = inputs.REPORT,
        log: Path | None = inputs.LOG,
        vllm_version: str | None = inputs.VLLM_VERSION,
        torch_version: str | None = inputs.TORCH_VERSION,
        package: list[str] | None = inputs.PACKAGE,
        gpu: str | None = inputs.GPU,
        gpus: int | None = inputs.GPUS,
        offline: bool = inputs.OFFLINE,
        elsewhere: bool = inputs.ELSEWHERE,
        driver: str | None = inputs.DRIVER,
        cuda: str | None = inputs.CUDA,
        platform: list[str] | None = inputs.PLATFORM,
        fmt: str | None = typer.Option(
            None,
            "--format",
            "-f",
            help=f"{', '.join(FORMATS)} (default text).",
            autocompletion=lambda: list(FORMATS),
            rich_help_panel=inputs.OUTPUT,
        ),
        fail_on: str | None = typer.Option(
            None,
            "--fail-on",
            help="Exit 1 on findings at or above: error (default), warning, info, never.",
            autocompletion=lambda: list(FAIL_ON),
            rich_help_panel=inputs.GATE,
        ),
        strict: bool | None = typer.Option(
            None,
            "--strict/--no-strict",
            help="Fail on undecided rules at or above --fail-on, on zero rules selected and on "
            "ignore entries that match no rule.",
            rich_help_panel=inputs.GATE,
        ),
        select: list[str] | None = typer.Option(
            None,
            "--select",
            help="Only rule codes with these prefixes.",
            autocompletion=inputs.complete_rule_codes,
            rich_help_panel=inputs.GATE,
        ),
        ignore: list[str] | None = typer.Option(
            None,
            "--ignore",
            help="Skip rule codes with these prefixes.",
            autocompletion=inputs.complete_rule_codes,
            rich_help_panel=inputs.GATE,
        ),
        ignore_file: Path | None = typer.Option(
            None,
            "--ignore-file",
            help="YAML of accepted findings (reason, expiry).",
            rich_help_panel=inputs.GATE,
        ),
        verbose: bool = inputs.VERBOSE,
        quiet: bool = typer.Option(
            False,
            "--quiet",
            "-q",
            help="The first line (what was read, the next step) and the findings; the summary "
            "on stderr.",
            rich_help_panel=inputs.OUTPUT,
        ),
        output: Path | None = typer.Option(
            None,
            "--output",
            "-o",
            help="Write the report to a file.",
            rich_help_panel=inputs.OUTPUT,
        ),
        example: str | None = typer.Option(
            None,
            "--example",
            help="Run on a bundled scenario (`--example list`).",
            autocompletion=inputs.complete_examples,
            rich_help_panel=inputs.INPUTS,
        ),
        probe: bool = typer.Option(
            False,
            "--probe",
            help="Run the probes linked to the findings.",
            rich_help_panel=inputs.OUTPUT,
        ),
        rules_dir: list[Path] | None = typer.Option(
            None,
            "--rules-dir",
            help="A rule directory to add to the shipped rules (repeatable).",
            rich_help_panel=inputs.GATE,
        ),
        no_default_rules: bool = typer.Option(
            False,
            "--no-default-rules",
            help="Check only the --rules-dir rules, not the shipped ones.",
            rich_help_panel=inputs.GATE,
        ),
        config: Path | None = typer.Option(
            None,
            "--config",
            help="Settings file (default: the nearest .vllm-doctor.toml or "
            "pyproject.toml (its tool.vllm-doctor table) from the working directory up; "
            "`vllm-doctor init` writes one).",
            rich_help_panel=inputs.GATE,
        ),
        no_config: bool = typer.Option(
            False, "--no-config", help="Ignore any settings file.", rich_help_panel=inputs.GATE
        ),
        recommend: bool = typer.Option(
            False,
            "--recommend",
            help="Name the release to install: the newest covered release that runs on this "
            "driver and GPU (and a torch kept with --torch-version), and the oldest at or "
            "above the judged one that draws no error with this serve line, with the reasons "
            "for the releases it passes over.",
            rich_help_panel=inputs.OUTPUT,
        ),
        locked: bool = typer.Option(
            False,
            "--locked",
            help="A settings file may not choose rules or the threshold "
            "(select, ignore, default-rules, ignore-file/-entries, fail-on); "
            "also VLLM_DOCTOR_LOCKED=1.",
            rich_help_panel=inputs.GATE,
        ),
    ) -> None:
        """Check this stack, model and serve line against the known failures."""
        from vllm_doctor.config import resolve_config
        from vllm_doctor.config_env import environment_settings, with_environment
        from vllm_doctor.engine.ignore import parse_entries

        if verbose and quiet:
            raise InputError("-q/--quiet", "cannot be combined with -v/--verbose")
        # the command line over the environment (VLLM_DOCTOR_*) over the settings file
        from_file = resolve_config(config, use_config=not no_config, locked=locked)
        settings = with_environment(from_file)
        # what the file decides is what the command line and the environment left to it
        overridden = set(environment_settings()) | {
            field
            for field, given in (
                ("select", select),
                ("ignore", ignore),
                ("fail_on", fail_on),
                ("ignore_file", ignore_file),
                ("default_rules", no_default_rules),
            )
            if given
        }
        cleared: dict[str, Any] = dict.fromkeys(overridden)
        from_file = dataclasses.replace(from_file, **cleared)
        entries = (
            parse_entries(settings.ignore_entries, str(settings.path), "ignore-entries")
            if settings.ignore_entries
            else []
        )
        options = inputs.collect_options(
            serve_tokens,
            serve,
            serve_config,
            model_config,
            report,
            log,
            vllm_version,
            torch_version,
            gpu,
            gpus,
            driver,
            cuda,
            offline,
            package,
            platform,
        )
        options.manifest = manifest
        # another's setup: this machine's facts would stand in for facts the report lacks
        options.probe_machine = not elsewhere
        options.elsewhere = elsewhere
        default_rules = not no_default_rules and settings.default_rules is not False
        raise typer.Exit(
            run_check(
                options,
                fmt=fmt if fmt is not None else settings.format or "text",  # -f '' is refused
                fail_on=fail_on or settings.fail_on or "error",
                select=inputs.split_commas(select) or settings.select,
                ignore=inputs.split_commas(ignore) or settings.ignore,
                ignore_file=ignore_file or settings.ignore_file,
                verbose=verbose,
                output=output,
                example=example,
                probe=probe,
                rules_dirs=list(rules_dir) if rules_dir else settings.rules_dirs,
                strict=strict if strict is not None else bool(settings.strict),
                quiet=quiet,
                default_rules=default_rules,
                ignore_entries=entries,
                settings=from_file if from_file.path else None,
                recommend=recommend,
            )
        )
