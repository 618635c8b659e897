"""`vllm-doctor init`: a starter settings file, every key commented with what it does.

The keys are those config.py reads (``_KEYS``), each written commented out with an example
value, so the file changes nothing until a line is uncommented; the file it writes loads
without a problem (tests/test_init.py). ``--pyproject`` prints the same as a
``[tool.vllm-doctor]`` table to add to pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

import typer

from vllm_doctor.errors import InputError

# per key of config.py: what it does, and an example value as TOML writes it
KEY_HELP: dict[str, tuple[str, str]] = {
    "select": (
        "only the rules whose code starts with one of these (ruff-style prefixes)",
        '["MODEL", "PAR", "MEM"]',
    ),
    "ignore": ("skip the rules whose code starts with one of these", '["HW001"]'),
    "fail-on": (
        "exit 1 on findings at or above: error (the default), warning, info, never",
        '"warning"',
    ),
    "strict": (
        "also fail on rules that cannot be decided (at or above fail-on), on zero rules "
        "selected and on ignore entries that match no rule",
        "true",
    ),
    "format": (
        "the report's format: text, json, markdown, sarif, junit, github, gitlab",
        '"sarif"',
    ),
    "rules-dir": (
        "rule directories added to the shipped rules (relative to this file)",
        '["ci/doctor-rules"]',
    ),
    "default-rules": (
        "false: only the rules-dir rules, not the shipped ones (as --no-default-rules)",
        "true",
    ),
    "ignore-file": (
        "a YAML file of accepted findings, each with a reason and an optional expiry",
        '"ci/doctor-ignore.yaml"',
    ),
    "ignore-entries": (
        "accepted findings written here instead (an expired entry stops suppressing)",
        '[{code = "HW001", reason = "PCIe box; the launcher disables custom all-reduce", '
        "expires = 2027-01-31}]",
    ),
}
FILE_NAME = ".vllm-doctor.toml"


def template(pyproject: bool = False) -> str:
    """The settings file: a header, then each key commented out with what it does."""
    from vllm_doctor.config import _KEYS, GATE_KEYS, TABLE

    missing = set(_KEYS) - set(KEY_HELP)
    if missing:  # a key config.py reads and this file does not explain: a bug here
        raise RuntimeError(f"init has no words for {sorted(missing)}")
    lines = [
        "# vllm-doctor settings (`vllm-doctor init` wrote this file; docs: the README's",
        "# Settings paragraph). `vllm-doctor check` finds it from the working directory up;",
        "# the command line wins over every key, VLLM_DOCTOR_<KEY> (dashes as underscores)",
        "# over the file. Every key is commented out: uncomment what you want.",
        f"# With `check --locked` (or VLLM_DOCTOR_LOCKED=1) the keys {', '.join(GATE_KEYS)}",
        "# are not applied: CI that checks a repository it does not trust locks the gate.",
    ]
    if pyproject:
        lines += ["", f"[tool.{TABLE}]"]
    for key in _KEYS:
        words, example = KEY_HELP[key]
        lines += ["", f"# {key}: {words}", f"# {key} = {example}"]
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init(
        path: Path = typer.Argument(
            Path(FILE_NAME), help=f"Where to write the settings file (default {FILE_NAME})."
        ),
        force: bool = typer.Option(False, "--force", help="Overwrite a file that exists."),
        pyproject: bool = typer.Option(
            False,
            "--pyproject",
            help="Print a [tool.vllm-doctor] table for pyproject.toml instead of writing a file.",
        ),
    ) -> None:
        """Write a starter settings file: every key, commented, changing nothing yet."""
        if pyproject:
            typer.echo(template(pyproject=True), nl=False)
            return
        if path.exists() and not force:
            raise InputError(str(path), "exists: pass --force to overwrite it")
        if path.exists() and not path.is_file():
            raise InputError(str(path), "is not a regular file")
        try:
            path.write_text(template(), encoding="utf-8")
        except OSError as err:
            raise InputError(str(path), f"cannot be written: {err.strerror or err}") from None
        typer.echo(f"wrote {path}: every key commented out; `vllm-doctor check` reads it")
