"""`vllm-doctor rules list|show|validate|test`: the rule base itself."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vllm_doctor.commands.inputs import complete_rule_codes, split_commas
from vllm_doctor.errors import EXIT_FINDINGS, InputError, printable
from vllm_doctor.report.output import echo

if TYPE_CHECKING:
    from vllm_doctor.facts.model import Facts

rules_app = typer.Typer(help="List, show, validate and test the rule base.", no_args_is_help=True)

RulesDirOption = typer.Option(
    None, "--rules-dir", help="A rule directory to add to the shipped rules (repeatable)."
)
NoDefaultOption = typer.Option(
    False, "--no-default-rules", help="Only the --rules-dir rules, not the shipped ones."
)
SelectOption = typer.Option(
    None,
    "--select",
    help="Only rules whose code starts with these prefixes (comma-separated).",
    autocompletion=complete_rule_codes,
)


def rule_dirs(rules_dir: list[Path] | None, no_default_rules: bool) -> list[Path]:
    """The directories in force: the shipped rules plus each --rules-dir, or only the
    --rules-dir ones with --no-default-rules (as `check` reads them)."""
    from vllm_doctor.engine.loader import default_rules_dir

    if no_default_rules and not rules_dir:
        raise InputError("--no-default-rules", "needs --rules-dir: no rules would be left")
    return ([] if no_default_rules else [default_rules_dir()]) + list(rules_dir or [])


def _load(
    rules_dir: list[Path] | None, select: list[str] | None = None, no_default_rules: bool = False
):
    from vllm_doctor.engine.loader import load_rules, select_rules

    rules = load_rules(rule_dirs(rules_dir, no_default_rules))
    return select_rules(rules, split_commas(select), None) if select else rules


@rules_app.command("list")
def list_rules(
    fmt: str = typer.Option("text", "--format", help="text or json"),
    select: list[str] | None = SelectOption,
    rules_dir: list[Path] | None = RulesDirOption,
    no_default_rules: bool = NoDefaultOption,
) -> None:
    """List the rules: code, severity, summary."""
    from vllm_doctor.report.output import dump_json, print_rich, stdout_is_terminal, write_stdout

    rules = _load(rules_dir, select, no_default_rules)
    if fmt == "json":
        write_stdout(dump_json([r.to_dict() for r in rules]))
        return
    if fmt != "text":
        raise InputError("--format", f"unknown format {fmt!r} (text or json)")
    if not stdout_is_terminal():
        # one rule per line, never wrapped: `rules list | grep WORD` finds every word
        rows = [("code", "severity", "status", "summary")] + [
            (r.code, r.severity, r.status, r.summary) for r in rules
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        write_stdout(
            "".join(
                f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}\n"
                for row in rows
            )
        )
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("code", "severity", "status", "summary"):
        table.add_column(column)
    for r in rules:
        table.add_row(r.code, r.severity, r.status, r.summary)
    print_rich(lambda console: console.print(table))


@rules_app.command("show")
def show_rule(
    code: str = typer.Argument(..., help="A rule code.", autocompletion=complete_rule_codes),
    rules_dir: list[Path] | None = RulesDirOption,
    no_default_rules: bool = NoDefaultOption,
) -> None:
    """Print a rule's document (same as `vllm-doctor explain CODE`)."""
    from vllm_doctor.commands.explain import print_rule

    print_rule(code, rule_dirs(rules_dir, no_default_rules))


@rules_app.command("validate")
def validate(
    rules_dir: list[Path] | None = typer.Option(
        None,
        "--rules-dir",
        help="A rule directory to validate (repeatable; default: the shipped rules).",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Count the audit's warnings (a "
        "range that disagrees with the error catalogue) as problems.",
    ),
) -> None:
    """Check every rule file; print `file:field: problem` for each mistake (exit 2 if any).

    Validates the directories named with --rules-dir, else the shipped rule base, each rule
    exactly as a shipped one (related:/defers_to: may name a shipped rule). Also checked
    against the collectors (engine/coverage.py): a fact no collector of an input kind sets,
    and a rule that a healthy input leaves undecided (--strict could never pass there). A
    rule whose signature names a message of the error catalogue, with affected ranges that
    disagree with the releases that have the message, is a warning (a problem with
    --strict)."""
    from vllm_doctor.engine.cases import case_file_problems
    from vllm_doctor.engine.catalogue_audit import range_warnings
    from vllm_doctor.engine.coverage import strict_blockers, uncollected_paths
    from vllm_doctor.engine.loader import default_rules_dir, shipped_codes, validate_dir

    problems: list[str] = []
    warnings: list[str] = []
    count = 0
    shipped = default_rules_dir().resolve()
    healthy = healthy_inputs()
    for directory in rules_dir or [default_rules_dir()]:
        if not directory.is_dir():
            raise InputError(str(directory), "rule directory does not exist")
        other = frozenset() if directory.resolve() == shipped else shipped_codes()
        rules, found = validate_dir(directory, other_codes=other)
        count += len(rules)
        problems.extend(found)
        problems.extend(line for rule in rules for line in case_file_problems(rule))
        problems.extend(line for rule in rules for line in uncollected_paths(rule))
        problems.extend(strict_blockers(rules, healthy))
        warnings.extend(range_warnings(rules))
    if strict:
        problems.extend(warnings)
    else:
        for line in warnings:
            typer.echo(printable(f"warning: {line}"), err=True)
    for line in problems:
        typer.echo(printable(line), err=True)
    if problems:
        typer.echo(f"{len(problems)} problem(s) in the rule files", err=True)
        raise typer.Exit(2)
    echo(f"{count} rules valid")


def healthy_inputs() -> dict[str, Facts]:
    """The healthy inputs a rule must be decided on (engine/coverage.py): the bundled
    healthy-h100-llama scenario read from its collect-env report, and the same machine as the
    live collectors would see it (engine/coverage.py ``as_live_host``)."""
    from vllm_doctor.commands.check import load_examples
    from vllm_doctor.engine.coverage import as_live_host
    from vllm_doctor.facts.collect import CollectOptions, collect_facts

    example = load_examples()["healthy-h100-llama"]
    report = collect_facts(
        CollectOptions(
            serve_string=example.serve,
            model_config=example.model_config,
            report=example.report,
            probe_machine=False,
            offline=True,
        )
    )
    return {"collect-env report": report, "live host": as_live_host(report)}


@rules_app.command("test")
def test_rules(
    codes: list[str] | None = typer.Argument(
        None,
        help="Only these rules (codes, as `rules show CODE`); default: every rule.",
        autocompletion=complete_rule_codes,
    ),
    select: list[str] | None = SelectOption,
    rules_dir: list[Path] | None = RulesDirOption,
    no_default_rules: bool = NoDefaultOption,
    verbose: bool = typer.Option(False, "-v", "--verbose", help="List every case."),
) -> None:
    """Run every rule's cases (or those of the rules named), then judge each rule on the
    healthy inputs (`rules validate` does the same); fail on a failing case, a rule without
    both kinds of case or without a case on real input (or a `no_real_input:` reason), a fact
    no collector sets, or a rule a healthy input leaves undecided (--strict could never pass
    there)."""
    from vllm_doctor.engine.cases import run_cases
    from vllm_doctor.engine.coverage import strict_blockers, uncollected_paths

    rules = _load(rules_dir, select, no_default_rules)
    if codes:
        wanted = {code.strip().upper() for code in split_commas(codes) or []}
        unknown = sorted(wanted - {rule.code for rule in rules})
        if unknown:
            raise InputError(
                "rules test",
                f"no rule {', '.join(unknown)} (`vllm-doctor rules list` lists the codes)",
            )
        rules = [rule for rule in rules if rule.code in wanted]
    passed = failed = 0
    coverage: list[str] = []
    for rule in rules:
        results, missing = run_cases(rule)
        coverage.extend(missing)
        for res in results:
            if res.ok:
                passed += 1
                if verbose:
                    echo(f"ok    {res.code} {res.name}")
            else:
                failed += 1
                echo(f"FAIL  {res.code} {res.name}: {res.message}")
    for line in coverage:
        echo(f"COVER {line}")
    # what only a live host or the README's `check --report ... --strict` showed before
    healthy = [line for rule in rules for line in uncollected_paths(rule)]
    healthy += strict_blockers(rules, healthy_inputs())
    for line in healthy:
        echo(f"HEALTHY {line}")
    echo(
        f"rules: {len(rules)}, cases: {passed} passed, {failed} failed"
        + (f", {len(coverage)} coverage problem(s)" if coverage else "")
        + (f", {len(healthy)} problem(s) on healthy inputs" if healthy else "")
    )
    if failed or coverage or healthy:
        raise typer.Exit(EXIT_FINDINGS)


def register(app: typer.Typer) -> None:
    app.add_typer(rules_app, name="rules")
