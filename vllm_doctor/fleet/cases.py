"""The nodes of a fleet rule's test case (``nodes:`` in a ``.cases.yaml``).

Each entry is one node: ``document:`` a facts document kept in the repository (what
`vllm-doctor facts --format json` printed on a real machine) and/or ``facts:`` flat facts (on
top of the document, or alone), ``drop:`` fact paths to remove, ``missing:`` paths or areas not
collected, and ``name``, ``ip``, ``offered_gpus`` (what Ray offers), ``head: true``, ``silent:
REASON`` (a node that did not answer). The case's ``serve:`` is the serve line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_doctor.facts.model import Facts
from vllm_doctor.fleet.node import Node


def case_nodes(entries: Any, document_path: Any) -> list[Node]:
    """``document_path(rel)`` resolves a document inside the repository (engine.cases)."""
    import json

    if not isinstance(entries, list) or not entries:
        raise ValueError("nodes must be a non-empty list of nodes")
    nodes = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"nodes[{index}] must be a mapping")
        name = str(entry.get("name", f"node{index}"))
        facts = Facts()
        if entry.get("document"):
            path: Path = document_path(str(entry["document"]))
            facts = Facts.from_dict(json.loads(path.read_text(encoding="utf-8")))
        for drop in entry.get("drop") or []:
            facts.values.pop(str(drop), None)
        for key, value in (entry.get("facts") or {}).items():
            facts.set(str(key), value, "test case")
        for key, reason in (entry.get("missing") or {}).items():
            facts.mark_missing(str(key), str(reason))
        if entry.get("document"):  # an area the document predates, unless the case gives it
            from vllm_doctor.fleet.documents import mark_unrecorded

            mark_unrecorded(facts)
        silent = entry.get("silent")
        offered = entry.get("offered_gpus")
        nodes.append(
            Node(
                node_id=name,
                ip=entry.get("ip"),
                engine="facts document",
                source=str(entry.get("document") or "test case"),
                facts=None if silent else facts,
                silent=str(silent) if silent else None,
                offered_gpus=int(offered) if offered is not None else None,
                is_head=bool(entry.get("head")),
            )
        )
    return nodes


def case_facts(entries: Any, serve: str | None, document_path: Any) -> Facts:
    """The fleet facts of a case's nodes and serve line."""
    import shlex

    from vllm_doctor.fleet.fleetfacts import fleet_facts

    return fleet_facts(case_nodes(entries, document_path), shlex.split(serve) if serve else None)
