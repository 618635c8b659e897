"""Readers that name the cause behind a crash-log message from the world around vLLM.

A rule with ``reader: NAME`` (see docs/rule-format.md) is a generic rule for a family of
messages with endless variants (a missing module, an undefined C++ symbol, a platform vLLM has
no build for, a torch.compile failure, vLLM's own list of refused attention backends, an
architecture no release registers). Its signatures find the message; the reader then reads the
log around it with the release knowledge (knowledge/data: what each release requires, ships
and registers) and says what it found — the cause and the exact command or change that fixes
it — or returns None when the message is not the family's case (the rule then does not
apply). Readers only read text: nothing is imported, run or fetched.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any

# reader name -> module under vllm_doctor.logreaders with ``read(text, version)``
READERS = {
    "imports": "imports",
    "abi": "abi",
    "platforms": "platforms",
    "compilers": "compilers",
    "backend-reasons": "reasons",
    "architectures": "plugins",
    "nccl-settings": "nccl",
    "refused-options": "options",
    "companion-api": "companion_api",
}


@dataclass
class LogReading:
    """What a reader found: the cause, the fixes (commands or exact changes, best first) and
    what it read to say so (log lines and knowledge, for the evidence)."""

    cause: str
    fixes: list[str]
    read: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "fixes": self.fixes, "read": self.read}


def read_log(reader: str, text: str, version: str | None) -> LogReading | None:
    module = importlib.import_module(f"vllm_doctor.logreaders.{READERS[reader]}")
    return module.read(text, version)


# -- shared readings -------------------------------------------------------------------------
_WINDOWS = re.compile(r"[A-Za-z]:\\(?:[^\\\n]{1,200}\\){0,30}?(?:site-packages|Scripts)\\")
_MACOS = re.compile(r"/Users/[^/\n]{1,100}/|macOS-\d|darwin|Darwin")
_DETECTED = re.compile(
    r"Automatically detected platform (\w{2,20})|Platform plugin (\w{1,40}) is activated"
)


def platform_of(text: str) -> str | None:
    """The platform a log was written on, when it shows: "windows" (paths such as
    ``C:\\...\\site-packages\\``), "macos" (``/Users/...`` paths), else the platform vLLM says
    it detected or the platform plugin it activated ("cuda", "rocm", "cpu", "tpu", "ascend")."""
    if _WINDOWS.search(text[:2_000_000]):
        return "windows"
    if _MACOS.search(text[:2_000_000]):
        return "macos"
    found = _DETECTED.search(text[:2_000_000])
    if found:
        return (found.group(1) or found.group(2)).lower()
    return None


def judged_release(version: str | None) -> str | None:
    """The covered release a vLLM version is judged by (knowledge.Table.match), if any."""
    if not version:
        return None
    from vllm_doctor.knowledge import load

    return load("releases").match(version).release


def value_at(kind: str, key: str, release: str | None) -> Any:
    """A knowledge table's value for ``key`` in ``release`` (else in the newest release that
    has the key), with the release it was read from."""
    from vllm_doctor.knowledge import load

    table = load(kind)
    if release is not None and release in table.releases:
        span = table.get(key, release)
        if span is not None:
            return span.value, release
    last = table.last_release(key)
    if last is None:
        return None, None
    span = table.get(key, last)
    return (span.value if span is not None else None), last


def pip_spec(name: str, spec: str | None = None) -> str:
    """``pip install`` argument for a distribution and a specifier, quoted for a shell."""
    requirement = f"{name}{spec or ''}"
    return f"'{requirement}'" if any(c in requirement for c in "<>=!~[;* ") else requirement
