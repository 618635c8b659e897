"""The command-line entry point: a typer app whose commands live in vllm_doctor.commands.

Every command module has a ``register(app)`` function. ``main`` is the one error policy
(``vllm_doctor.errors``): bad input is one line and exit 2; anything unexpected is one line
naming the step and the error, and exit 3 (``--debug`` or ``VLLM_DOCTOR_DEBUG=1`` adds the
traceback); never a traceback otherwise. Nothing here imports torch or vllm.
"""

from __future__ import annotations

import sys

import typer

from vllm_doctor import __version__
from vllm_doctor.errors import (
    DEBUG_HINT,
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    DoctorError,
    InputError,
    debug_enabled,
    describe,
    say,
    set_debug,
)

try:  # newer typer vendors click as typer._click; older typer uses click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

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
        raise typer.Exit


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
    debug: bool = typer.Option(
        False,
        "--debug",
        help="On a crash, print the traceback (also VLLM_DOCTOR_DEBUG=1); "
        "may be given after the command too.",
    ),
) -> None:
    """Preflight doctor for vLLM deployments."""
    if debug:
        set_debug(True)


def _register_commands() -> None:
    from vllm_doctor.commands import check, explain, facts, fleet, probe, rules, serve

    for module in (check, explain, facts, fleet, probe, rules, serve):
        module.register(app)


_register_commands()


def _take_debug(args: list[str]) -> bool:
    """Remove ``--debug`` given anywhere before a ``--`` (it belongs to no one command)."""
    end = args.index("--") if "--" in args else len(args)
    found = "--debug" in args[:end]
    if found:
        args[:] = [a for i, a in enumerate(args) if not (i < end and a == "--debug")]
    return found


def _one_line(text: str) -> str:
    from vllm_doctor.redact import redact_text

    return " ".join(redact_text(str(text)).split())


def _serve_option_hint(err: click_exceptions.NoSuchOption, args: list[str]) -> str | None:
    """For an unknown option of a command that takes a serve line: when a word before `--` is
    a `vllm serve` option (``--tensor-parallel-size``, ``-tp``), say where it belongs."""
    command = err.ctx.command if err.ctx is not None else None
    if command is None or not any(p.name == "serve_tokens" for p in command.params):
        return None
    ours = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    end = args.index("--") if "--" in args else len(args)
    from vllm_doctor.serveline.options import resolve_flag

    for word in args[:end]:
        flag = word.split("=", 1)[0]
        if flag.startswith("-") and flag not in ours and resolve_flag(flag) is not None:
            return (
                f"{flag} is a `vllm serve` option: put the serve line after `--`, as in "
                f"`vllm-doctor {command.name} [OPTIONS] -- vllm serve MODEL {flag} ...`"
            )
    return None


def _not_utf8(args: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps the undecodable bytes as
    lone surrogates, which no output can carry), shown with its bytes escaped."""
    for number, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = arg.encode("utf-8", "surrogateescape")
            return f"argument {number} ({raw[:60]!r}) is not valid UTF-8"
    return None


def main(argv: list[str] | None = None) -> None:
    from vllm_doctor.report.output import guard_streams

    guard_streams()
    from vllm_doctor.redact import forget_secrets

    forget_secrets()  # what an earlier run in this process knew is not this run's
    args = list(sys.argv[1:] if argv is None else argv)
    if _take_debug(args):
        set_debug(True)
    bad = _not_utf8(args)
    if bad is not None:
        say(bad)
        sys.exit(EXIT_BAD_INPUT)
    try:
        result = app(args=args, standalone_mode=False)
    except InputError as err:
        say(f"{_one_line(str(err))}")
        sys.exit(EXIT_BAD_INPUT)
    except click_exceptions.NoSuchOption as err:
        say(_serve_option_hint(err, args) or err.format_message())
        sys.exit(EXIT_BAD_INPUT)
    except click_exceptions.UsageError as err:
        if err.format_message():  # empty when the help was shown for a bare `vllm-doctor`
            say(f"{err.format_message()}")
        sys.exit(EXIT_BAD_INPUT)
    except typer.Exit as err:  # typer.Exit / click's Exit: a chosen exit code
        code = getattr(err, "exit_code", 0)
        if code == 130:  # typer's answer to Ctrl-C
            say("interrupted")
        sys.exit(code)
    except (typer.Abort, KeyboardInterrupt):
        say("interrupted")
        sys.exit(130)
    except BrokenPipeError:  # `vllm-doctor ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        sys.exit(0)
    except DoctorError as err:
        say(f"could not finish: {_one_line(str(err))}")
        sys.exit(EXIT_INTERNAL)
    except click_exceptions.ClickException as err:
        say(f"{err.format_message()}")
        sys.exit(EXIT_BAD_INPUT)
    except Exception as err:  # anything unexpected: one line naming the step, exit 3
        if debug_enabled():
            import traceback

            traceback.print_exception(err, file=sys.stderr)
        step = getattr(err, "doctor_step", None) or "command"
        hint = "" if debug_enabled() else f" ({DEBUG_HINT})"
        say(f"could not finish: {step}: {describe(err)}{hint}")
        sys.exit(EXIT_INTERNAL)
    if result == 130:
        say("interrupted")
    sys.exit(result if isinstance(result, int) else 0)
