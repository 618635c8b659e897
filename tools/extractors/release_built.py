"""When each release's wheel was built (KIND "release_built"), read from the wheel's own zip
entries (their newest timestamp; nothing is fetched).

A main-branch build names the tag it descends from and, when built from a modified tree, the
day it was built: ``0.20.2rc1.dev562+g1c78f76c2.d20260521``. Such a build may carry everything
main had that day, which can be more than the next minor release (0.21.0, built 2026-05-15)
brings: ``knowledge.match_release`` widens the releases a dated build lies between to the
first release built on or after that day.

Key ``@release``: ``{"built": "YYYY-MM-DD"}``. A release read from an unpacked tree without
its wheel has no key.
"""

from __future__ import annotations

import datetime as dt
import zipfile
from typing import Any

KIND = "release_built"
META = {
    "key": "@release",
    "value": {"built": "the day the release's wheel was built (its newest zip entry)"},
    "sources": ["the wheel's zip entries"],
}


def extract(release) -> dict[str, Any]:
    wheel = release.wheel
    if wheel is None:
        release.problem("no wheel beside the unpacked tree: its build day is not known")
        return {}
    with zipfile.ZipFile(wheel) as archive:
        newest = max(info.date_time for info in archive.infolist())
    return {"@release": {"built": dt.date(*newest[:3]).isoformat()}}
