"""`rules validate`'s audit of rule ranges against the error catalogue.

A rule's signature that names a message of the error catalogue (knowledge/data/errors.json,
read from every release wheel) says which releases can print it. A rule whose affected ranges
start after the first release with the message, or end (fixed) before it, disagrees with the
wheels: most likely its range was guessed (a message present from 0.10.0 written as "0.18.0
and later"). The audit names the rule, the signature, the message and both ranges.
"""

from __future__ import annotations

import json
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.engine.logmatch import SignatureError, compile_signature
from vllm_doctor.engine.rule import Rule

# a literal shorter than this names too many messages to say which one the rule means
MIN_LITERAL = 12


def _first_releases() -> dict[str, Version]:
    """Each catalogue message (``Class: template``) and the first release that has it."""
    from vllm_doctor.knowledge import DATA_DIR

    entries: dict[str, Any] = json.loads((DATA_DIR / "errors.json").read_text())["entries"]
    return {key: min(Version(span["first"]) for span in spans)
            for key, spans in entries.items() if spans}


# what a placeholder ({*}) of a catalogue template is replaced with before the signature is
# tried on it: a value any generic class (\d+, \w+, .+, \S+) takes, never a name a signature
# spells out (a signature that names one quantization method among many is not about every
# release that raises the message for some method). The catalogue drops the spaces around a
# placeholder (`for{*}.` is "for FlexAttention."), so the value is tried with and without.
FILLERS = ("1", " 1", "1 ", " 1 ")


def named_messages(signature: str, first: dict[str, Version]) -> list[str]:
    """Catalogue messages ``signature`` matches as vLLM prints them (each placeholder
    filled with a FILLERS value); none for a signature without a specific literal."""
    import re

    try:
        compiled = compile_signature(signature)
        pattern = re.compile(signature, re.MULTILINE)
    except (SignatureError, re.error):
        return []  # the loader reports the signature itself
    # the catalogue's templates are stripped (a message cut at a placeholder or at a string
    # concatenation), so a literal's edge spaces are too
    literals = {lit.strip() for lit in compiled.literals()}
    if not literals or max(map(len, literals)) < MIN_LITERAL:
        return []
    found = []
    for key in first:
        template = key.partition(": ")[2]
        if all(lit in template for lit in literals) and any(
                pattern.search(template.replace("{*}", filler)) for filler in FILLERS):
            found.append(key)
    return found


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text and text != "0" else None
    except InvalidVersion:
        return None


def rule_range_warnings(rule: Rule, first: dict[str, Version] | None = None) -> list[str]:
    """``file:signatures[i]: ...`` for each signature whose catalogue message's releases
    disagree with the rule's affected ranges (a rule without ranges is not audited)."""
    if not rule.ranges:
        return []
    first = _first_releases() if first is None else first
    starts = [_version(r.introduced) for r in rule.ranges]
    earliest = None if None in starts else min(v for v in starts if v is not None)
    ends = [_version(r.fixed) for r in rule.ranges]
    latest_fix = None if None in ends else max(v for v in ends if v is not None)
    warnings = []
    for i, signature in enumerate(rule.raw.get("signatures") or []):
        keys = named_messages(str(signature), first)
        if not keys:
            continue
        key = min(keys, key=lambda k: first[k])
        since = first[key]
        where = f"{rule.path}:signatures[{i}]"
        if earliest is not None and since < earliest:
            warnings.append(f"{where}: the error catalogue has {key!r} from {since} "
                            f"(errors.json), but the rule's affected range starts at "
                            f"{earliest}: check the range against the wheels")
        elif latest_fix is not None and latest_fix <= since:
            warnings.append(f"{where}: the error catalogue has {key!r} only from {since} "
                            f"(errors.json), but the rule's ranges end (fixed) at {latest_fix}")
    return warnings


def range_warnings(rules: list[Rule]) -> list[str]:
    first = _first_releases()
    return [line for rule in rules for line in rule_range_warnings(rule, first)]
