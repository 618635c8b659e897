"""The Linux distribution's release (``platform.os``) and what it says of the system C++
runtime (``platform.glibcxx``, inferred).

A wheel built on a newer system (AITER 0.1.12.post1 on Ubuntu 24.04) needs GLIBCXX symbols an
older distribution's libstdc++ lacks. Where the doctor cannot read the library itself (a
pasted collect-env report, a platform named in prose), the release its ``OS`` line or
``--platform os=ubuntu-22.04`` names gives the libstdc++ that release installs
(knowledge/data/distro_libstdcxx.yaml). A newer libstdc++ can stand in front of it (a
toolchain PPA, conda's), so the value is inferred: a rule decides a warning on it, never an
error (``warn_when: {fact: platform.glibcxx, inferred: true}``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

from vllm_doctor.facts.model import Facts

# A distribution as os-release's ID, from the names its releases print (collect-env's
# ``OS`` line is platform.freedesktop_os_release's PRETTY_NAME, or lsb_release's)
_NAMES = (
    ("ubuntu", re.compile(r"\bUbuntu\s+(?P<version>\d\d\.\d\d)")),
    ("debian", re.compile(r"\bDebian(?:\s+GNU/Linux)?\s+(?P<version>\d+)")),
    ("rhel", re.compile(r"\bRed Hat Enterprise Linux(?:\s+\w+)*?\s+(?P<version>\d+)(?:\.\d+)?\b")),
    ("rocky", re.compile(r"\bRocky Linux\s+(?P<version>\d+)")),
    ("almalinux", re.compile(r"\bAlmaLinux\s+(?P<version>\d+)")),
)
# `--platform os=ID-VERSION` (ubuntu-22.04, debian-12, rhel-9)
STATED = re.compile(r"^(?P<id>[a-z][a-z0-9]*)-(?P<version>\d+(?:\.\d+)?)$")
TABLE = "knowledge/data/distro_libstdcxx.yaml"


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    from vllm_doctor.yaml_io import safe_load

    text = resources.files("vllm_doctor.knowledge").joinpath("data/distro_libstdcxx.yaml")
    return safe_load(text.read_text(encoding="utf-8")) or {}


def os_from_text(text: str) -> str | None:
    """``ubuntu 22.04`` from ``Ubuntu 22.04.5 LTS (x86_64)``, ``debian 12`` from ``Debian
    GNU/Linux 12 (bookworm)``; None for a distribution the table does not name."""
    for os_id, pattern in _NAMES:
        found = pattern.search(text)
        if found:
            return f"{os_id} {found.group('version')}"
    return None


def os_from_word(value: str) -> str | None:
    """``ubuntu 22.04`` from the ``--platform os=`` value ``ubuntu-22.04``; None if malformed."""
    found = STATED.match(value.strip().lower())
    return f"{found.group('id')} {found.group('version')}" if found else None


def _entry(os_release: str) -> dict[str, Any] | None:
    table = _table()
    os_id, _, version = os_release.partition(" ")
    os_id = (table.get("same_as") or {}).get(os_id, os_id)
    releases = (table.get("releases") or {}).get(os_id) or {}
    # a point release keeps its major's libstdc++ where the table lists the major only
    return releases.get(version) or releases.get(version.split(".")[0])


def infer_glibcxx(facts: Facts) -> None:
    """``platform.glibcxx`` inferred from ``platform.os`` where nothing read it (the library
    itself, or a stated ``--platform glibcxx=``); left as it was for a release the table
    does not list."""
    os_release = facts.value("platform.os")
    if os_release is None:
        return
    entry = _entry(str(os_release))
    if entry is None:
        if "platform.glibcxx" not in facts:
            facts.mark_missing(
                "platform.glibcxx",
                f"{os_release}: not a release whose system libstdc++ the doctor knows ({TABLE})",
            )
        return
    level = "3.4." + str(entry["so"]).rsplit(".", 1)[-1]
    facts.infer(
        "platform.glibcxx",
        level,
        f"the system libstdc++ of {os_release} ({entry['package']}: libstdc++.so."
        f"{entry['so']}, {entry['source']}); a newer one loaded first would raise it",
    )
