"""Writing a finished report to `-o FILE` or stdout, whatever stdout is.

The contract (tests/test_output.py):
- `-o` into a missing directory, onto a directory or an unwritable path: one line, exit 2,
  checked before any work is done.
- A full disk (`-o /dev/full`, `> /dev/full`) or a closed stdout (`>&-`): one line, exit 3.
- A reader that leaves early (`| head`): the rest of the report is dropped quietly and the
  exit code is still the one the findings decide.
- A stdout that cannot encode the report (`PYTHONIOENCODING=ascii`): the marks and arrows are
  spelled in ASCII and anything else is escaped, never a UnicodeEncodeError.
- Files are always written as UTF-8.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from vllm_doctor.errors import DoctorError, InputError

# how the report's own non-ASCII characters read on an ASCII-only stream
ASCII_SPELLING = str.maketrans(
    {
        "✓": "ok",
        "✗": "x",
        "…": "...",
        "→": "->",
        "—": "-",
        "–": "-",
        "·": "|",
        "↔": "<->",
        "≥": ">=",
        "≤": "<=",
        "•": "*",
        "×": "x",
        "❌": "x",
        "⚠": "!",
        "ℹ": "i",
        "\ufe0f": "",
    }
)


def escape(text: Any) -> str:
    """Text for a Rich markup line: markup escaped, and every character that steers a terminal
    (an ESC sequence in a model name or a rule's text) or starts a new line written out."""
    from rich.markup import escape as markup_escape

    from vllm_doctor.errors import printable

    return markup_escape(printable(str(text)))


def check_output_path(path: Path) -> None:
    """Refuse an -o target that cannot be written, before any collecting happens."""
    name = str(path)
    if path.is_dir():
        raise InputError(name, "-o/--output names a directory, not a file")
    parent = path.parent
    if not parent.exists():
        raise InputError(name, f"-o/--output: the directory {parent} does not exist")
    if not parent.is_dir():
        raise InputError(name, f"-o/--output: {parent} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(name, "-o/--output: permission denied")
    if not path.exists() and not os.access(parent, os.W_OK):
        raise InputError(name, f"-o/--output: cannot create files in {parent} (permission denied)")


def write_file(path: Path, text: str) -> None:
    name = str(path)
    try:
        with path.open("w", encoding="utf-8") as handle:
            handle.write(text)
    except IsADirectoryError:
        raise InputError(name, "-o/--output names a directory, not a file") from None
    except FileNotFoundError:
        raise InputError(name, f"-o/--output: the directory {path.parent} does not exist") from None
    except PermissionError:
        raise InputError(name, "-o/--output: permission denied") from None
    except OSError as err:
        raise DoctorError(f"could not write the report to {name}: {err.strerror or err}") from None


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def encodable(text: str, encoding: str | None) -> str:
    """``text`` as it can be written in ``encoding``: ASCII spellings first, then escapes."""
    encoding = encoding or "utf-8"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        pass
    text = text.translate(ASCII_SPELLING)
    try:
        return text.encode(encoding, errors="backslashreplace").decode(encoding)
    except LookupError:
        return text.encode("ascii", errors="backslashreplace").decode("ascii")


def write_stdout(text: str) -> bool:
    """Write to stdout; False when the reader has gone (a broken pipe), which is no error."""
    stream = sys.stdout
    if stream is None:
        raise DoctorError("stdout is closed: nowhere to write the report (use -o FILE)")
    try:
        stream.write(encodable(text, getattr(stream, "encoding", None)))
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        return False
    except OSError as err:
        _silence_stdout()
        if err.errno == errno.EBADF:
            raise DoctorError(
                "stdout is closed: nowhere to write the report (use -o FILE)"
            ) from None
        raise DoctorError(f"could not write the report to stdout: {err.strerror or err}") from None
    except ValueError:  # a closed file object
        raise DoctorError("stdout is closed: nowhere to write the report (use -o FILE)") from None
    return True


def echo(text: str = "") -> bool:
    """One line (or a few) of plain output on stdout, control characters written as escapes
    (a crash log's line or a rule's text never steers the terminal), through `write_stdout`."""
    from vllm_doctor.errors import printable

    return write_stdout(printable(text, keep="\n\t") + "\n")


class _GuardedStream:
    """sys.stdout or sys.stderr as the commands see them: when the reader has left (a broken
    pipe) the rest of the output goes to /dev/null and the run keeps its exit code, instead of
    an exception deep in click or rich (click answers a broken pipe with exit 1, and a failed
    flush at exit makes the interpreter exit 120). On stderr any write error is dropped: there
    is nowhere left to say it. Other write errors on stdout (a full disk) still raise, and the
    report writer turns them into exit 3."""

    def __init__(self, stream: Any, quiet_errors: type[BaseException] | tuple) -> None:
        self._stream = stream
        self._quiet = quiet_errors

    def _silence(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except self._quiet:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except self._quiet:
            self._silence()
            with contextlib.suppress(OSError, ValueError):  # the rest goes to /dev/null
                self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_streams() -> None:
    """Install the guards on stdout and stderr (once, at the entry points)."""
    if sys.stdout is not None and not isinstance(sys.stdout, _GuardedStream):
        sys.stdout = _GuardedStream(sys.stdout, BrokenPipeError)
    if sys.stderr is not None and not isinstance(sys.stderr, _GuardedStream):
        sys.stderr = _GuardedStream(sys.stderr, (OSError, ValueError))


def write_report(text: str, output: Path | None) -> bool:
    if output is not None:
        write_file(output, text)
        return True
    return write_stdout(text)


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout is not None and sys.stdout.isatty()
    except (ValueError, OSError):
        return False


def make_console(buffer, terminal: bool):
    """A rich Console that renders into ``buffer``: coloured and fitted to the terminal's width
    when the report goes to a terminal, else plain and soft-wrapped (a long line stays one line,
    so `grep` and diff see what was meant)."""
    from rich.console import Console

    if terminal:
        return Console(file=buffer, force_terminal=True, width=Console().width, highlight=False)
    return Console(
        file=buffer,
        force_terminal=False,
        color_system=None,
        soft_wrap=True,
        highlight=False,
        width=10_000,
    )


def print_rich(render) -> bool:
    """Render with ``render(console)`` and write the result to stdout in one piece, through
    `write_stdout` (a reader that leaves early does not change the exit code)."""
    import io

    buffer = io.StringIO()
    render(make_console(buffer, stdout_is_terminal()))
    return write_stdout(buffer.getvalue())


def json_safe(value: Any) -> Any:
    """``value`` with NaN and ±Infinity as the strings "NaN", "Infinity", "-Infinity": JSON has
    no such numbers, and a config.json that holds them must not make the report invalid."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dump_json(data: Any) -> str:
    return json.dumps(json_safe(data), indent=2, default=str, allow_nan=False) + "\n"
