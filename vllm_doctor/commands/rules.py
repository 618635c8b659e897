"""`vllm-doctor rules list|show|validate|test`: the rule base itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from vllm_doctor.commands.inputs import split_commas
from vllm_doctor.errors import EXIT_FINDINGS, InputError

rules_app = typer.Typer(help="List, show, validate and test the rule base.", no_args_is_help=True)

RulesDirOption = typer.Option(
    None, "--rules-dir", help="Rule directory instead of the shipped rule base (repeatable)."
)
SelectOption = typer.Option(None, "--select", help="Only rules whose code starts with these prefixes (comma-separated).")


def _load(rules_dir: Optional[List[Path]], select: Optional[List[str]] = None):
    from vllm_doctor.engine.loader import load_rules, select_rules

    rules = load_rules(list(rules_dir) if rules_dir else None)
    return select_rules(rules, split_commas(select), None) if select else rules


@rules_app.command("list")
def list_rules(
    fmt: str = typer.Option("text", "--format", help="text or json"),
    select: Optional[List[str]] = SelectOption,
    rules_dir: Optional[List[Path]] = RulesDirOption,
) -> None:
    """List the rules: code, severity, summary."""
    rules = _load(rules_dir, select)
    if fmt == "json":
        typer.echo(json.dumps([r.to_dict() for r in rules], indent=2))
        return
    if fmt != "text":
        raise InputError("--format", f"unknown format {fmt!r} (text or json)")
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("code", "severity", "status", "summary"):
        table.add_column(column)
    for r in rules:
        table.add_row(r.code, r.severity, r.status, r.summary)
    Console().print(table)


@rules_app.command("show")
def show_rule(code: str, rules_dir: Optional[List[Path]] = RulesDirOption) -> None:
    """Print a rule's document (same as `vllm-doctor explain CODE`)."""
    from vllm_doctor.commands.explain import print_rule

    print_rule(code, list(rules_dir) if rules_dir else None)


@rules_app.command("validate")
def validate(rules_dir: Optional[List[Path]] = RulesDirOption) -> None:
    """Check every rule file; print `file:field: problem` for each mistake (exit 2 if any)."""
    from vllm_doctor.engine.loader import default_rules_dir, validate_dir

    problems: list[str] = []
    count = 0
    for directory in rules_dir or [default_rules_dir()]:
        if not directory.is_dir():
            raise InputError(str(directory), "rule directory does not exist")
        rules, found = validate_dir(directory)
        count += len(rules)
        problems.extend(found)
    for line in problems:
        typer.echo(line, err=True)
    if problems:
        typer.echo(f"{len(problems)} problem(s) in the rule files", err=True)
        raise typer.Exit(2)
    typer.echo(f"{count} rules valid")


@rules_app.command("test")
def test_rules(
    select: Optional[List[str]] = SelectOption,
    rules_dir: Optional[List[Path]] = RulesDirOption,
    verbose: bool = typer.Option(False, "-v", "--verbose", help="List every case."),
) -> None:
    """Run every rule's cases; fail on any failing case or a rule without both kinds of case."""
    from vllm_doctor.engine.cases import run_cases

    rules = _load(rules_dir, select)
    passed = failed = 0
    coverage: list[str] = []
    for rule in rules:
        results, missing = run_cases(rule)
        coverage.extend(missing)
        for res in results:
            if res.ok:
                passed += 1
                if verbose:
                    typer.echo(f"ok    {res.code} {res.name}")
            else:
                failed += 1
                typer.echo(f"FAIL  {res.code} {res.name}: {res.message}")
    for line in coverage:
        typer.echo(f"COVER {line}")
    typer.echo(f"rules: {len(rules)}, cases: {passed} passed, {failed} failed"
               + (f", {len(coverage)} coverage problem(s)" if coverage else ""))
    if failed or coverage:
        raise typer.Exit(EXIT_FINDINGS)


def register(app: typer.Typer) -> None:
    app.add_typer(rules_app, name="rules")
