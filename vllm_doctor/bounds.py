"""Bounds on everything the doctor reads: files, JSON and YAML values, numbers.

Every user input that is read whole goes through ``read_bytes``/``read_text``: a path that
is not a regular file (a FIFO would block forever, ``/dev/zero`` never ends, ``/dev/urandom``
is noise) or that is larger than the limit for its kind is refused before a byte is read.
Parsed JSON and YAML values go through ``check_value``: nesting depth, the number of values
once YAML aliases are expanded (an anchor bomb is refused from its shape, without expanding
it), cycles (YAML can express them), and numbers that are not finite or not of a sane size.
Each refusal is an ``InputError`` (exit 2) that names the input.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError

MiB = 1 << 20
# Largest file of each kind that is read whole. A `vllm collect-env` report is ~10 KB, a
# config.json of the largest models ~100 KB, a crash log of a multi-GPU run a few MB.
FILE_LIMITS = {
    "report": 4 * MiB,
    "log": 64 * MiB,
    "json": 32 * MiB,
    "yaml": 1 * MiB,
    "toml": 1 * MiB,
}
MAX_DEPTH = 64  # nesting of JSON/YAML values (real configs stay under 8)
MAX_VALUES = 1_000_000  # values in one document, YAML aliases counted as expanded
MAX_INT = 2**63 - 1  # integers the doctor keeps as facts (int64, like torch)
# what one deployment file may ask for: past these it describes no machine (exit 2)
MAX_GPUS = 1024  # GPUs of one machine or pod (the largest hosts have 16; --gpus, nvidia.com/gpu)
MAX_NODES = 65536  # pods of one serving group (LeaderWorkerSet size)
MAX_TARGETS = 32  # containers that run vLLM, checked in one run (each is a full check)
# --manifest DIR: a deployment's folder, not a whole tree (a repository checkout)
MAX_DIR_ENTRIES = 10_000  # files and folders walked
MAX_DIR_FILES = 256  # manifest files read (each at most FILE_LIMITS["report"])
MAX_DIR_BYTES = 16 * MiB  # of them in all
MAX_SCRIPT = 64 * 1024  # characters of one container's `sh -c` script (real ones: < 4 KB)
MAX_MEMORY_MIB = 1 << 30  # a memory size (/dev/shm) past 1 EiB is no machine's


def expand_path(path: Path | str, source: str) -> Path:
    """``~`` and ``~user`` expanded; an unknown user is bad input, not a crash."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # Path("~nosuchuser/x").expanduser()
        user = str(path).split("/", 1)[0]
        raise InputError(source, f"cannot expand {user}: no such user") from None


def _describe(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


def read_bytes(path: Path | str, what: str, kind: str, source: str | None = None) -> bytes:
    """The bytes of a regular file no larger than ``FILE_LIMITS[kind]``; else InputError.

    ``what`` names the input in messages ("report file"); ``source`` defaults to the path.
    """
    source = source or str(path)
    limit = FILE_LIMITS[kind]
    path = expand_path(path, source)
    try:
        info = os.stat(path)  # never blocks, unlike open() on a FIFO
    except FileNotFoundError:
        named = "" if source == str(path) else f": {path}"
        raise InputError(source, f"no such {what}{named}") from None
    except OSError as err:
        raise InputError(source, f"cannot read the {what}: {err.strerror or err}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(source, f"is a directory, not a {what}")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(source, f"is {_describe(info.st_mode)}, not a {what}: give a regular file")
    if info.st_size > limit:
        raise InputError(
            source,
            f"is {_size(info.st_size)}; a {what} is read whole and may be at most {_size(limit)}",
        )
    try:
        # O_NONBLOCK: should the path become a FIFO between stat and open, open() still returns
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputError(source, f"cannot read the {what}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise InputError(source, f"is not a regular file, not a {what}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(
            source,
            f"is over {_size(limit)}; a {what} is read whole and may be at most {_size(limit)}",
        )
    return data


STDIN_IDLE_S = 30.0  # a pipe with nothing new for this long, still open: a writer that hangs
STDIN_TOTAL_S = 600.0  # and a writer that trickles for ever
STDIN_IDLE_ENV = "VLLM_DOCTOR_STDIN_TIMEOUT"


def read_stdin(what: str, kind: str, source: str = "standard input") -> bytes:
    """Standard input, bounded like a file of ``kind`` (``FILE_LIMITS``) and in time: a writer
    that sends nothing for ``STDIN_IDLE_S`` seconds (``VLLM_DOCTOR_STDIN_TIMEOUT``) without
    closing, or that is still writing after ``STDIN_TOTAL_S``, is InputError, never a hang;
    a terminal is refused at once (nobody is typing a crash log)."""
    import select
    import sys
    import time

    limit = FILE_LIMITS[kind]
    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None:
        raise InputError(source, f"there is no standard input to read the {what} from")
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # replaced by a test or an embedding program
        data = stream.read(limit + 1)
        fd = None
    if fd is not None:
        if os.isatty(fd):
            raise InputError(source, f"is a terminal: pipe the {what} in, or give a file")
        try:
            idle = float(os.environ.get(STDIN_IDLE_ENV) or STDIN_IDLE_S)
        except ValueError:
            raise InputError(STDIN_IDLE_ENV, "must be a number of seconds") from None
        chunks: list[bytes] = []
        size, start = 0, time.monotonic()
        while size <= limit:
            ready, _, _ = select.select([fd], [], [], idle)
            if not ready:
                raise InputError(
                    source,
                    f"nothing arrived for {idle:g} s and the pipe is still "
                    f"open: close it when the {what} is complete, or give a file",
                )
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() - start > STDIN_TOTAL_S:
                raise InputError(
                    source, f"still open after {STDIN_TOTAL_S:g} s: give the {what} as a file"
                )
        data = b"".join(chunks)
    if len(data) > limit:
        raise InputError(
            source,
            f"is over {_size(limit)}; a {what} is read whole and may be at most {_size(limit)}",
        )
    return data


def read_text(
    path: Path | str, what: str, kind: str, source: str | None = None, errors: str = "strict"
) -> str:
    """``read_bytes`` decoded as UTF-8; undecodable text is InputError unless errors="replace"."""
    data = read_bytes(path, what, kind, source)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise InputError(source or str(path), f"the {what} is not UTF-8 text") from None


# --- values ---------------------------------------------------------------------------------


class ValueBoundsError(ValueError):
    """A parsed value out of bounds (too deep, too many values, a cycle, a bad number)."""


def check_value(data: Any, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> Any:
    """``data`` unchanged when it is within bounds; else ValueBoundsError saying why.

    Linear in the distinct containers: a shared container (a YAML alias) is measured once
    and counted as often as it is referenced, so a billion-laughs document is refused from
    its shape without being expanded.
    """
    sizes: dict[int, int] = {}  # id(container) -> values it holds, aliases expanded
    depths: dict[int, int] = {}  # id(container) -> nesting depth below it
    on_path: set[int] = set()
    # iterative post-order walk: deep input must not hit Python's recursion limit
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, done = stack.pop()
        if isinstance(node, dict):
            children = list(node.keys()) + list(node.values())
        elif isinstance(node, (list, tuple, set, frozenset)):
            children = list(node)
        else:
            _check_scalar(node)
            continue
        key = id(node)
        if done:
            on_path.discard(key)
            size, depth = 1, 0
            for child in children:
                if isinstance(child, (dict, list, tuple, set, frozenset)):
                    size += sizes[id(child)]
                    depth = max(depth, depths[id(child)])
                else:
                    size += 1
            sizes[key], depths[key] = size, depth + 1
            if depth + 1 > max_depth:
                raise ValueBoundsError(f"nested more than {max_depth} levels deep")
            if size > max_values:
                raise ValueBoundsError(
                    f"holds more than {max_values:,} values once its aliases are expanded"
                )
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ValueBoundsError("refers to itself (a recursive alias)")
        if len(on_path) >= max_depth:
            raise ValueBoundsError(f"nested more than {max_depth} levels deep")
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if isinstance(child, (dict, list, tuple, set, frozenset)):
                if id(child) in on_path:
                    raise ValueBoundsError("refers to itself (a recursive alias)")
                stack.append((child, False))
            else:
                _check_scalar(child)
    return data


def _check_scalar(value: Any) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise ValueBoundsError(
                f"has an integer out of range ({str(value)[:12]}…, more than 64 bits)"
            )
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueBoundsError(f"has a number that is not finite ({value})")


def _reject_constant(name: str) -> Any:
    raise ValueBoundsError(f"has {name}, which is not a JSON number")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueBoundsError(f"has a number too large to represent ({text[:20]})")
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise ValueBoundsError(f"has an integer out of range ({text[:12]}…, {len(text)} digits)")
    return int(text)


def _null_constant(name: str) -> None:
    return None


def _float_or_null(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def json_loads(text: str, non_finite: str = "refuse") -> Any:
    """JSON within bounds: finite numbers, 64-bit integers, bounded depth.

    ``NaN``, ``Infinity`` and numbers that overflow (``1e999``) are refused, or with
    ``non_finite="null"`` read as null: a value that is not a number is unknown (a
    config.json written by Python's json module may hold them; a fact the doctor cannot
    read is unknown, never a crash). Raises ``json.JSONDecodeError`` for bad syntax and
    ``ValueBoundsError`` (a ValueError) for a value out of bounds, so ``except ValueError``
    catches both.
    """
    lenient = non_finite == "null"
    try:
        data = json.loads(
            text,
            parse_constant=_null_constant if lenient else _reject_constant,
            parse_float=_float_or_null if lenient else _parse_float,
            parse_int=_parse_int,
        )
    except RecursionError:
        raise ValueBoundsError(f"nested more than {MAX_DEPTH} levels deep") from None
    return check_value(data)
