"""Advice on how to supply a missing fact, without what the user already gave.

The hints name alternatives ("run where vLLM is installed, pass --report collect-env.txt, or
--vllm-version V"). After ``--report`` the report was read: telling the user to pass it is
noise, and after ``--vllm-version 0.22.0`` so is "or --vllm-version V". Each alternative that
names an option the run already has (or a fact it already knows, such as the vLLM version
from a report) is left out; a segment whose alternatives are all gone goes with its lead
("give a vLLM version …: …"); what is left is joined again as a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_doctor.report.document import CheckDocument

# the options a hint may name, and the facts whose presence means the option is moot
_OPTION = re.compile(r"--[a-z][a-z-]*")
_KNOWN_BY_FACT = {
    "--vllm-version": "vllm.version",
    "--torch-version": "torch.version",
    "--gpus": "gpu.count",
    "--model-config": "model.config_path",
}


def given_options(doc: CheckDocument) -> set[str]:
    """The options this run was given, and those whose fact it already knows."""
    from vllm_doctor.facts.model import Source

    given = {
        f"--{key.replace('_', '-')}" for key, value in doc.inputs.items() if value
    }  # --report, --log, --model-config, --serve-config, --manifest
    facts = doc.facts
    for option, path in _KNOWN_BY_FACT.items():
        fact = facts.get(path)
        if fact is None:
            continue
        # a torch known from this machine or a report still leaves "--torch-version V" (what
        # if it were another build) worth saying; one named on the command line does not
        if option == "--torch-version" and fact.source != Source.USER:
            continue
        given.add(option)
    names = facts.get("gpu.names")
    if names is not None and names.source != Source.NVML:
        given.add("--gpu")  # named by --gpu, a report or a manifest
    if "release.judged" in facts:
        given.add(JUDGED)
    return given


def _split_top(text: str, separator: str) -> list[str]:
    """Split at ``separator`` outside parentheses and backticks. Only the characters that
    change the nesting and the separator itself are visited (a hint is split for every
    undecided finding of every run)."""
    parts, depth, ticks, start = [], 0, False, 0
    for found in re.finditer(r"[`()\[\]{}]|" + re.escape(separator), text):
        char = found.group()
        if char == "`":
            ticks = not ticks
        elif ticks:
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0:
            parts.append(text[start : found.start()])
            start = found.end()
    parts.append(text[start:])
    return parts


def _join(alternatives: list[str]) -> str:
    if len(alternatives) <= 1:
        return "".join(alternatives)
    if len(alternatives) == 2:
        return f"{alternatives[0]} or {alternatives[1]}"
    return f"{', '.join(alternatives[:-1])}, or {alternatives[-1]}"


def open_alternatives(alternatives: Iterable[str], given: set[str]) -> str:
    """The alternatives that name no given option, as one sentence ("" when none is left)."""
    kept = []
    for alternative in alternatives:
        text = alternative.strip()
        text = text.removeprefix("or ")
        if any(option in given for option in _OPTION.findall(text)):
            continue
        if text.startswith("--"):
            text = f"pass {text}"
        kept.append(text)
    return _join(kept)


# the lead of the release hint (facts/schema.py SUPPLY_HINTS), moot once a covered release
# is judged: the fact is then open for what it compares, not for the version
_VERSION_LEAD = "give a vLLM version the knowledge covers"
JUDGED = "release judged"  # in ``given`` when the run has a covered release to judge by


def tailor(how: str, given: set[str]) -> str:
    """``how`` without the alternatives that name a given option (the hint unchanged when it
    names none; "" when nothing is left to say)."""
    judged = JUDGED in given and _VERSION_LEAD in how
    if not how or not (judged or any(option in given for option in _OPTION.findall(how))):
        return how
    segments = []
    for segment in _split_top(how, "; "):
        if judged and segment.startswith(_VERSION_LEAD):
            continue
        lead, colon, rest = segment.partition(": ")
        has_lead = bool(colon) and "," in rest and "--" not in lead
        body = rest if has_lead else segment
        alternatives = _split_top(body, ", ")
        left = open_alternatives(alternatives, given)
        if not left:
            continue
        segments.append(f"{lead}: {left}" if has_lead else left)
    if segments and segments[0].startswith("plus "):  # what remains of "…; plus the serve line"
        segments[0] = "supply " + segments[0][len("plus ") :]
    return "; ".join(segments)


def tailor_findings(doc: CheckDocument) -> None:
    """Rewrite every undecided finding's advice for what this run was given."""
    given = given_options(doc)
    for finding in doc.findings:
        for missing in finding.missing:
            missing.how = tailor(missing.how, given) or ("none of the inputs given states it")
