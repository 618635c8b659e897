"""Every distribution a release requires, and with which extra (KIND "dependencies").

Keys: the canonical name of each ``Requires-Dist`` of the wheel's METADATA, and ``python``
(its ``Requires-Python``). Value::

    {"spec": ">=0.7.11,<0.8.0", "extra": null, "marker": "platform_machine == \\"x86_64\\" ..."}

``extra`` names the vLLM extra that brings the distribution (``pip install 'vllm[audio]'``),
null for a requirement of every install; ``marker`` is the environment marker without the
extra (the platforms the requirement holds on), null when there is none. A distribution both
required and named by an extra is recorded as required. The crash-log readers name the
distribution behind a missing module and the version a release asks for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from email.parser import Parser
from typing import Any

from packaging.utils import canonicalize_name

KIND = "dependencies"
META = {
    "key": "canonical distribution name from Requires-Dist",
    "value": {
        "spec": "version specifier as written (null: any version)",
        "extra": "the vLLM extra that requires it (null: every install)",
        "marker": "environment marker other than the extra (null: every platform)",
    },
    "sources": ["*.dist-info/METADATA (Requires-Dist)"],
}
_EXTRA = re.compile(r"""\s*(?:and\s+)?extra\s*==\s*["']([^"']+)["']\s*(?:and\s+)?""")


def requirements(release) -> dict[str, dict[str, Any]]:
    return requirement_table(release.requires_dist())


def requirement_table(reqs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Requirements (packaging's) by canonical name: the specifier, the extra that requires
    it and any other marker; a requirement of every install wins over an extra's."""
    out: dict[str, dict[str, Any]] = {}
    for req in reqs:
        marker = str(req.marker) if req.marker is not None else ""
        extra = _EXTRA.search(marker)
        rest = _EXTRA.sub(" ", marker).strip() if extra else marker
        value = {
            "spec": str(req.specifier) or None,
            "extra": extra.group(1) if extra else None,
            "marker": rest or None,
        }
        name = canonicalize_name(req.name)
        known = out.get(name)
        if known is None or (known["extra"] is not None and value["extra"] is None):
            out[name] = value
    return out


def extract(release) -> dict[str, Any]:
    if release.metadata is None:
        release.problem("no *.dist-info/METADATA: no requirements")
        return {}
    out = requirements(release)
    python = Parser().parsestr(release.metadata, headersonly=True).get("Requires-Python")
    if python:
        out["python"] = {"spec": python.strip(), "extra": None, "marker": None}
    return out
