"""Project configuration for `check`: `[tool.vllm-doctor]` in pyproject.toml or `.vllm-doctor.toml`.

The file is found from the working directory upward, as ruff finds its own: in each directory
`.vllm-doctor.toml` wins over `pyproject.toml`, and a pyproject.toml counts only when it has a
`[tool.vllm-doctor]` table (one that does not mention it is not even parsed, so another
project's broken pyproject.toml is no error here). The first directory that has one ends the
search, and so does the repository's root (a directory with `.git`) or the user's home: a
`/tmp/.vllm-doctor.toml` never configures a checkout under /tmp. Outside a repository and the
home directory only the working directory itself is searched. Every key may also be given on
the command line, and the command line wins (a list given there replaces the file's).

A settings file can turn parts of the gate off (`default-rules = false`, `select`, `ignore`,
the ignore entries, `fail-on = "never"`): every run says on stderr and in every format which
file it used and what that turned off (``Config.describe``). CI that runs on a repository it
does not trust locks the gate with `check --locked` or ``VLLM_DOCTOR_LOCKED=1``: the file's
keys that choose rules or the threshold are then not applied (``Config.lock``), whatever the
file says; the command line still chooses them.

```toml
[tool.vllm-doctor]          # in .vllm-doctor.toml the keys sit at the top level
select = ["MODEL", "PAR"]
ignore = ["HW007"]
fail-on = "warning"
strict = true
format = "sarif"
rules-dir = ["ci/doctor-rules"]   # added to the shipped rules; relative to this file
default-rules = true              # false: only the rules-dir rules (as --no-default-rules)
ignore-file = "doctor-ignore.yaml"
ignore-entries = [
  {code = "HW001", reason = "PCIe box; the launcher disables custom all-reduce", expires = 2027-01-31},
]
```
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError

PROJECT_FILE = ".vllm-doctor.toml"
LOCK_ENV = "VLLM_DOCTOR_LOCKED"
# the keys that choose which rules run, which findings count and the threshold: not applied
# from a file under --locked
GATE_KEYS = ("default-rules", "select", "ignore", "ignore-file", "ignore-entries", "fail-on")
MAX_CONFIG_BYTES = 1 << 20  # a settings file is a few lines; a pyproject.toml some KB
PYPROJECT = "pyproject.toml"
TABLE = "vllm-doctor"

# key → (type check, what it must be); keys use dashes as in ruff's files
_KEYS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "select": (list, "a list of rule codes or prefixes"),
    "ignore": (list, "a list of rule codes or prefixes"),
    "fail-on": (str, "one of error, warning, info, never"),
    "strict": (bool, "true or false"),
    "format": (str, "an output format name"),
    "rules-dir": (list, "a list of rule directories"),
    "default-rules": (bool, "true or false"),
    "ignore-file": (str, "a path to an ignore file"),
    "ignore-entries": (list, "a list of {code, reason, expires} tables"),
}


@dataclass
class Config:
    path: Path | None = None  # the file the settings came from; None when there is none
    select: list[str] | None = None
    ignore: list[str] | None = None
    fail_on: str | None = None
    strict: bool | None = None
    format: str | None = None
    rules_dirs: list[Path] | None = None
    default_rules: bool | None = None
    ignore_file: Path | None = None
    ignore_entries: list[dict[str, Any]] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)  # the file's keys --locked set aside

    def turned_off(self) -> list[str]:
        """What the file turns off of the default gate, in the file's own words."""
        off = []
        if self.default_rules is False:
            off.append("default-rules = false (the shipped rules)")
        if self.select:
            off.append(f"select = {', '.join(self.select)} (every other rule)")
        if self.ignore:
            off.append(f"ignore = {', '.join(self.ignore)}")
        if self.ignore_file is not None:
            off.append(f"ignore-file = {self.ignore_file}")
        if self.ignore_entries:
            codes = [
                str(e.get("code")) if isinstance(e, dict) else "?" for e in self.ignore_entries
            ]
            off.append(f"ignore-entries for {', '.join(codes)}")
        if self.fail_on == "never":
            off.append("fail-on = never (the exit code)")
        return off

    def lock(self) -> Config:
        """This file's settings without the keys that choose rules and the threshold."""
        if self.path is None:
            return self
        locked = Config(
            path=self.path, strict=self.strict, format=self.format, rules_dirs=self.rules_dirs
        )
        locked.not_applied = [
            k
            for k, v in (
                ("default-rules", self.default_rules),
                ("select", self.select),
                ("ignore", self.ignore),
                ("ignore-file", self.ignore_file),
                ("ignore-entries", self.ignore_entries),
                ("fail-on", self.fail_on),
            )
            if v not in (None, [])
        ]
        return locked

    def describe(self) -> str | None:
        """One line for stderr and the reports: the file used, what it turned off, what the lock
        set aside; None without a file."""
        if self.path is None:
            return None
        line = f"settings from {self.path}"
        off = self.turned_off()
        line += f"; it turns off: {'; '.join(off)}" if off else "; it turns nothing off"
        if self.not_applied:
            line += (
                f"; locked ({LOCK_ENV} or --locked), so not applied: {', '.join(self.not_applied)}"
            )
        return line


def locked_from_env() -> bool:
    return os.environ.get(LOCK_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def _read(path: Path) -> bytes:
    from vllm_doctor.bounds import read_bytes

    return read_bytes(path, "configuration file", "toml")


def _toml_load(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from vllm_doctor.bounds import ValueBoundsError, check_value

    try:
        text = _read(path).decode("utf-8")
        return check_value(tomllib.loads(text))
    except UnicodeDecodeError:
        raise InputError(str(path), "not valid TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(str(path), f"not valid TOML: {err}") from None
    except (RecursionError, ValueBoundsError) as err:  # `a = [[[[…` or a 3000-part dotted key
        detail = str(err) if isinstance(err, ValueBoundsError) else "nested too deeply"
        raise InputError(str(path), f"not a usable settings file: {detail}") from None


def _section(path: Path) -> dict[str, Any] | None:
    data = _toml_load(path)
    if path.name == PYPROJECT:
        section = data.get("tool", {}).get(TABLE) if isinstance(data.get("tool"), dict) else None
        if section is not None and not isinstance(section, dict):
            raise InputError(str(path), f"[tool.{TABLE}] must be a table")
        return section
    return data


def search_dirs(start: Path) -> list[Path]:
    """The directories searched for a settings file: ``start`` up to the repository's root
    or the user's home, whichever comes first; only ``start`` when neither is above it."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):
        home = None
    chain = [start, *start.parents]
    for i, directory in enumerate(chain):
        if directory == home or any((directory / marker).exists() for marker in (".git", ".hg")):
            return chain[: i + 1]
    return [start]


def find_config(start: Path) -> Path | None:
    """The nearest configuration file from ``start`` upward (``search_dirs``), or None."""
    for directory in search_dirs(start.resolve()):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _mentions_table(pyproject) and _section(pyproject) is not None:
            return pyproject
    return None


def _mentions_table(pyproject: Path) -> bool:
    """Whether a pyproject.toml names the table at all: one that does not cannot configure
    the doctor, so it is not parsed (a broken one of another project is not our input)."""
    return TABLE.encode() in _read(pyproject)


def load_config(path: Path) -> Config:
    """Read and check one configuration file; a wrong key or type is exit 2 with its name."""
    section = _section(path)
    if section is None:
        raise InputError(str(path), f"has no [tool.{TABLE}] table")
    where = f"{path}" + (f" [tool.{TABLE}]" if path.name == PYPROJECT else "")
    unknown = sorted(set(section) - set(_KEYS))
    if unknown:
        raise InputError(where, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    for key, value in section.items():
        kind, meaning = _KEYS[key]
        if not isinstance(value, kind) or (
            isinstance(value, list)
            and key != "ignore-entries"
            and not all(isinstance(v, str) for v in value)
        ):
            raise InputError(where, f"{key} must be {meaning}")
    from vllm_doctor.report import FAIL_ON, FORMATS

    choices = {"fail-on": FAIL_ON, "format": FORMATS}
    for key, allowed in choices.items():
        if key in section and section[key] not in allowed:
            raise InputError(where, f"{key} {section[key]!r} is not one of {', '.join(allowed)}")
    base = path.parent
    config = Config(path=path)
    config.select = section.get("select")
    config.ignore = section.get("ignore")
    config.fail_on = section.get("fail-on")
    config.strict = section.get("strict")
    config.format = section.get("format")
    if "rules-dir" in section:
        config.rules_dirs = [base / d for d in section["rules-dir"]]
    config.default_rules = section.get("default-rules")
    if "ignore-file" in section:
        config.ignore_file = base / section["ignore-file"]
    config.ignore_entries = list(section.get("ignore-entries", []))
    return config


def resolve_config(
    explicit: Path | None, use_config: bool = True, cwd: Path | None = None, locked: bool = False
) -> Config:
    """The configuration in force: ``--config FILE``, else the nearest file, else defaults;
    ``locked`` (or ``VLLM_DOCTOR_LOCKED``): without the keys that choose rules and threshold."""
    if explicit is not None:
        if not explicit.is_file():
            raise InputError(str(explicit), "no such configuration file (--config)")
        config = load_config(explicit)
    elif not use_config:
        return Config()
    else:
        found = find_config(cwd or Path.cwd())
        config = load_config(found) if found else Config()
    return config.lock() if locked or locked_from_env() else config
