"""`rules validate`'s audit of rule ranges against the error catalogue.

A rule's signature that names a message of the error catalogue (knowledge/data/errors.json,
read from every release wheel) says which releases can print it. A rule whose affected ranges
start after the first release with the message, or end (fixed) before it, disagrees with the
wheels: most likely its range was guessed (a message present from 0.10.0 written as "0.18.0
and later"). The audit names the rule, the signature, the message and both ranges.

A message can be older than the failure a rule describes: DeepGEMM's "backend is not
available" is raised for any DeepGEMM kernel from 0.10.0, while the sparse-attention indexer
that needs it (DeepSeek-V3.2) is registered from 0.11.0. A rule whose condition requires an
architecture cannot apply before the model registry (knowledge/data/registry.json) has one of
them, so its range is compared with the later of the two releases.
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
    # ~50 releases name the first of ~47,000 spans: each parsed once
    version = {
        span["first"]: Version(span["first"]) for spans in entries.values() for span in spans
    }
    return {
        key: min(version[span["first"]] for span in spans)
        for key, spans in entries.items()
        if spans
    }


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
    longest = max(literals, key=len)
    found = []
    for key in first:
        if longest not in key:  # most of the ~19,000 messages: the one cheap test first
            continue
        template = key.partition(": ")[2]
        if all(lit in template for lit in literals) and any(
            pattern.search(template.replace("{*}", filler)) for filler in FILLERS
        ):
            found.append(key)
    return found


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text and text != "0" else None
    except InvalidVersion:
        return None


def _architecture_tests(when: Any) -> list[list[str]]:
    """The `model.architectures` tests a rule's condition cannot apply without: those on the
    `all` spine of ``when`` (a test under `any` or `not` is not required)."""
    if not isinstance(when, dict):
        return []
    if isinstance(when.get("all"), list):
        return [names for child in when["all"] for names in _architecture_tests(child)]
    if when.get("fact") != "model.architectures":
        return []
    for op in ("contains", "contains_any", "eq"):
        value = when.get(op)
        if isinstance(value, str):
            return [[value]]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return [list(value)]
    return []


def registered_from(rule: Rule, registry: Any) -> tuple[Version, list[str]] | None:
    """The first release whose model registry has an architecture the rule requires, with
    those architectures; None when the rule requires none, or one no covered release registers
    (an out-of-tree model can be served by any release)."""
    bound: tuple[Version, list[str]] | None = None
    for names in _architecture_tests(rule.raw.get("when")):
        firsts = [[Version(span.first) for span in registry.spans(name)] for name in names]
        if not all(firsts):
            continue
        since = min(min(f) for f in firsts)
        if bound is None or since > bound[0]:
            bound = (since, names)
    return bound


def rule_range_warnings(
    rule: Rule, first: dict[str, Version] | None = None, registry: Any = None
) -> list[str]:
    """``file:signatures[i]: ...`` for each signature whose catalogue message's releases
    disagree with the rule's affected ranges (a rule without ranges is not audited)."""
    if not rule.ranges:
        return []
    first = _first_releases() if first is None else first
    if registry is None:
        from vllm_doctor.knowledge import load

        registry = load("registry")
    models = registered_from(rule, registry)
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
        possible = max(since, models[0]) if models else since
        if earliest is not None and possible < earliest:
            also = (
                f" and the model registry has {'/'.join(models[1])} from {models[0]} "
                "(registry.json)"
                if models and models[0] > since
                else ""
            )
            warnings.append(
                f"{where}: the error catalogue has {key!r} from {since} "
                f"(errors.json){also}, but the rule's affected range starts at "
                f"{earliest}: check the range against the wheels"
            )
        elif latest_fix is not None and latest_fix <= since:
            warnings.append(
                f"{where}: the error catalogue has {key!r} only from {since} "
                f"(errors.json), but the rule's ranges end (fixed) at {latest_fix}"
            )
    return warnings


def range_warnings(rules: list[Rule]) -> list[str]:
    """``rules validate``'s warnings: a rule whose signature names a message of the error
    catalogue, with ranges that disagree with the releases that have the message."""
    from vllm_doctor.knowledge import load

    first = _first_releases()
    registry = load("registry")
    return [line for rule in rules for line in rule_range_warnings(rule, first, registry)]
