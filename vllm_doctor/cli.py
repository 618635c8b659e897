"""The command-line entry point: a typer app whose commands live in vllm_doctor.commands.

Every command module has a ``register(app)`` function. ``main`` turns the doctor's own
errors into one line on stderr and the documented exit codes; nothing here imports torch
or vllm.
"""

from __future__ import annotations

import sys

import typer

from vllm_doctor import __version__
from vllm_doctor.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, DoctorError, InputError

try:  # newer typer vendors click as typer._click; older typer uses click itself
    from typer._click import exceptions as click_exceptions  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exceptions

app = typer.Typer(
    name="vllm-doctor",
    help="Preflight doctor for vLLM: known failures for this stack, model and serve line.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"vllm-doctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """Preflight doctor for vLLM deployments."""


def _register_commands() -> None:
    from vllm_doctor.commands import check, explain, facts, probe, rules

    for module in (check, explain, facts, probe, rules):
        module.register(app)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    try:
        result = app(args=argv, standalone_mode=False)
    except InputError as err:
        print(f"vllm-doctor: {err}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except click_exceptions.UsageError as err:
        if err.format_message():  # empty when the help was shown for a bare `vllm-doctor`
            print(f"vllm-doctor: {err.format_message()}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except typer.Exit as err:  # typer.Exit / click's Exit: a chosen exit code
        code = getattr(err, "exit_code", 0)
        if code == 130:  # typer's answer to Ctrl-C
            print("vllm-doctor: interrupted", file=sys.stderr)
        sys.exit(code)
    except (typer.Abort, KeyboardInterrupt):
        print("vllm-doctor: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # `vllm-doctor ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        sys.exit(0)
    except DoctorError as err:
        print(f"vllm-doctor: could not finish: {err}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
    except click_exceptions.ClickException as err:
        print(f"vllm-doctor: {err.format_message()}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    if result == 130:
        print("vllm-doctor: interrupted", file=sys.stderr)
    sys.exit(result if isinstance(result, int) else 0)
