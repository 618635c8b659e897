"""Project configuration for `check`: `[tool.vllm-doctor]` in pyproject.toml or `.vllm-doctor.toml`.

The file is found from the working directory upward, as ruff finds its own: in each directory
`.vllm-doctor.toml` wins over `pyproject.toml`, and a pyproject.toml counts only when it has a
`[tool.vllm-doctor]` table (one that does not mention it is not even parsed, so another
project's broken pyproject.toml is no error here). The first directory that has one ends the
search. Every key may also be given on the command line, and the command line wins (a list
given there replaces the file's).

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

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError

PROJECT_FILE = ".vllm-doctor.toml"
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


def _toml_load(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as err:
        raise InputError(str(path), f"cannot read the configuration: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(str(path), f"not valid TOML: {err}") from None


def _section(path: Path) -> dict[str, Any] | None:
    data = _toml_load(path)
    if path.name == PYPROJECT:
        section = data.get("tool", {}).get(TABLE) if isinstance(data.get("tool"), dict) else None
        if section is not None and not isinstance(section, dict):
            raise InputError(str(path), f"[tool.{TABLE}] must be a table")
        return section
    return data


def find_config(start: Path) -> Path | None:
    """The nearest configuration file from ``start`` upward, or None."""
    start = start.resolve()
    for directory in (start, *start.parents):
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
    try:
        return TABLE.encode() in pyproject.read_bytes()
    except OSError as err:
        raise InputError(str(pyproject), f"cannot read the configuration: {err.strerror or err}") from None


def load_config(path: Path) -> Config:
    """Read and check one configuration file; a wrong key or type is exit 2 with its name."""
    section = _section(path)
    if section is None:
        raise InputError(str(path), f"has no [tool.{TABLE}] table")
    where = f"{path}" + (f" [tool.{TABLE}]" if path.name == PYPROJECT else "")
    unknown = sorted(set(section) - set(_KEYS))
    if unknown:
        raise InputError(where, f"unknown key(s) {', '.join(unknown)} "
                                f"(known: {', '.join(_KEYS)})")
    for key, value in section.items():
        kind, meaning = _KEYS[key]
        if not isinstance(value, kind) or (kind is list and key != "ignore-entries"
                                           and not all(isinstance(v, str) for v in value)):
            raise InputError(where, f"{key} must be {meaning}")
    from vllm_doctor.commands.check import FAIL_ON, FORMATS

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


def resolve_config(explicit: Path | None, use_config: bool = True, cwd: Path | None = None) -> Config:
    """The configuration in force: ``--config FILE``, else the nearest file, else defaults."""
    if explicit is not None:
        if not explicit.is_file():
            raise InputError(str(explicit), "no such configuration file (--config)")
        return load_config(explicit)
    if not use_config:
        return Config()
    found = find_config(cwd or Path.cwd())
    return load_config(found) if found else Config()
