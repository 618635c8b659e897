"""Judge a fleet: each node by the node rules (as `check` judges one machine), the fleet by the
fleet rules (category FLEET) over the fleet facts.

A node whose cache lacks the model's config.json is judged with the config another node read
(the config is the same wherever the model is served), its derived, release and memory facts
recomputed for it; the source says which node read it. A fleet finding's evidence gains, for
each compared quantity it tested, the nodes grouped by value, so every format names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.engine.evaluate import Evidence, evaluate_rules
from vllm_doctor.facts.model import Fact, Facts
from vllm_doctor.fleet.fleetfacts import fleet_facts
from vllm_doctor.fleet.node import Node
from vllm_doctor.report.document import CheckDocument


@dataclass
class Target:
    """What a document is about, in the shape `check --manifest` targets have (the report
    formats read ``file``, ``line``, ``kind``, ``name``, ``where``, ``fact_lines``) and a
    ``subject`` every machine format puts in front of a finding's message."""

    name: str
    where: str
    kind: str  # "node" | "fleet"
    file: str = "-"
    line: int = 1
    fact_lines: dict[str, int] = field(default_factory=dict)
    node: Node | None = None

    @property
    def subject(self) -> str:
        return f"node {self.name}" if self.kind == "node" else self.name


@dataclass
class FleetResult:
    nodes: list[Node]
    fleet: CheckDocument
    node_docs: list[CheckDocument]
    how: str  # where the facts came from and how the doctor reached the nodes
    timings: dict[str, float] = field(default_factory=dict)
    judged: int = 0  # distinct sets of node facts judged (nodes that agree share one)

    @property
    def docs(self) -> list[CheckDocument]:
        return [self.fleet, *self.node_docs]

    def failing(self) -> bool:
        return any(doc.failing() for doc in self.docs)

    def crashes(self) -> list[str]:
        return [f"{n.label}: {crash}" for n in self.nodes for crash in n.crashes]


def split_rules(rules: list[Any]) -> tuple[list[Any], list[Any]]:
    """(node rules, fleet rules): the FLEET category reads the fleet facts."""
    from vllm_doctor.engine.loader import one_machine

    node_rules = one_machine(rules)
    return node_rules, [r for r in rules if r not in node_rules]


def _borrow_model(nodes: list[Node]) -> None:
    """A node without the model's config.json gets the one another node read."""
    reader = next(
        (n for n in nodes if n.facts is not None and n.facts.get("model.config_path") is not None),
        None,
    )
    if reader is None or reader.facts is None:
        return
    model = list(reader.facts.area("model"))
    for node in nodes:
        facts = node.facts
        if node is reader or facts is None or facts.get("model.config_path") is not None:
            continue
        argv = facts.value("serve.argv")
        for path, fact in model:
            source = f"{fact.source} (read on {reader.label})"
            facts.values[path] = Fact(fact.value, source, fact.detail, fact.possible)
        for key in [k for k in facts.missing if k == "model" or k.startswith("model.")]:
            del facts.missing[key]
        if isinstance(argv, list) and argv:
            from vllm_doctor.facts.collect import with_serve_line

            node.facts = with_serve_line(facts, list(argv))


def _workers_of_a_group(nodes: list[Node], driver: str | None, gpus: int | None) -> None:
    """The nodes other than the driver host workers of one group of ``len(nodes)`` nodes:
    `vllm serve` does not run there, so no rule compares the whole world with their GPUs
    (deploy.nodes, as for the pods of a LeaderWorkerSet group)."""
    for node in nodes:
        if node.facts is not None:
            _as_worker(node.facts, node, len(nodes), driver, gpus)


def _as_worker(facts: Facts, node: Node, count: int, driver: str | None, gpus: int | None) -> None:
    if node.label == driver or count < 2:
        return
    why = f"a worker node of a fleet of {count} nodes; `vllm serve` runs on {driver}"
    facts.set("deploy.nodes", count, "fleet", why)
    if isinstance(gpus, int):
        facts.set("deploy.gpus", gpus, "fleet", "GPUs the fleet offers")


class NodeJudge:
    """Each node judged by the node rules as `check` judges one machine, once per distinct set
    of facts: nodes whose facts agree share one judgement (the verdicts follow from the facts
    alone), each under its own name. ``speculate`` judges a node as soon as it answers, while
    the others still collect, with the facts the fleet's judgement will give it if every node
    answers; a guess that turns out wrong only costs that node's judgement at the end."""

    def __init__(
        self, node_rules: list[Any], loaded: list[Any], fail_on: str, strict: bool
    ) -> None:
        self.rules, self.loaded, self.fail_on, self.strict = node_rules, loaded, fail_on, strict
        self.memo: dict[str, CheckDocument] = {}
        self.judged = 0  # distinct fact sets judged

    @staticmethod
    def key(facts: Facts) -> str:
        import json

        return json.dumps(facts.to_dict(), sort_keys=True, default=str)

    def document(self, facts: Facts, target: Target) -> CheckDocument:
        key = self.key(facts)
        known = self.memo.get(key)
        if known is None:
            doc = _document(facts, self.rules, self.loaded, self.fail_on, self.strict, target)
            self.memo[key] = doc
            self.judged += 1
            return doc
        import copy

        doc = copy.copy(known)  # the same verdicts, under this node's name
        doc.facts, doc.target = facts, target
        return doc

    def speculate(self, node: Node, nodes: list[Node], head: str | None) -> None:
        if node.facts is None:
            return
        facts = Facts.from_dict(node.facts.to_dict())
        driver = _driver_label(nodes, head)
        offered = [n.offered_gpus for n in nodes]
        gpus = sum(g for g in offered if g is not None) if None not in offered else None
        _as_worker(facts, node, len(nodes), driver, gpus)
        self.document(facts, _node_target(node))


def _driver_label(nodes: list[Node], head: str | None) -> str | None:
    from vllm_doctor.fleet.fleetfacts import driver_of

    driver = driver_of(nodes, head)
    return driver.label if driver is not None else None


def _node_target(node: Node) -> Target:
    return Target(
        node.label,
        node.source,
        "node",
        file=node.source if node.engine != "ray" and node.source != "-" else "-",
        node=node,
    )


def _document(
    facts: Facts, rules: list[Any], loaded: list[Any], fail_on: str, strict: bool, target: Target
) -> CheckDocument:
    from vllm_doctor.commands.check import rulebase_version
    from vllm_doctor.commands.suggest import suggest
    from vllm_doctor.engine.evaluate import defer
    from vllm_doctor.engine.over_releases import judge_over_releases
    from vllm_doctor.knowledge import newest_release
    from vllm_doctor.report.document import RuleBase

    findings = defer(judge_over_releases(evaluate_rules(rules, facts), facts, None))
    doc = CheckDocument(facts, findings, fail_on, len(rules), 0.0, strict=strict)
    doc.rulebase = RuleBase(rulebase_version(loaded), len(loaded), newest_release())
    doc.target = target
    suggest(doc, facts, rules)  # each workaround as a command, judged with the same rules
    return doc


def _show_groups(doc: CheckDocument) -> None:
    """For every `fleet.<quantity>.distinct` a finding tested, the nodes grouped by value."""
    for finding in doc.findings:
        shown = {e.path for e in finding.evidence}
        extra = []
        for evidence in finding.evidence:
            if not evidence.path.endswith(".distinct"):
                continue
            groups_path = evidence.path[: -len(".distinct")] + ".nodes"
            fact = doc.facts.get(groups_path)
            if fact is not None and groups_path not in shown:
                extra.append(
                    Evidence(groups_path, fact.value, fact.describe_source(), "the nodes, by value")
                )
                shown.add(groups_path)
        finding.evidence.extend(extra)


def judge_fleet(
    nodes: list[Node],
    serve_argv: list[str] | None,
    rules: list[Any],
    loaded: list[Any],
    fail_on: str = "error",
    strict: bool = False,
    head: str | None = None,
    how: str = "",
    judge: NodeJudge | None = None,
) -> FleetResult:
    node_rules, fleet_rules = split_rules(rules)
    judge = judge or NodeJudge(node_rules, loaded, fail_on, strict)
    _borrow_model(nodes)
    facts = fleet_facts(nodes, serve_argv, head)
    where = f"{len(nodes)} nodes"
    fleet_doc = _document(
        facts, fleet_rules, loaded, fail_on, strict, Target(f"fleet of {where}", how, "fleet")
    )
    _show_groups(fleet_doc)
    _workers_of_a_group(nodes, facts.value("fleet.driver"), facts.value("fleet.gpus_offered"))
    node_docs = [judge.document(n.facts, _node_target(n)) for n in nodes if n.facts is not None]
    return FleetResult(nodes, fleet_doc, node_docs, how, judged=judge.judged)
