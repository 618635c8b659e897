"""What `rules validate` checks of a rule against the collectors, in seconds.

A rule names fact paths; the schema (facts/schema.py) says which paths exist, but not which
input kind's collectors set them. Two mistakes pass the schema and the rule's own cases and
then make the rule decide wrongly where it runs:

* **a fact no collector sets for an input kind** (``uncollected_paths``). The open areas are
  where this happens: ``env.<NAME>`` is collected on a live host only for the variables of
  facts/environment.py's one list, ``packages.<NAME>`` only for the packages of
  facts/packages.py's ``PACKAGES``. A rule naming another one reads it as "unknown" on every
  host (or, before the listings, as "not set"). On a collect-env report a name the report's
  release does not print is known to be unknowable (the report's ``Listing``), and a
  manifest states any variable: those are not mistakes of the rule.
* **a rule that ``--strict`` could never pass on a healthy input** (``strict_blockers``): the
  rule is evaluated on healthy inputs of each kind it may read (``check --example
  healthy-h100-llama``: a report, its serve line and model config; and the same machine
  examined live) and must be decided there, or be left open only by facts that kind of input
  can never supply (``MissingFact.unknowable``). Facts of areas the healthy input does not
  include (a crash log, a deployment manifest) are not held against the rule.

``related:`` and ``defers_to:`` naming no existing rule are checked in engine/loader.py, over
the shipped rules and those of every ``--rules-dir`` together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vllm_doctor.engine.evaluate import UNDECIDED, evaluate_rule
from vllm_doctor.engine.rule import Rule
from vllm_doctor.facts.model import Facts

# areas a healthy input of these kinds does not include: a rule open on them is not to blame
_NOT_IN_HEALTHY_INPUT = ("log", "deploy")


def as_live_host(report: Facts) -> Facts:
    """A machine's facts read from its collect-env report, as the live collectors would have
    them on that machine: the environment and package collectors' listings instead of the
    report's, and what a report cannot state (P2P access, packages it does not list) known
    there (healthy: absent). ``rules validate`` judges the rules on it."""
    import copy

    from vllm_doctor.facts.environment import environment_listing
    from vllm_doctor.facts.model import Listing, Source
    from vllm_doctor.facts.packages import PACKAGES

    host = copy.deepcopy(report)
    for path in sorted(host.unknowable):
        host.missing.pop(path, None)
    host.unknowable.clear()
    host.set_listing(environment_listing())
    host.set_listing(Listing("packages", "{name} is not looked up", names=tuple(PACKAGES)))
    if "vllm.version" in host and "torch.version" in host:
        # the installed vLLM's own metadata pins the torch a healthy machine has
        host.set("torch.matches_vllm_pin", True, Source.MACHINE, "installed vLLM's metadata")
    return host


def rule_paths(rule: Rule) -> list[str]:
    """Every fact path the rule's conditions read (``when`` and ``warn_when``)."""
    paths: list[str] = []
    for condition in (rule.when, rule.warn_when):
        if condition is not None:
            paths.extend(p for p in condition.paths() if p not in paths)
    return paths


def uncollected_paths(rule: Rule) -> list[str]:
    """``file:when: problem`` for each fact of an open area that no collector of some input
    kind sets (see the module docstring)."""
    from vllm_doctor.facts.environment import PREFIXES, is_collected
    from vllm_doctor.facts.packages import PACKAGES

    problems = []
    for path in rule_paths(rule):
        area, _, name = path.partition(".")
        if not name or "*" in name:
            continue
        if area == "env" and not is_collected(name):
            problems.append(
                f"{rule.path}:when: {path} is never collected on a host: the environment "
                "collector reads only the variables of facts/environment.py (names starting "
                f"with {', '.join(PREFIXES)}, or NAMES); add it there, or the rule decides "
                "without it on every live machine"
            )
        elif area == "packages" and name not in PACKAGES:
            problems.append(
                f"{rule.path}:when: {path} is never collected on a host: facts/packages.py "
                "looks up only the packages of PACKAGES; add it there"
            )
    return problems


def strict_blockers(rules: Iterable[Rule], healthy: Mapping[str, Facts]) -> list[str]:
    """``file: problem`` for each rule that a healthy input of some kind leaves undecided
    for a fact that kind of input could supply (``--strict`` would fail every such run)."""
    problems = []
    for rule in rules:
        for kind, facts in healthy.items():
            finding = evaluate_rule(rule, facts)
            if finding.verdict != UNDECIDED:
                continue
            open_ = [
                m
                for m in finding.missing
                if not m.unknowable and m.path.split(".", 1)[0] not in _NOT_IN_HEALTHY_INPUT
            ]
            if open_ and rule.severity == "error":
                shown = "; ".join(f"{m.path} ({m.reason})" for m in open_)
                problems.append(
                    f"{rule.path}: --strict can never pass on a healthy {kind}: the rule stays "
                    f"undecided for {shown} — guard the condition with the facts that make it "
                    "relevant, or mark the fact unknowable where that input cannot know it"
                )
    return problems
