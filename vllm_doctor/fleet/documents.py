"""Nodes from facts documents: what `vllm-doctor facts --format json` printed on each node.

``--facts DIR`` reads every ``*.json`` in the folder (one node per file, named by the file
unless the document carries ``VLLM_DOCTOR_NODE_NAME``);
``--facts FILE`` or ``--facts -`` reads a stream of documents, as ``kubectl logs`` gives them:
several documents one after the other, and with ``--prefix`` every line led by
``[pod/NAME/CONTAINER] `` (the node is then the pod). A node's name is, in this order, the pod of
the prefix, the ``VLLM_DOCTOR_NODE_NAME`` the printed Job sets from the Kubernetes node's name
(``env.VLLM_DOCTOR_NODE_NAME``), the host name, the file.

Bad input is one line and exit 2: a folder without documents, text that holds none, a document
that is not a facts document.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts
from vllm_doctor.fleet.node import Node

PREFIX = re.compile(r"^\[(?:pod/)?([^/\]\s]+)(?:/[^\]\s]*)?\] ?")
MAX_DOCUMENTS = 4096


def _is_facts_document(data: Any) -> bool:
    return (
        isinstance(data, dict) and isinstance(data.get("facts"), dict) and "schema_version" in data
    )


def mark_unrecorded(facts: Facts) -> Facts:
    """A document from a doctor older than the node facts (host, NCCL library) lacks their
    areas altogether: not collected, never absent."""
    from vllm_doctor.facts.collect import HOST_AREAS

    for area in HOST_AREAS:
        if not any(p.split(".", 1)[0] == area for p in (*facts.values, *facts.missing)):
            facts.mark_missing(area, "the document was written by a vllm-doctor without it")
    return facts


def _node(data: dict[str, Any], name: str | None, source: str) -> Node:
    from vllm_doctor.bounds import check_value

    check_value(data)
    facts = mark_unrecorded(Facts.from_dict(data))
    label = (
        name
        or facts.value("env.VLLM_DOCTOR_NODE_NAME")
        or facts.value("host.name")
        or Path(source).stem
    )
    ip = facts.value("env.VLLM_DOCTOR_NODE_IP")
    crashes = [n for n in facts.notes if "crashed" in n]
    return Node(
        node_id=str(label),
        ip=str(ip) if ip else None,
        engine="facts document",
        source=source,
        facts=facts,
        hostname=facts.value("host.name"),
        crashes=crashes,
    )


def documents_in_text(text: str, source: str) -> list[Node]:
    """Every facts document in a stream (kubectl logs, with or without --prefix)."""
    by_stream: dict[str | None, list[str]] = {}
    for line in text.splitlines():
        match = PREFIX.match(line)
        key = match.group(1) if match else None
        by_stream.setdefault(key, []).append(line[match.end() :] if match else line)
    nodes: list[Node] = []
    decoder = json.JSONDecoder()
    for stream, lines in by_stream.items():
        body = "\n".join(lines)
        at = 0
        found = 0
        while True:
            start = body.find("{", at)
            if start < 0:
                break
            try:
                data, end = decoder.raw_decode(body, start)
            except (json.JSONDecodeError, RecursionError):
                at = start + 1
                continue
            at = end
            if not _is_facts_document(data):
                continue
            found += 1
            name = stream if stream and found == 1 else (f"{stream}#{found}" if stream else None)
            nodes.append(_node(data, name, source))
            if len(nodes) > MAX_DOCUMENTS:
                raise InputError(source, f"holds more than {MAX_DOCUMENTS} facts documents")
    return nodes


def read_documents(where: str) -> list[Node]:
    """The nodes of ``--facts DIR|FILE|-``."""
    from vllm_doctor.bounds import read_stdin, read_text

    if where == "-":
        text = read_stdin("facts documents", "log", "--facts -").decode("utf-8", "replace")
        nodes = documents_in_text(text, "standard input")
    else:
        path = Path(where).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
            nodes = []
            for file in files[:MAX_DOCUMENTS]:
                found = documents_in_text(read_text(file, "facts document", "json"), str(file))
                facts = found[0].facts if len(found) == 1 else None
                if facts is not None and facts.value("env.VLLM_DOCTOR_NODE_NAME") is None:
                    found[0].node_id = file.stem  # one document per file: the file names it
                nodes.extend(found)
        elif path.is_file():
            nodes = documents_in_text(read_text(path, "facts documents", "log"), str(path))
        else:
            raise InputError("--facts", f"{where}: no such file or directory")
    if not nodes:
        raise InputError(
            "--facts",
            f"{where}: no facts document (the JSON `vllm-doctor facts --format json` prints)",
        )
    names = [n.node_id for n in nodes]
    for index, node in enumerate(nodes):
        if names.count(node.node_id) > 1:
            node.node_id = f"{node.node_id}#{index + 1}"
    return nodes
