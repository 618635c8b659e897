"""Reading a crash log: one reader for the collector (log.* facts) and for signature matching."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from vllm_doctor.errors import InputError


@lru_cache(maxsize=4)
def _read(path: str) -> str:
    from vllm_doctor.bounds import read_bytes

    data = read_bytes(path, "log file", "log")  # regular files of bounded size only
    return _decode(path, data)


_STDIN: dict[str, str] = {}


def _decode(where: str, data: bytes) -> str:
    if b"\x00" in data[:65536]:
        raise InputError(where, "is a binary file, not a crash log")
    return data.decode("utf-8", errors="replace")


def read_log(path: Path) -> str:
    """The log's text (read once per process, whoever asks first); bad files are InputError.

    ``-`` reads standard input (``kubectl logs pod | vllm-doctor explain --log -``).
    """
    if str(path) == "-":
        if "-" not in _STDIN:
            from vllm_doctor.bounds import read_stdin

            _STDIN["-"] = _decode("standard input", read_stdin("log", "log"))
        return _STDIN["-"]
    return _read(str(path))
