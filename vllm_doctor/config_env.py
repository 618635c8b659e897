"""Settings from the environment, the way CI systems configure tools (as ruff and trivy read
theirs): ``VLLM_DOCTOR_<KEY>`` for each key of the settings file, dashes as underscores.

    VLLM_DOCTOR_FAIL_ON=warning        VLLM_DOCTOR_FORMAT=sarif       VLLM_DOCTOR_STRICT=true
    VLLM_DOCTOR_SELECT=MODEL,PAR       VLLM_DOCTOR_IGNORE=HW007       VLLM_DOCTOR_DEFAULT_RULES=false
    VLLM_DOCTOR_RULES_DIR=ci/rules     VLLM_DOCTOR_IGNORE_FILE=ci/doctor-ignore.yaml

Order: the command line, then the environment, then the settings file, then the defaults. Lists
are comma-separated (``RULES_DIR`` takes the path separator, ``:`` on Linux); booleans are
1/true/yes/on or 0/false/no/off; relative paths are taken from the working directory. An empty
variable counts as unset (CI templates often export empty ones). ``ignore-entries`` has no
variable: its entries are tables.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vllm_doctor.config import _KEYS, Config
from vllm_doctor.errors import InputError

PREFIX = "VLLM_DOCTOR_"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# key → the Config field it fills
_FIELDS = {
    "select": "select",
    "ignore": "ignore",
    "fail-on": "fail_on",
    "strict": "strict",
    "format": "format",
    "rules-dir": "rules_dirs",
    "default-rules": "default_rules",
    "ignore-file": "ignore_file",
}


def variable(key: str) -> str:
    """The environment variable of a settings key: ``fail-on`` → ``VLLM_DOCTOR_FAIL_ON``."""
    return PREFIX + key.upper().replace("-", "_")


def _value(key: str, name: str, text: str):
    kind = _KEYS[key][0]
    if kind is bool:
        word = text.strip().lower()
        if word not in _TRUE + _FALSE:
            raise InputError(name, f"{text!r} is not a boolean (1/true/yes/on or 0/false/no/off)")
        return word in _TRUE
    if key == "rules-dir":
        return [Path(p) for p in text.split(os.pathsep) if p.strip()]
    if key == "ignore-file":
        return Path(text)
    if kind is list:
        return [p.strip() for p in text.split(",") if p.strip()]
    from vllm_doctor.report import FAIL_ON, FORMATS

    allowed = {"fail-on": FAIL_ON, "format": FORMATS}.get(key)
    if allowed and text.strip() not in allowed:
        raise InputError(name, f"{text!r} is not one of {', '.join(allowed)}")
    return text.strip()


def environment_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings the environment gives, by Config field (an unset or empty variable is
    absent); a value that is not one is exit 2 naming the variable."""
    environ = os.environ if environ is None else environ
    found = {}
    for key, field in _FIELDS.items():
        text = environ.get(variable(key), "")
        if text.strip():
            found[field] = _value(key, variable(key), text)
    return found


def with_environment(config: Config, environ: Mapping[str, str] | None = None) -> Config:
    """The settings file's configuration with the environment's settings over it."""
    return dataclasses.replace(config, **environment_settings(environ))
