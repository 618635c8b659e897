"""Every regular expression that comes from a rule file runs on RE2, in time linear in its
input: a rule (a shipped one, or one from a `--rules-dir` nobody reviewed) cannot make the
doctor backtrack for ever (``^([0-9a-f]+)+!$`` against a 40-character hash). A pattern RE2
cannot run (back-references, look-arounds) is refused when the rule is loaded."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any


class LinearRegexError(ValueError):
    """A pattern that is not a regex, or one RE2 cannot run; the message says which."""


@lru_cache(maxsize=1)
def re2_module() -> tuple[Any, Any]:  # google-re2 ships no type information
    """google-re2 (a dependency, see pyproject.toml) and quiet options for it."""
    import re2

    options = re2.Options()
    options.log_errors = False  # our own message names the rule file
    return re2, options


def compile_linear(pattern: str, multiline: bool = False) -> Any:
    """``pattern`` compiled by RE2 (``search``/``finditer``/``match.start()`` as in ``re``)."""
    re2, options = re2_module()
    try:
        return re2.compile(("(?m)" if multiline else "") + pattern, options)
    except re2.error as err:
        try:
            re.compile(pattern)
        except re.error as bad:
            raise LinearRegexError(f"bad regex: {bad}") from None
        detail = err.args[0] if err.args else err
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise LinearRegexError(f"not a linear-time (RE2) regex: {detail}") from None
