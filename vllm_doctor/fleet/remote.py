"""What runs on each node: the collectors of `vllm-doctor facts --format json`, nothing else.

An engine (a Ray task pinned to the node, a Kubernetes Job's pod running `vllm-doctor facts`)
calls ``collect_node``; it returns the facts document with what the main process needs to name
the node and to say how the doctor got there. Nothing is judged on the node.
"""

from __future__ import annotations

import time
from typing import Any


def collect_node(serve_argv: list[str] | None) -> dict[str, Any]:
    """This node's facts document (``Facts.to_dict()``, as `facts --format json` prints it)."""
    start = time.perf_counter()
    import socket

    import vllm_doctor
    from vllm_doctor.facts.collect import CollectOptions, collect_facts

    # offline: a node never asks the Hub (whether it holds the model is what is asked of it)
    facts = collect_facts(CollectOptions(serve_tokens=list(serve_argv or []) or None, offline=True))
    return {
        "document": facts.to_dict(),
        "crashes": [crash.line() for crash in facts.crashes],
        "seconds": time.perf_counter() - start,
        "hostname": socket.gethostname(),
        "doctor": {"version": vllm_doctor.__version__, "path": vllm_doctor.__file__},
    }
