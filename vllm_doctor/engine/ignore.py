"""The ignore file: findings a team has accepted, each with a reason and an optional expiry.

```yaml
ignore:
  - code: HW001            # a rule code or a code prefix
    reason: PCIe box, custom all-reduce already disabled in our launcher
    expires: 2027-01-31    # optional; after this date the entry stops suppressing and says so
```
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_doctor import yaml_io
from vllm_doctor.bounds import read_text
from vllm_doctor.engine.evaluate import NOT_APPLIES, Finding
from vllm_doctor.errors import InputError


@dataclass(frozen=True)
class IgnoreEntry:
    """One accepted finding of an ignore file: the rule, why, and until when."""

    code: str
    reason: str
    expires: dt.date | None
    where: str = ""  # "file:ignore[i]", for messages


def load_ignore_file(path: Path) -> list[IgnoreEntry]:
    """The entries of an ignore file (``ignore:`` list); InputError for a file that is not
    one."""
    name = str(path)
    text = read_text(path, "ignore file", "yaml")
    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as err:
        raise InputError(
            name, f"the ignore file does not parse as YAML: {str(err).splitlines()[0]}"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("ignore"), list):
        raise InputError(name, "needs a top-level `ignore:` list")
    return parse_entries(data["ignore"], name, "ignore")


def parse_entries(items: list[Any], name: str, key: str = "ignore") -> list[IgnoreEntry]:
    """Entries of an ignore file or of a configuration's ``ignore-entries`` list."""
    entries = []
    for i, item in enumerate(items):
        where = f"{name}:{key}[{i}]"
        if not isinstance(item, dict):
            raise InputError(where, "each entry is a mapping with code and reason")
        code, reason, expires = item.get("code"), item.get("reason"), item.get("expires")
        if not isinstance(code, str) or not code.strip():
            raise InputError(where, "needs `code`")
        if not isinstance(reason, str) or not reason.strip():
            raise InputError(where, "needs a `reason`: say why this finding is accepted")
        if expires is not None:
            expires = _expiry(where, expires)
        entries.append(IgnoreEntry(code.strip().upper(), reason.strip(), expires, where))
    return entries


def _expiry(where: str, value: object) -> dt.date:
    """The day an entry expires: a date (YYYY-MM-DD), or the day of a date and time."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            pass
        try:  # `2027-01-31T10:00:00`, `2027-01-31 10:00:00+02:00`: the date as written
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).date()
        except ValueError:
            pass
    raise InputError(where, f"expires {value!r} is not a date (YYYY-MM-DD)")


def unknown_entries(entries: list[IgnoreEntry], known_codes: list[str]) -> list[IgnoreEntry]:
    """Entries whose code is no rule code and no prefix of one (a typo, or a removed rule)."""
    return [e for e in entries if not any(code.startswith(e.code) for code in known_codes)]


def apply_ignores(
    findings: list[Finding], entries: list[IgnoreEntry], today: dt.date | None = None
) -> list[str]:
    """Mark the findings an entry accepts; returns notes about expired entries.

    Only findings that apply or are undecided are marked: a rule that does not apply has
    nothing to accept, and stays a passing check in every format.
    """
    today = today or dt.date.today()
    notes = []
    for entry in entries:
        expired = entry.expires is not None and entry.expires < today
        if expired:
            notes.append(
                f"ignore entry for {entry.code} expired on {entry.expires}: "
                f"no longer suppressed ({entry.reason})"
            )
            continue
        for finding in findings:
            if finding.rule.code.startswith(entry.code) and finding.verdict != NOT_APPLIES:
                finding.suppressed = entry.reason
    return notes
