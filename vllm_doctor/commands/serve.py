"""`vllm-doctor serve [OPTIONS] -- <vllm serve arguments>`: the preflight where the deployment
really happens. It runs `check` on the very serve line it is about to start, with this
machine's (this container's) facts, prints the findings, and replaces itself with
`vllm serve <arguments>` (os.execvp: vLLM gets the process, its signals and its exit code) only
when the gate passes.

The gate is `check`'s exit code: 0 starts vLLM; 1 (findings at or above --fail-on), 2 (a serve
line or input the doctor cannot read) and 3 (the doctor could not finish) do not, and the
command exits with that code. --no-gate (or VLLM_DOCTOR_NO_GATE=1) prints the findings and
starts vLLM whatever they are, even when the check itself fails. The options are `check`'s,
with the same settings file and VLLM_DOCTOR_* environment underneath.

The arguments after `--` are those of `vllm serve` (`MODEL --tensor-parallel-size 2 ...`), as
the vLLM image takes them; a leading `vllm serve` is accepted too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from vllm_doctor.commands import inputs
from vllm_doctor.errors import EXIT_OK


def vllm_argv(tokens: list[str]) -> list[str]:
    """The command vLLM is started with: ``vllm serve`` and the arguments after ``--``."""
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    return ["vllm", "serve", *tokens]


def check_argv(params: typer.Context, argv: list[str]) -> list[str]:
    """`check`'s command line for the options given to `serve` (each forwarded as written,
    so `check` reads them, its settings file and its environment in its one way)."""
    words = ["check", "-q"] if not params.params.get("verbose") else ["check"]
    from typer.core import TyperOption

    for param in params.command.params:
        value = params.params.get(param.name or "")
        if (
            not isinstance(param, TyperOption)
            or param.name in ("no_gate", "verbose")
            or value is None
            or value == ()
        ):
            continue  # the serve line (an argument) follows the options
        if param.is_flag and param.secondary_opts:  # --strict/--no-strict: either was given
            words.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.is_flag:
            if value:
                words.append(param.opts[0])
        else:
            for item in value if param.multiple else [value]:
                words += [param.opts[0], str(item)]
    return [*words, "--", *argv]


def _gate(params: typer.Context, argv: list[str]) -> int:
    """Run `check` on the serve line in this process; its exit code. It is run through the
    root command of this very invocation (the one `vllm-doctor` app), so that `check` parses
    the forwarded options as on its own command line."""
    root = params.find_root().command
    code = root.main(args=check_argv(params, argv), standalone_mode=False)
    return code if isinstance(code, int) else EXIT_OK


def start_vllm(argv: list[str]) -> None:
    """Replace this process with vLLM (what a container's entrypoint does)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(argv[0], argv)
    except OSError as err:  # not installed here: say so as the shell would, exit 127
        print(f"vllm-doctor: cannot start {argv[0]}: {err.strerror or err}", file=sys.stderr)
        raise typer.Exit(127) from None


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        ctx: typer.Context,
        serve_tokens: list[str] | None = typer.Argument(
            None,
            metavar="-- MODEL [VLLM SERVE ARGS ...]",
            help="The arguments of `vllm serve`, after `--`.",
        ),
        model_config: Path | None = inputs.MODEL_CONFIG,
        vllm_version: str | None = inputs.VLLM_VERSION,
        torch_version: str | None = inputs.TORCH_VERSION,
        fail_on: str | None = typer.Option(
            None,
            "--fail-on",
            help="Do not start vLLM on findings at or above: error (default), "
            "warning, info, never.",
        ),
        strict: bool | None = typer.Option(
            None,
            "--strict/--no-strict",
            help="Also refuse on undecided rules at or above --fail-on.",
        ),
        select: list[str] | None = typer.Option(
            None,
            "--select",
            help="Only rule codes with these prefixes.",
            autocompletion=inputs.complete_rule_codes,
        ),
        ignore: list[str] | None = typer.Option(
            None,
            "--ignore",
            help="Skip rule codes with these prefixes.",
            autocompletion=inputs.complete_rule_codes,
        ),
        ignore_file: Path | None = typer.Option(
            None, "--ignore-file", help="YAML of accepted findings (reason, expiry)."
        ),
        config: Path | None = typer.Option(None, "--config", help="Settings file (as for check)."),
        no_config: bool = typer.Option(False, "--no-config", help="Ignore any settings file."),
        locked: bool = typer.Option(
            False, "--locked", help="As for check (also VLLM_DOCTOR_LOCKED=1)."
        ),
        verbose: bool = inputs.VERBOSE,
        no_gate: bool = typer.Option(
            False,
            "--no-gate",
            envvar="VLLM_DOCTOR_NO_GATE",
            help="Print the findings and start vLLM whatever they are (also VLLM_DOCTOR_NO_GATE=1).",
        ),
    ) -> None:
        """Check the serve line, then start `vllm serve` with it only when the gate passes."""
        from vllm_doctor.redact import redact_words, shell_words

        argv = vllm_argv(list(serve_tokens or []))
        shown = shell_words(redact_words(argv))  # an --api-key on the line stays out of the log
        if no_gate:
            try:
                code = _gate(ctx, argv[2:])
            except Exception as err:  # the escape hatch: the doctor never stands in vLLM's way
                print(
                    f"vllm-doctor: --no-gate: the check did not finish ({err}); starting vLLM",
                    file=sys.stderr,
                )
            else:
                if code != EXIT_OK:
                    print(
                        f"vllm-doctor: --no-gate: the gate would stop here (exit {code}); "
                        "starting vLLM",
                        file=sys.stderr,
                    )
            start_vllm(argv)
        code = _gate(ctx, argv[2:])
        if code != EXIT_OK:
            reason = (
                "findings at or above --fail-on"
                if code == 1
                else "the serve line or an input could not be read"
                if code == 2
                else "the check could not finish"
            )
            print(
                f"vllm-doctor: not starting `{shown}`: {reason} (exit {code}); fix the serve "
                "line, or pass --no-gate (VLLM_DOCTOR_NO_GATE=1) to start it anyway",
                file=sys.stderr,
            )
            raise typer.Exit(code)
        print(f"vllm-doctor: the gate passed; starting `{shown}`", file=sys.stderr)
        start_vllm(argv)
