"""A serve option's value read as vLLM's converters read it: integers in range, human-readable
ints (``32k``, ``1K``), finite floats, JSON (with human-readable numbers), ``key=value`` lists;
for each release's own kind of the option (facts/release_options.py judges them per release).

A value some reading refuses is an ``UnreadValue`` (kept as written on the serve line); a value
out of every range, or no machine could mean, is bad input (``InputError``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.serveline.options import _HRINT_OR_AUTO, JSON_KINDS, OptionSpec


class UnreadValue(InputError):
    """A value the option's parser does not read as given (not an integer, not JSON, ...):
    what some release, or a newer one, may read otherwise. The serve line keeps it as the
    string it is (``ServeLine.unread``); each release's own reading is judged in
    facts/release_options.py. A value out of range, or a missing value, stays bad input."""


_HR_RE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


_BIN = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """``1k`` = 1000, ``1K`` = 1024, ``25.6k`` = 25600, ``2M`` = 2·2**20; raises ValueError.

    Decimals with a binary suffix (``1.5K``) are rejected, as vLLM does.
    """
    value = value.strip()
    match = _HR_RE.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DEC:
            return int(float(number) * _DEC[suffix])
        try:
            return int(number) * _BIN[suffix]
        except ValueError:
            raise ValueError(
                f"decimals are not allowed with binary suffixes like {suffix}; "
                f"did you mean {number}{suffix.lower()}?"
            ) from None
    return int(value)


def _human_readable_int_or_auto(value: str) -> int:
    stripped = value.strip()
    if stripped == "-1" or stripped.lower() == "auto":
        return -1
    return human_readable_int(stripped)


def _expand_json_human_readable_numbers(val: str) -> str:
    """``{"cpu_bytes_to_use": 80m}`` -> ``{"cpu_bytes_to_use": 80000000}`` (bare tokens only)."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(
            r"\b\d+(?:\.\d+)?[kKmMgGtT]\b",
            lambda m: str(human_readable_int(m.group())),
            parts[i],
        )
    return "".join(parts)


def _dotted_value(value_str: str) -> Any:
    """A dotted key's value: JSON, else a human-readable int, else the string."""
    try:
        return json.loads(value_str)
    except RecursionError:
        raise InputError(value_str[:20] + "…", "nested too deeply") from None
    except ValueError:
        pass
    try:
        return human_readable_int(value_str)
    except (ValueError, OverflowError):
        return value_str


# JSON options with human-readable numbers (`{"kv_bytes": 80m}`) are short; longer values that
# are not JSON are refused without the second pass
_HR_JSON_MAX = 64 * 1024


def _parse_json(flag: str, value: str, spec: OptionSpec, kind: str) -> Any:
    text = value
    if kind == "json_or_str" and not re.match(r"(?s)^\s*{.*}\s*$", text):
        return text
    if spec.name == "compilation-config" and text.strip().isdigit():
        # Older vLLM (CompilationConfig.from_cli): a bare number is the level.
        return {"level": int(text.strip())}
    from vllm_doctor.bounds import ValueBoundsError, json_loads

    try:
        return json_loads(text)
    except ValueBoundsError as err:
        raise InputError(flag, f"the JSON value {err}") from None
    except ValueError as err:
        if len(text) > _HR_JSON_MAX:
            # a long value that is not JSON: refused as it was given, without a second pass
            raise InputError(flag, f"invalid JSON: {err}") from None
        try:  # the fallback re-scans the text: only for short values
            return json_loads(_expand_json_human_readable_numbers(text))
        except (ValueError, OverflowError):
            pass
        raise UnreadValue(flag, f"invalid JSON: {err}") from None


_INT_MAX = 2**63 - 1


# sizes that count GPUs or processes: past this no machine exists, and the doctor's
# arithmetic (world size, per-GPU shares) and probes must never see such a number
_COUNT_MAX = 1 << 16


def _shown(value: str, limit: int = 40) -> str:
    """A value quoted in a message, cut short: an error stays one readable line."""
    return (
        repr(value)
        if len(value) <= limit
        else repr(value[:limit]) + f"… ({len(value):,} characters)"
    )


def _in_range(flag: str, spec: OptionSpec, number: int, text: str) -> int:
    low, high = -_INT_MAX - 1, _INT_MAX
    if spec.name.endswith("-parallel-size"):
        low, high = 1, _COUNT_MAX  # vLLM fails at start-up on a size below 1
    elif spec.name.endswith("-size-local"):
        low, high = 0, _COUNT_MAX  # 0 local ranks: a headless node
    if not low <= number <= high:
        shown = text.strip() if len(text.strip()) <= 24 else text.strip()[:20] + "…"
        bound = f"{low}..{high}" if low >= 0 else f"at most {high}"
        raise InputError(flag, f"{shown} is out of range ({bound})")
    return number


def _key_values(flag: str, value: str) -> dict[str, int]:
    """``image=16,video=2`` as vLLM's nullable_kvs reads it (0.8.x, and the JSON options'
    fallback up to 0.9.2): lower-cased keys, integer values."""
    out: dict[str, int] = {}
    for item in value.split(","):
        parts = [part.lower().strip() for part in item.split("=")]
        if len(parts) != 2:
            raise UnreadValue(flag, f"each item should be KEY=VALUE, got {_shown(item)}")
        try:
            number = int(parts[1])
        except ValueError:
            raise UnreadValue(flag, f"the value of {_shown(item)} is not an integer") from None
        if out.get(parts[0], number) != number:
            raise UnreadValue(flag, f"conflicting values for key {parts[0]!r}")
        out[parts[0]] = number
    return out


def _convert(flag: str, spec: OptionSpec, value: str) -> Any:
    """The value as the newest release that has the option reads it; a form only an older
    release reads (``--limit-mm-per-prompt image=5``) is read that release's way, so a value
    some release accepts is never bad input (which releases accept it is judged per release
    in facts/release_options.py)."""
    try:
        return convert_value(flag, spec, spec.kind, value)
    except UnreadValue:
        # not an older plain-string reading: those releases parse the string later
        # (0.8.2's --speculative-config is json.loads'ed when the engine starts)
        readings = [k for k in spec.older_kinds if k != "str"] + (["kvs"] if spec.kvs else [])
        for kind in readings:
            try:
                return convert_value(flag, spec, kind, value)
            except UnreadValue:
                continue
        raise


def convert_value(
    flag: str, spec: OptionSpec, kind: str, value: str, key_values: bool = False
) -> Any:
    """The value read as an option of ``kind`` (and, with ``key_values``, a JSON option whose
    converter also reads ``key=value`` pairs); InputError when that reading refuses it."""
    if kind == "json" and key_values and value.strip() and not re.match(r"^{.*}$", value):
        return _key_values(flag, value)
    if kind == "kvs":
        return _key_values(flag, value) if value else None
    try:
        if kind == "int":
            return _in_range(flag, spec, int(value.strip()), value)
        if kind == "hrint":
            if spec.name in _HRINT_OR_AUTO:
                return _in_range(flag, spec, _human_readable_int_or_auto(value), value)
            return _in_range(flag, spec, human_readable_int(value), value)
        if kind == "float":
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise InputError(flag, f"{_shown(value)} is not a finite number")
            return number
    except ValueError as err:
        detail = str(err)
        if "binary suffixes" in detail:
            raise UnreadValue(flag, f"invalid value {_shown(value)}: {detail}") from None
        if kind in ("int", "hrint") and _too_large(value):
            # a number no machine could mean (5000 digits, 1e20): bad input, whatever the
            # release (int() itself refuses past 4300 digits)
            raise InputError(flag, f"value out of range: {_shown(value)}") from None
        expected = {
            "int": "an integer",
            "hrint": "an integer (like 4096, 32k, 1K)",
            "float": "a number",
        }[kind]
        raise UnreadValue(flag, f"expected {expected}, got {_shown(value)}") from None
    except OverflowError:
        raise InputError(flag, f"value out of range: {_shown(value)}") from None
    if kind in JSON_KINDS:
        return _parse_json(flag, value, spec, kind)
    return value


def _too_large(value: str) -> bool:
    """A number, in digits or float notation, past any 64-bit integer."""
    text = value.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return len(text.lstrip("+-").lstrip("0")) > 19
    try:
        number = float(text)
    except ValueError:
        return False
    return number != number or abs(number) > _INT_MAX
