"""`vllm-doctor serve [OPTIONS] -- <vllm serve arguments>`: the preflight where the deployment
really happens. It runs `check` on the very serve line it is about to start, with this
machine's (this container's) facts, prints the findings, and replaces itself with
`vllm serve <arguments>` (os.execv: vLLM gets the process, its signals and its exit code) only
when the gate passes.

The gate is `check`'s exit code: 0 starts vLLM; 1 (findings at or above --fail-on), 2 (a serve
line or input the doctor cannot read) and 3 (the doctor could not finish) do not, and the
command exits with that code. --no-gate (or VLLM_DOCTOR_NO_GATE=1) prints the findings and
starts vLLM whatever they are, even when the check itself fails. The options are `check`'s,
with the same settings file and VLLM_DOCTOR_* environment underneath.

What the gate judges is what vLLM will run (``judged_words``): a line without a model (vLLM
would serve its default model) is refused, and when the line names the model twice (a
positional model and ``--model``) vLLM's own rule for the release decides — a refusal where
vLLM refuses it, the model vLLM takes where it takes one. Every signal that ends a process
(Ctrl-C, SIGTERM, SIGHUP, SIGQUIT), from the start to the exec, ends the run without starting
vLLM, --no-gate or not. The program is found on PATH before "the gate passed" is said, and
exactly that file is exec'd.

The arguments after `--` are those of `vllm serve` (`MODEL --tensor-parallel-size 2 ...`), as
the vLLM image takes them; a leading `vllm serve` is accepted too.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from vllm_doctor.commands import inputs
from vllm_doctor.errors import EXIT_BAD_INPUT, EXIT_OK, InputError, say

PROGRAM = "vllm"
# the signals whose default ends a process: before the exec they end the run instead
STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
    if hasattr(signal, name)
)
_MODEL_OPTION = re.compile(r"^--model(=.*)?$")


def vllm_argv(tokens: list[str]) -> list[str]:
    """The command vLLM is started with: ``vllm serve`` and the arguments after ``--``."""
    if tokens[:2] == [PROGRAM, "serve"]:
        tokens = tokens[2:]
    return [PROGRAM, "serve", *tokens]


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


# -- what vLLM will run ----------------------------------------------------------------------


def release_of(vllm_version: str | None) -> str | None:
    """The vLLM release that will run the line: --vllm-version, else the installed one (read
    from its metadata, never imported); None when unknown."""
    if vllm_version:
        return vllm_version
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _older_than(version: str | None, release: str) -> bool | None:
    from packaging.version import InvalidVersion, Version

    if version is None:
        return None
    try:
        return Version(version) < Version(release)
    except InvalidVersion:
        return None


def _model_of(words: list[str]) -> str | None:
    """The model the doctor's parser reads from ``words`` (positional or a config file's)."""
    from vllm_doctor.serveline.parser import parse_serve_argv

    try:
        return parse_serve_argv([PROGRAM, "serve", *words]).model
    except InputError as err:
        if "no model and no options" in err.problem:
            return None
        raise


def judged_words(words: list[str], version: str | None) -> list[str]:
    """The serve words `check` must judge so that it judges what vLLM will run; InputError
    (exit 2) for a line vLLM would refuse or that names no model.

    vLLM's rule for a model given twice (``vllm/entrypoints/cli/serve.py`` and
    ``FlexibleArgumentParser.parse_args``, read in every release wheel 0.8.0–0.33.0):
    0.8.0–0.8.2 raise ValueError for any ``--model``; 0.8.3–0.11.0 raise it for the word
    ``--model`` and let a positional model win over ``--model=M``; 0.11.1 on move the first
    ``--model M`` to the front, so a positional model beside it is an unrecognized argument.
    """
    at = next((i for i, w in enumerate(words) if _MODEL_OPTION.match(w)), None)
    if at is None:
        if _model_of(words) is None:
            raise InputError(
                "serve line",
                "no model: vLLM would start the default model of its release, not the one "
                "meant (give it after `--`: vllm-doctor serve -- MODEL ...)",
            )
        return words
    flag = words[at]
    given = flag.split("=", 1)[1] if "=" in flag else (words[at + 1] if at + 1 < len(words) else "")
    if not given.strip():
        raise InputError("--model", "an empty model")
    rest = words[:at] + words[at + (1 if "=" in flag else 2) :]
    positional = _model_of(rest)
    shown = f"vLLM {version}" if version else "vLLM"
    if _older_than(version, "0.8.3"):
        raise InputError(
            "--model",
            f"{shown} refuses `--model` with `vllm serve` (ValueError: give the model as the "
            "first argument)",
        )
    if _older_than(version, "0.11.1"):
        if "=" not in flag:
            raise InputError(
                "--model",
                f"{shown} refuses `--model M` with `vllm serve` (ValueError: give the model "
                "as the first argument)",
            )
        return rest if positional is not None else words  # the positional model wins
    if positional is not None:
        releases = shown if version else "vLLM 0.11.1 and later"
        raise InputError(
            "serve line",
            f"two models, {positional!r} and --model {given!r}: {releases} refuse(s) the line "
            f"(unrecognized arguments: {positional}); older releases serve {positional!r} or "
            "refuse --model. Give the model once",
        )
    return words


# -- signals and the exec ----------------------------------------------------------------------


class _Stopped(BaseException):
    """A stop signal arrived before the exec (a BaseException: no `except Exception` in the
    check, or the --no-gate escape hatch, may take it for a failed check)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_signals_end_the_run() -> Iterator[None]:
    """Until the block ends, each stop signal raises _Stopped wherever the run is, and the
    run ends with 128 + the signal's number; the handlers in place before come back after
    (a signal in the last instant before the exec meets Python's own: nothing starts)."""

    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    previous = {}
    for signum in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread: left as it is
            previous[signum] = signal.signal(signum, stop)
    try:
        yield
    except _Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        say(f"{name}: the run stopped before vLLM was started; nothing was started")
        raise SystemExit(128 + stopped.signum) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exec_target(program: str = PROGRAM) -> str | None:
    """The file ``program`` names on PATH (as execvp would find it), or None."""
    import shutil

    return shutil.which(program)


def start_vllm(target: str, argv: list[str]) -> None:
    """Replace this process with vLLM (what a container's entrypoint does)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    if hasattr(signal, "SIGPIPE"):  # vLLM starts with the default, not Python's "ignore"
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        os.execv(target, argv)
    except OSError as err:  # removed or made unrunnable since it was found
        say(f"cannot start {target}: {err.strerror or err}")
        raise typer.Exit(127) from None


def _gate(params: typer.Context, argv: list[str]) -> int:
    """Run `check` on the serve line in this process; its exit code. It is run through the
    root command of this very invocation (the one `vllm-doctor` app), so that `check` parses
    the forwarded options as on its own command line."""
    root = params.find_root().command
    code = root.main(args=check_argv(params, argv), standalone_mode=False)
    return code if isinstance(code, int) else EXIT_OK


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
        with stop_signals_end_the_run():
            if no_gate:
                code = _escape_hatch(ctx, argv, vllm_version)
            else:
                code = _gate(ctx, judged_words(argv[2:], release_of(vllm_version)))
                if code != EXIT_OK:
                    _refuse(shown, code)
            target = exec_target()
            if target is None:
                say(f"cannot start `{shown}`: no `{PROGRAM}` program on PATH; nothing was started")
                raise typer.Exit(127)
            if not no_gate:
                say(f"the gate passed; starting `{shown}`")
        start_vllm(target, argv)


def _escape_hatch(ctx: typer.Context, argv: list[str], vllm_version: str | None) -> int:
    """--no-gate: the check's outcome is said, never in vLLM's way (a stop signal still is)."""
    try:
        code = _gate(ctx, judged_words(argv[2:], release_of(vllm_version)))
    except Exception as err:  # the doctor never stands in vLLM's way
        say(f"--no-gate: the check did not finish ({err}); starting vLLM")
        return EXIT_BAD_INPUT
    if code != EXIT_OK:
        say(f"--no-gate: the gate would stop here (exit {code}); starting vLLM")
    return code


def _refuse(shown: str, code: int) -> None:
    reason = (
        "findings at or above --fail-on"
        if code == 1
        else "the serve line or an input could not be read"
        if code == 2
        else "the check could not finish"
    )
    say(
        f"not starting `{shown}`: {reason} (exit {code}); fix the serve "
        "line, or pass --no-gate (VLLM_DOCTOR_NO_GATE=1) to start it anyway"
    )
    raise typer.Exit(code)
