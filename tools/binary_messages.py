"""The messages a compiled library prints, read from the strings of its shared object.

NCCL and the CUDA runtime have no Python code to read: what they print is a format string in
the ``.rodata`` section of ``libnccl.so.2`` / ``libcudart.so.N`` (the ELF sections found by
``tools/fatbin.py``; the library is never loaded or run). ``.rodata`` holds every constant
string of the library, so each reader keeps only the strings that are messages:

* ``cuda_runtime_errors``: the table ``cudaGetErrorString`` returns from ("no kernel image is
  available for execution on the device"). The table's strings lie among the ``cudaError*``
  names ``cudaGetErrorName`` returns, so the strings between the first and the last such name
  are the messages. torch's CUDA check prints them as ``CUDA error: <string>``, NCCL as
  ``Cuda failure '<string>'``.
* ``nccl_warnings``: the format strings of NCCL's ``WARN(...)`` lines and the strings
  ``ncclGetErrorString`` returns ("unhandled cuda error (run with NCCL_DEBUG=INFO for
  details)"): a string of words (no identifier, path or option list) that says something went
  wrong (failed, error, invalid, cannot, mismatch, timeout, ...) and is a format (a ``%``
  conversion) or a sentence of at least five words. NCCL links the CUDA runtime statically:
  that runtime's table (found as above) is left out, it is the runtime's message.

A format string becomes a catalogue template: each conversion (``%s``, ``%ld``, ``%p``, ...)
is ``{*}``; the key is ``log.error: <template>`` (a line a library prints, read wherever a log
shows it, whatever exception carries it).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import fatbin  # noqa: E402

KEY_CLASS = "log.error"
FORMAT = 4  # what the readers keep: a reading made by another format is read again
# a NUL-terminated run of printable characters (a C string constant)
_C_STRING = re.compile(rb"(?<=\x00)[\x20-\x7e\t\n]{3,}(?=\x00)")
_ERROR_NAME = re.compile(r"cudaError\w+")
_CONVERSION = re.compile(
    r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcsp]"
)
_WRONG = re.compile(
    r"(?i)\b(?:fail\w*|errors?|invalid|unable|cannot|can't|could ?n[o']t|mismatch\w*|"
    r"not supported|unsupported|timed? ?out|timeout|abort\w*|unexpected|exceed\w*|refused|"
    r"not found|truncated|stuck|unhandled|insufficient|duplicate|not allowed|too many|"
    r"out of bounds|is disabled)\b"
)
_WORD = re.compile(r"[A-Za-z]{2,}")
MIN_WORDS = 3
SENTENCE_WORDS = 5  # a message without a conversion: a sentence at least this long


def rodata_strings(data: bytes) -> list[str]:
    """The C strings of an ELF shared object's ``.rodata``, in their order."""
    try:
        section = fatbin.elf_sections(data).get(".rodata")
    except fatbin.FatbinError:  # not a 64-bit little-endian ELF
        return []
    if section is None:
        return []
    offset, size = section
    return [m.group().decode("ascii") for m in _C_STRING.finditer(data, offset, offset + size)]


def _error_table(strings: list[str]) -> tuple[int, int] | None:
    """(first, last) index of the CUDA runtime's error-string table: from the first
    ``cudaError*`` name to the last, and the sentences right after it (the strings of the
    last names follow them, up to the next identifier: an API function's name)."""
    names = [n for n, s in enumerate(strings) if _ERROR_NAME.fullmatch(s)]
    if len(names) < 20:  # a few stray names are not the table
        return None
    last = names[-1]
    while last + 1 < len(strings) and " " in strings[last + 1]:
        last += 1
    return names[0], last


def template(text: str) -> str:
    """A format string as a catalogue template: conversions become ``{*}``, whitespace one
    space, ``%%`` a percent sign."""
    text = _CONVERSION.sub("{*}", text).replace("%%", "%")
    return " ".join(text.split())


def cuda_runtime_errors(strings: list[str]) -> list[str]:
    """The messages ``cudaGetErrorString`` returns, as templates."""
    span = _error_table(strings)
    if span is None:
        return []
    first, last = span
    found = []
    for text in strings[first : last + 1]:
        if _ERROR_NAME.fullmatch(text) or len(_WORD.findall(text)) < 2:
            continue
        found.append(template(text))
    return found


def _is_message(text: str) -> bool:
    words = _WORD.findall(text)
    if len(words) < MIN_WORDS or not _WRONG.search(text):
        return False
    if re.search(r"[/\\]\w+\.\w+$|^\w+$|^[\w.]+\(|[{}]", text):  # a path, a name, code
        return False
    return bool(_CONVERSION.search(text)) or "NCCL_DEBUG" in text or len(words) >= SENTENCE_WORDS


def nccl_warnings(strings: list[str]) -> list[str]:
    """NCCL's warning formats and error strings, as templates (its statically linked CUDA
    runtime's table left out)."""
    span = _error_table(strings)
    found = []
    for n, text in enumerate(strings):
        if span is not None and span[0] <= n <= span[1]:
            continue
        if _is_message(text):
            found.append(template(text))
    return found


# reader → (its messages, where the library prints them: the site's function)
READERS = {
    "nccl": (nccl_warnings, "WARN / ncclGetErrorString"),
    "cuda-runtime": (cuda_runtime_errors, "cudaGetErrorString"),
}


def messages(data: bytes, reader: str, path: str) -> dict[str, dict]:
    """The messages of one shared object, keyed as the catalogue keys them, with the site
    (the object's path in the wheel, the call that prints or returns them)."""
    read, where = READERS[reader]
    out: dict[str, dict] = {}
    for text in read(rodata_strings(data)):
        if len(text.replace("{*}", "").strip()) < 12:  # too short to find in a log alone
            continue
        out.setdefault(f"{KEY_CLASS}: {text}", {"sites": [[path, where, ""]]})
    return out
