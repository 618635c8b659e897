"""Sizes as deployments write them: a Kubernetes quantity (``16Gi``) or a Docker size
(``16gb``, ``8g``), in MiB; and the container runtimes' /dev/shm when nothing sizes it. Read by
the manifest, compose and container run readers alike."""

from __future__ import annotations

import re
from typing import Any

from vllm_doctor.errors import InputError

# Docker's and containerd's /dev/shm when nothing sizes it
DEFAULT_SHM_MIB = 64


_K8S_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([KMGTPE]i|[kMGTPE])?$")


_K8S_FACTORS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}


# Docker's sizes (shm_size: 16gb, 8g, 1024m): binary, any case, an optional b
_DOCKER_QUANTITY = re.compile(r"(?i)^(\d+(?:\.\d+)?)\s*([bkmgtp])?b?$")


def quantity_mib(text: Any, docker: bool = False, where: str = "") -> int | None:
    """A Kubernetes quantity (``16Gi``, ``512Mi``, ``1G``) or, with ``docker``, a Docker size
    (``16gb``, ``8g``, a byte count) in MiB; None when it is not a size; InputError (naming
    ``where``) for a size no machine has (a 400-digit number), computed exactly, never as
    a float that overflows."""
    from fractions import Fraction

    from vllm_doctor.bounds import MAX_MEMORY_MIB

    raw = str(text).strip()
    match = (_DOCKER_QUANTITY if docker else _K8S_QUANTITY).match(raw[:100])
    if not match or len(raw) > 100:
        if len(raw) > 100 and raw[:100].strip().isdigit():
            raise InputError(where or "size", f"a {len(raw)}-character size: no machine has it")
        return None
    if docker:
        factor = 1 << (10 * "bkmgtp".index((match.group(2) or "b").lower()))
    else:
        factor = _K8S_FACTORS[match.group(2)]
    mib = int(Fraction(match.group(1)) * factor) >> 20
    if mib > MAX_MEMORY_MIB:
        raise InputError(where or "size", f"{raw[:40]!r} is more memory than any machine has")
    return mib
