"""The doctor's one error policy: what ends a run, with which exit code and which line.

Exit codes (documented in the README):
  0  nothing at or above --fail-on
  1  findings at or above --fail-on
  2  bad usage or bad input (InputError): one line naming the input and the problem
  3  the doctor could not finish: a step crashed (a bug, or an input it cannot handle that
     is not recognised as bad). One line names the step and the error; ``--debug`` (or
     ``VLLM_DOCTOR_DEBUG=1``) adds the traceback. A collector that crashes fails the run
     with 3 even when no selected rule needs its facts: a CI gate fails closed, and the
     rules that would have used those facts cannot be told apart from the ones that do not
     through derived facts.
"""

from __future__ import annotations

import contextlib
import os
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

# Characters that steer a terminal or a CI log rather than show: C0 and C1 controls (ESC
# starts terminal sequences; a newline starts a line GitHub reads as `::error …`), the Unicode
# line separators and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep: str = "") -> str:
    """``text`` with every character that could steer a terminal or a log written as an escape
    (``\\x1b``, ``\\n``, ``\\u202e``); ``keep``: characters left as they are (``"\\n\\t"`` for
    a multi-line text)."""

    def spell(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
            f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
        )

    return _UNPRINTABLE.sub(spell, text)


def say(message: str) -> None:
    """One line on stderr, ``vllm-doctor: <message>``: secrets hidden (``redact_text``, the
    rule every output follows), nothing in it that steers a terminal."""
    import sys

    from vllm_doctor.redact import redact_text

    print(f"vllm-doctor: {printable(redact_text(message))}", file=sys.stderr)


EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3

CRASH_PREFIX = "collector crashed"  # how a crashed collector's missing facts are explained
CRASH_HINT = (
    "not a missing input: a step of the doctor crashed (the run exits 3); rerun "
    "with --debug and report the traceback"
)
DEBUG_ENV = "VLLM_DOCTOR_DEBUG"
DEBUG_HINT = "rerun with --debug for the traceback"


class InputError(Exception):
    """Bad input from the user: a serve line, a config file, a report, a rule file.

    ``source`` names the input (a file path, "--speculative-config", "serve line"), so the
    message reads "vllm-doctor: <source>: <problem>".
    """

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class DoctorError(Exception):
    """The doctor itself could not finish (exit code 3)."""


@dataclass
class Crash:
    """An unexpected exception in one step of a run (a collector, the rules, a report)."""

    step: str  # "model config", "rules", "report rendering"
    error: str  # "RecursionError: maximum recursion depth exceeded"
    traceback: str  # for --debug

    @classmethod
    def of(cls, step: str, err: BaseException) -> Crash:
        return cls(step, describe(err), "".join(traceback.format_exception(err)))

    def line(self) -> str:
        return f"{self.step}: {self.error}"


def describe(err: BaseException, limit: int = 200) -> str:
    """``Type: first line of the message``, short, with secrets taken out."""
    from vllm_doctor.redact import redact_text

    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = redact_text(text)
    if len(text) > limit:
        text = text[:limit] + "…"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


_debug = False


def set_debug(enabled: bool) -> None:
    global _debug  # noqa: PLW0603 - the one process-wide switch, set once from --debug
    _debug = enabled


def debug_enabled() -> bool:
    return _debug or os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Name the step an unexpected exception escapes from (the innermost name wins)."""
    try:
        yield
    except (InputError, DoctorError, KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:
        if not hasattr(err, "doctor_step"):
            # some built-in exceptions take no attributes
            with contextlib.suppress(AttributeError):
                err.doctor_step = name  # type: ignore[attr-defined]
        raise
