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
    epilog="[bold]First steps[/bold]\n\n"
    "[bold]vllm-doctor check --example diffusion-gemma-tp2 --fail-on never[/bold]  "
    "[dim]# a bundled scenario, no GPU needed[/dim]\n\n"
    "[bold]vllm-doctor check -- vllm serve MODEL -tp 2[/bold]  "
    "[dim]# your serve line, on this machine[/dim]",
    rich_markup_mode="rich",
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


# two examples per command, shown under its --help (each: the command, then what it does)
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "check": (
        (
            "vllm-doctor check --example diffusion-gemma-tp2 --fail-on never",
            "a bundled scenario: no GPU or vLLM needed",
        ),
        (
            "vllm-doctor check --gpu 4090 --gpus 2 --recommend -- vllm serve Qwen/Qwen3-8B -tp 2",
            "what if this serve line ran on two RTX 4090s, and which release to install",
        ),
    ),
    "explain": (
        ("vllm-doctor explain MODEL001 --plain", "a rule's document as markdown, to paste"),
        (
            "kubectl logs pod/vllm-0 | vllm-doctor explain --log -",
            "the known failure or vLLM's own message behind a crash log",
        ),
    ),
    "facts": (
        ("vllm-doctor facts -v", "every fact of this machine with its source"),
        (
            "vllm-doctor facts --report collect-env.txt --format json",
            "the facts of another machine, as the rules see them",
        ),
    ),
    "probe": (
        ("vllm-doctor probe --list", "the probes and what each shows"),
        (
            "vllm-doctor probe tp-softembed --tp 2 --vllm-version 0.24.0",
            "one probe on two GPUs, joined with whether vLLM 0.24.0 has the fix",
        ),
    ),
    "serve": (
        (
            "vllm-doctor serve -- meta-llama/Llama-3.1-8B-Instruct -tp 2",
            "check the line, then exec `vllm serve` only when the gate passes",
        ),
        (
            "vllm-doctor serve --fail-on warning --model-config ./model -- ./model",
            "a stricter gate, with the model's config.json at hand",
        ),
    ),
    "fleet": (
        (
            "vllm-doctor fleet --ray -- vllm serve MODEL -tp 8 -pp 2",
            "every node of the running Ray cluster, alone and against each other",
        ),
        (
            "vllm-doctor fleet --facts node-facts/",
            "judge the `facts --format json` documents collected from the nodes",
        ),
    ),
    "init": (
        ("vllm-doctor init", "write .vllm-doctor.toml here, every key commented out"),
        ("vllm-doctor init --pyproject >> pyproject.toml", "the same as a pyproject.toml table"),
    ),
    "rules": (
        ("vllm-doctor rules list --select MEM", "the memory rules: code, severity, summary"),
        ("vllm-doctor rules test MODEL001 -v", "run a rule's positive and negative cases"),
    ),
    "rules list": (
        ("vllm-doctor rules list", "every rule: code, severity, summary"),
        ("vllm-doctor rules list --format json --select PAR", "the parallelism rules as JSON"),
    ),
    "rules show": (
        ("vllm-doctor rules show PAR001", "a rule's document"),
        (
            "vllm-doctor rules show MEM900 --rules-dir ci/doctor-rules",
            "a rule of your own, beside the shipped ones",
        ),
    ),
    "rules validate": (
        ("vllm-doctor rules validate --strict", "what CI runs on the shipped rules"),
        ("vllm-doctor rules validate --rules-dir ci/doctor-rules", "your own rules beside them"),
    ),
    "rules test": (
        ("vllm-doctor rules test", "every rule's cases"),
        ("vllm-doctor rules test ENV001 -v", "one rule's cases, each listed"),
    ),
}


def examples_epilog(name: str) -> str:
    """The --help epilog of a command: its examples, a blank line apart (rich markup: a
    bracket in a command is escaped; rich itself is imported only when help is shown)."""

    def escape(text: str) -> str:
        return text.replace("[", "\\[")

    lines = [
        f"[bold]{escape(command)}[/bold]  [dim]# {escape(what)}[/dim]"
        for command, what in EXAMPLES[name]
    ]
    return "[bold]Examples[/bold]\n\n" + "\n\n".join(lines)


def _register_commands() -> None:
    from vllm_doctor.commands import check, explain, facts, fleet, init, probe, rules, serve

    for module in (check, explain, facts, fleet, probe, rules, serve, init):
        module.register(app)
    for info in app.registered_commands:
        if info.name in EXAMPLES:
            info.epilog = examples_epilog(info.name)
    for group in app.registered_groups:
        if group.name in EXAMPLES:
            group.epilog = examples_epilog(group.name)
        if group.typer_instance is not None:
            for info in group.typer_instance.registered_commands:
                key = f"{group.name} {info.name}"
                if key in EXAMPLES:
                    info.epilog = examples_epilog(key)


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
