"""The fleet's report in every format the gate supports.

Text: the nodes (who, where, GPUs, how long each took), the findings across the nodes with the
nodes grouped by value, what the nodes agree on (-v), then each node's own findings. The machine
formats are `check --manifest`'s several-target documents (report/formats.py render_targets):
one target for the fleet and one per node that answered, every finding's message starting with
the node it is about ("node 1a2b3c4d@10.0.0.2: ..."); JSON adds the nodes' identities.
"""

from __future__ import annotations

import io
from typing import Any

from vllm_doctor import __version__
from vllm_doctor.fleet.judge import FleetResult
from vllm_doctor.fleet.quantities import COMPARED
from vllm_doctor.report.output import dump_json, escape


def render(result: FleetResult, fmt: str, verbose: bool = False, to_file: bool = False) -> str:
    if fmt == "text":
        return _text(result, verbose, to_file)
    from vllm_doctor.commands.check import render_document
    from vllm_doctor.report.formats import render_targets

    docs = result.docs
    if fmt == "json":
        return dump_json(
            {
                "schema_version": 1,
                "tool": {"name": "vllm-doctor", "version": __version__},
                "failing": result.failing(),
                "fleet": {
                    "how": result.how,
                    "nodes": [n.identity() for n in result.nodes],
                    "timings_s": {k: round(v, 4) for k, v in result.timings.items()},
                    "distinct_fact_sets_judged": result.judged,
                },
                "targets": [_json_target(doc) for doc in docs],
            }
        )
    return render_targets(docs, fmt, lambda doc: render_document(doc, fmt, to_file=to_file))


def _json_target(doc: Any) -> dict[str, Any]:
    data = doc.to_dict()
    target = doc.target
    data["target"]["subject"] = target.subject
    if target.node is not None:
        data["node"] = target.node.identity()
    for finding in (*data["findings"], *data["undecided"], *data["suppressed"]):
        finding["node"] = target.subject
    return data


def _text(result: FleetResult, verbose: bool, to_file: bool) -> str:
    from vllm_doctor.report.output import make_console, stdout_is_terminal
    from vllm_doctor.report.text import _finding, render_text

    buffer = io.StringIO()
    console = make_console(buffer, not to_file and stdout_is_terminal())
    nodes = result.nodes
    console.print(f"[bold]Fleet[/] of {len(nodes)} nodes: {escape(result.how)}")
    for node in nodes:
        role = " (head)" if node.is_head else ""
        gpus = "?" if node.gpus is None else str(node.gpus)
        if node.answered:
            took = f"answered in {node.seconds:.2f} s" if node.seconds is not None else "read"
            state = f"{took} from {node.source}"
        else:
            state = f"[red]no facts[/]: {escape(node.silent or '')}"
        host = node.hostname or (node.facts.value("host.name") if node.facts else None)
        named = f" {escape(str(host))}" if host and host != node.label else ""
        console.print(f"  {escape(node.label)}{role}{named}: {gpus} GPUs; {state}")
        if verbose and node.doctor:
            console.print(f"      doctor: {escape(node.doctor)}")
    fleet = result.fleet
    console.print("")
    console.print(f"[bold]Across the nodes[/] ({fleet.rules_checked} fleet rules)")
    if not fleet.applies:
        console.print("    no difference between the nodes is a known failure")
    for finding in fleet.applies:
        _finding(console, fleet, finding, verbose)
    for finding in fleet.undecided:
        needs = "; ".join(f"{m.path}: {m.reason}" for m in finding.missing) or "the vLLM version"
        mark = "[red]✗[/]" if fleet.is_failing(finding) else "[dim]?[/]"
        console.print(
            f"  {mark} {finding.rule.code} cannot decide: {escape(finding.rule.summary)} — "
            f"{escape(needs)}"
        )
    for note in fleet.notes:
        console.print(f"  [dim]note:[/] {escape(note)}")
    agreed = _agreement(result)
    if agreed:
        console.print("  [green]✓[/] the nodes agree on " + escape("; ".join(agreed)))
    for doc in result.node_docs:
        console.print("")
        console.print(f"[bold]Node {escape(doc.target.name)}[/] ({escape(doc.target.where)})")
        if verbose:
            render_text(doc, console, verbose=True)
            continue
        if not doc.applies:
            undecided = f"; {len(doc.undecided)} undecided" if doc.undecided else ""
            console.print(f"    none of the {doc.rules_checked} rules applies{undecided}")
        render_text(doc, console, quiet=True)
    return buffer.getvalue()


def _agreement(result: FleetResult) -> list[str]:
    """'vLLM version 0.24.0' for each quantity every node has the same value of."""
    facts = result.fleet.facts
    agreed = []
    for q in COMPARED:
        if facts.value(f"fleet.{q.name}.distinct") == 1:
            groups = facts.value(f"fleet.{q.name}.nodes") or []
            value = str(groups[0]).split(": ", 1)[0] if groups else ""
            agreed.append(f"{q.what} {value}")
    return agreed


def summary_lines(result: FleetResult) -> list[str]:
    """One line for the fleet and one per node, for stderr."""
    lines = [f"fleet ({len(result.nodes)} nodes): {result.fleet.summary_line()}"]
    for doc in result.node_docs:
        lines.append(f"node {doc.target.name}: {doc.summary_line()}")
    silent = [n for n in result.nodes if not n.answered]
    if silent:
        lines.append(f"{len(silent)} node(s) gave no facts: {', '.join(n.label for n in silent)}")
    return lines
