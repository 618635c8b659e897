"""A name or keyword vLLM uses of a companion package that the installed version lacks.

``cannot import name 'Y' from 'X'``, ``module 'X' has no attribute 'Y'``, ``'C' object has no
attribute 'y'`` and ``F() got an unexpected keyword argument 'k'`` are looked up in the
generated ``companion_uses`` table (per vLLM release, the names it imports or reads from
FlashInfer, LMCache, instanttensor, humming-kernels, quack-kernels and DeepGEMM, with the
keywords of its calls). A message whose name vLLM uses is read as API drift: the reading names
the package, the vLLM releases that use the name (with the keyword) and, from the ``api:`` keys
of ``stack/<distribution>`` (each companion version's own code), the versions that have it; the
fix installs the judged release's pin or a version that has it. A message whose name no covered
release uses of a companion is not this case (None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vllm_doctor.logreaders import LogReading, judged_release
from vllm_doctor.logreaders.imports import CANNOT_IMPORT

_MODULE_ATTR = re.compile(r"module '([A-Za-z_][\w.]{0,120})' has no attribute '(\w{1,120})'")
_OBJECT_ATTR = re.compile(
    r"(?:type object|) ?'(\w{1,120})'(?: object)? has no attribute '(\w{1,120})'"
)
_KEYWORD = re.compile(
    r"([A-Za-z_][\w.]{0,200})\(\) got an unexpected keyword argument '(\w{1,120})'"
)
MAX_TEXT = 4_000_000


@dataclass(frozen=True)
class Drift:
    """One message: the table key it names and, for a keyword, the keyword."""

    key: str
    keyword: str | None
    line: str
    method: str | None = None  # a method of the class ``key`` the table does not list


def _uses() -> Any:
    from vllm_doctor.knowledge import load

    return load("companion_uses")


def _match_suffix(keys: list[str], dotted: str) -> list[str]:
    """Keys whose ``module.name`` ends with ``dotted`` at a name boundary."""
    out = []
    for key in keys:
        full = key.replace(":", ".")
        if full == dotted or full.endswith(f".{dotted}"):
            out.append(key)
    return out


def find(text: str) -> list[Drift]:
    """The messages of the log that name something a covered release uses of a companion."""
    table = _uses()
    keys = list(table.keys())
    text = text[:MAX_TEXT]
    found: list[Drift] = []
    for match in CANNOT_IMPORT.finditer(text):
        name, module = match.group(1), match.group(2)
        for key in _match_suffix(keys, f"{module}.{name}"):
            if key.startswith(f"{module}:") or key.split(":", 1)[0].startswith(f"{module}."):
                # the message up to the module's closing quote (not the file it was loaded from)
                found.append(Drift(key, None, text[match.start() : match.end(2) + 1]))
    for match in _MODULE_ATTR.finditer(text):
        module, name = match.group(1), match.group(2)
        for key in _match_suffix(keys, f"{module}.{name}"):
            found.append(Drift(key, None, match.group(0)))
    for match in _OBJECT_ATTR.finditer(text):
        owner, name = match.group(1), match.group(2)
        for key in _match_suffix(keys, f"{owner}.{name}"):
            found.append(Drift(key, None, match.group(0)))
    for match in _KEYWORD.finditer(text):
        function, keyword = match.group(1), match.group(2)
        function = re.sub(r"\.__init__$", "", function)
        matched = [
            key
            for key in _match_suffix(keys, function)
            if any(keyword in (s.value or {}).get("keywords", ()) for s in table.spans(key))
        ]
        found.extend(Drift(key, keyword, match.group(0)) for key in matched)
        owner, _, method = function.rpartition(".")
        if not matched and owner and "." not in owner:
            # a method of a companion class vLLM uses, called on an instance the static
            # reading cannot follow (`attn_metadata.cascade_wrapper.plan(...)`)
            for key in _match_suffix(keys, owner):
                found.append(Drift(key, keyword, match.group(0), method))
    seen: set[tuple[str, str | None]] = set()
    unique = []
    for drift in found:
        if (drift.key, drift.keyword) not in seen:
            seen.add((drift.key, drift.keyword))
            unique.append(drift)
    return unique


def _releases_using(drift: Drift) -> tuple[str | None, str]:
    """(the package, the release ranges that use the name (with the keyword))."""
    from vllm_doctor.facts.release_api import ranges

    table = _uses()
    package = None
    good = []
    for release in table.releases:
        span = table.get(drift.key, release)
        value = span.value if span is not None and isinstance(span.value, dict) else {}
        ok = bool(value) and (drift.keyword is None or drift.keyword in value.get("keywords", ()))
        if ok:
            package = value.get("package")
        good.append(ok)
    return package, ranges(table.releases, good)


def read(text: str, version: str | None) -> LogReading | None:
    drifts = find(text)
    if not drifts:
        return None
    from vllm_doctor import knowledge
    from vllm_doctor.facts.release_api import provides
    from vllm_doctor.knowledge import stack

    release = judged_release(version)
    causes, fixes, read_lines = [], [], []
    for drift in drifts[:3]:
        package, using = _releases_using(drift)
        name = drift.key.replace(":", ".")
        what = f"keyword '{drift.keyword}' of {name}" if drift.keyword else name
        if drift.method:
            # the class is what the table knows: which releases use it, not the keyword
            package, using = _releases_using(Drift(drift.key, None, drift.line))
            what = name
        read_lines.append(f"log: {drift.line[:200]}")
        read_lines.append(f"vLLM releases that use {what}: {using}")
        companion = stack.table(package) if package else None
        have = (
            provides(companion, drift.key, [drift.keyword] if drift.keyword else [])
            if companion is not None and drift.method is None
            else ""
        )
        owner = package or drift.key.split(".", 1)[0].split(":", 1)[0]
        if companion is not None and drift.method is None:
            read_lines.append(
                f"{package} versions read ({companion.releases[0]}–{companion.releases[-1]}) "
                f"that have it: {have or 'none'}"
            )
        if drift.method:
            cause = (
                f"vLLM {using} use {owner}'s {name}; its {drift.method}() in the installed "
                f"{owner} takes no keyword '{drift.keyword}' (another {owner} version than "
                "the release was built against)"
            )
        else:
            cause = f"vLLM {using} use {what}, which the installed {owner} lacks" + (
                f" ({package} {have} {'accepts' if drift.keyword else 'has'} it)" if have else ""
            )
        causes.append(cause)
        fixes.extend(_fixes(release, package, have, knowledge))
    if release is None:
        read_lines.append("the vLLM version is not known: pass --vllm-version V for its pin")
    return LogReading("; ".join(causes), list(dict.fromkeys(fixes)), read_lines)


def _fixes(release: str | None, package: str | None, have: str, knowledge: Any) -> list[str]:
    if package is None:  # DeepGEMM: built from source, no wheel to read
        return [
            "install the DeepGEMM build your vLLM release expects "
            "(vLLM's tools/install_deepgemm.sh), or set VLLM_USE_DEEP_GEMM=0"
        ]
    out = []
    if release is not None:
        requirement = knowledge.load("dependencies").get(package, release)
        spec = requirement.value.get("spec") if requirement and requirement.value else None
        if spec:
            out.append(f"pip install '{package}{spec}' (vLLM {release}'s requirement)")
    if have:
        newest = have.split(", ")[-1].split("–")[-1]
        out.append(f"pip install '{package}=={newest}' (a version that has it)")
    return out or [f"pip install -U {package}"]
