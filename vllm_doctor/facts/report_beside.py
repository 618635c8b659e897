"""What a pasted report shows beside `collect-env`'s own keys: the `nvidia-smi` table (the
driver's version, the GPUs' names) and `pip show` blocks.

Read only where the report's own line is absent or says ``Could not collect`` (collect-env in
a container without nvidia-smi, torch's own collect_env on WSL or Windows, a report cut before
its GPU section): each value is the reporter's paste, with the line it came from as detail.
"""

from __future__ import annotations

import re

# `| NVIDIA-SMI 575.51.02   Driver Version: 576.02   CUDA Version: 12.9 |` (the header of
# every nvidia-smi table; under WSL2 the driver is the Windows host's)
_SMI_HEADER = re.compile(
    r"NVIDIA-SMI\s+\d+\.\d+(?:\.\d+)?\s+Driver Version:\s*(?P<driver>\d+\.\d+(?:\.\d+)?)\b"
)
# `|   0  NVIDIA GeForce RTX 4090        On  |   00000000:65:00.0 Off |   Off |`: index, name,
# persistence mode, then the PCI bus id in the next column
_SMI_ROW = re.compile(
    r"^\s*\|\s*(?P<idx>\d{1,3})\s+(?P<name>\S(?:[^|]{0,80}?\S)?)\s+(?:On|Off)\s*\|"
    r"\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\b"
)
# `nvidia-smi -L`: `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`
UUID_TAIL = re.compile(r"\s*\(UUID:\s*[^)]*\)\s*$")
_PIP_SHOW_NAME = re.compile(r"^\s*Name:\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s*$")
_PIP_SHOW_VERSION = re.compile(r"^\s*Version:\s*(?P<ver>\d[\w.+!\-]*)\s*$")


def smi_driver(lines: list[str]) -> tuple[str, str] | None:
    """(driver version, the header line) from a pasted nvidia-smi table, else None."""
    for line in lines:
        m = _SMI_HEADER.search(line)
        if m:
            return m.group("driver"), line.strip()
    return None


def smi_gpus(lines: list[str]) -> list[tuple[int, str, str]]:
    """(index, name, line) of each GPU row of a pasted nvidia-smi table; a name nvidia-smi
    cut short (``NVIDIA RTX PRO 6000 Blac...``) is kept as shown (the GPU table may not know
    it: its capability is then missing, never guessed)."""
    found: dict[int, tuple[int, str, str]] = {}
    for line in lines:
        m = _SMI_ROW.match(line)
        if m:
            index = int(m.group("idx"))
            found.setdefault(index, (index, m.group("name"), line.strip()))
    return [found[i] for i in sorted(found)]


def pip_show(lines: list[str]) -> list[tuple[str, str, str]]:
    """(name, version, detail) of each `pip show NAME` block pasted (``Name:`` then
    ``Version:`` on the next line)."""
    out: list[tuple[str, str, str]] = []
    for i, line in enumerate(lines[:-1]):
        name = _PIP_SHOW_NAME.match(line)
        if not name:
            continue
        version = _PIP_SHOW_VERSION.match(lines[i + 1])
        if version:
            out.append(
                (
                    name.group("name"),
                    version.group("ver"),
                    f"pip show: {line.strip()} / {lines[i + 1].strip()}",
                )
            )
    return out
