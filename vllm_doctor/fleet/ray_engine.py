"""Collect every node's facts over a running Ray cluster: one task per alive node.

Each task is pinned to its node with ``NodeAffinitySchedulingStrategy(soft=False)``, asks for no
CPU (a cluster whose CPUs vLLM holds still runs it) and is never retried; all of them run at
once and the main process waits for them with one deadline. A node whose task has not answered
by then is a node that did not answer (its task is cancelled), never a hung doctor; a task that
failed (the doctor could not be imported there) says why.

The doctor reaches the nodes one of two ways, and the report says which:

- ``upload`` (the default): the doctor's package is shipped in the tasks' runtime environment
  (``py_modules``), with the two pure-Python libraries its collectors import (``packaging``, and
  ``pynvml`` for the GPUs), so every node runs this very doctor;
- ``installed``: the nodes import the doctor installed in their own Python (the container image
  built from this repository's Dockerfile has it).

Once every node has answered (or the deadline has passed and the late tasks are cancelled),
the driver's disconnect from Ray (a quarter of a second spent waiting in Ray's core worker, no
CPU) runs on a thread while the main process judges the nodes and writes the report;
``RayRun.disconnected()`` waits for it before the command exits.

Ray is imported here only, and this module only by the ``fleet`` command.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts
from vllm_doctor.fleet.node import Node

RAY_MISSING = 'Ray is not installed: pip install "vllm-preflight[ray]"'
DOCTOR_FROM = ("upload", "installed")


@dataclass
class RayRun:
    nodes: list[Node]
    address: str
    how: str  # how the doctor reached the nodes, in words
    connect_s: float  # ray.init
    collect_s: float  # the tasks, from submission to the last answer or the deadline
    disconnect: threading.Thread | None = None  # ray.shutdown(), under way

    def disconnected(self) -> None:
        """Wait until the driver has left the cluster (before the process exits)."""
        if self.disconnect is not None:
            self.disconnect.join()


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--ray", RAY_MISSING) from None
    return ray


def _runtime_env(doctor_from: str) -> tuple[dict[str, Any], str]:
    if doctor_from == "installed":
        return {}, "the doctor installed on each node (--doctor-from installed)"
    import vllm_doctor

    modules = [str(Path(vllm_doctor.__file__).parent)]
    for name in ("packaging", "pynvml"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        if module.__file__ is None:
            continue
        path = Path(module.__file__)
        modules.append(str(path.parent if path.name == "__init__.py" else path))
    env = {"py_modules": modules, "excludes": ["__pycache__", "*.pyc"]}
    return env, (
        "Ray's runtime environment: this doctor's package shipped to every node (py_modules: "
        + ", ".join(Path(m).name for m in modules)
        + ")"
    )


def _resolve_address(address: str | None) -> str:
    return address or os.environ.get("RAY_ADDRESS") or "auto"


def connect(address: str | None, doctor_from: str = "upload") -> tuple[Any, str, str, float]:
    """(ray, the address, how the doctor reaches the nodes, seconds ray.init took); the caller
    calls ``ray.shutdown()``."""
    if doctor_from not in DOCTOR_FROM:
        raise InputError("--doctor-from", f"{doctor_from!r} is not one of {', '.join(DOCTOR_FROM)}")
    ray = import_ray()
    where = _resolve_address(address)
    runtime_env, how = _runtime_env(doctor_from)
    start = time.perf_counter()
    try:
        with _from_an_empty_folder():
            ray.init(
                address=where,
                runtime_env=runtime_env or None,
                logging_level="ERROR",
                log_to_driver=False,
                configure_logging=False,
            )
    except (ConnectionError, ValueError, RuntimeError) as err:
        raise InputError("--ray", f"cannot connect to a Ray cluster at {where}: {err}") from None
    return ray, where, how, time.perf_counter() - start


@contextmanager
def _from_an_empty_folder() -> Iterator[None]:
    """Ray puts the driver's working folder at the front of its workers' module path for the
    job: run from a source checkout (or a folder holding another vllm_doctor), the tasks on that
    machine would import it instead of the doctor shipped to the nodes or installed there. The
    driver connects from an empty folder of its own, then goes back."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="vllm-doctor-ray-") as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(here)


def collect_over_ray(
    address: str | None,
    serve_argv: list[str] | None,
    deadline_s: float,
    doctor_from: str = "upload",
    meanwhile: Callable[[], None] | None = None,
    on_answer: Callable[[Node, list[Node]], None] | None = None,
) -> RayRun:
    """Every alive node's facts, or why not, within ``deadline_s`` of the tasks' submission.

    While the nodes work, this process does what needs no answer (``meanwhile()``: the rules
    loaded), then takes each node's answer as it comes (``on_answer(node, nodes)``: the node
    judged while the others still collect)."""
    ray, where, how, connect_s = connect(address, doctor_from)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from vllm_doctor.fleet.remote import collect_node

    try:
        task = ray.remote(num_cpus=0, max_retries=0)(collect_node)
        alive = [n for n in ray.nodes() if n.get("Alive")]
        head_ids = {
            n["NodeID"] for n in alive if "node:__internal_head__" in n.get("Resources", {})
        }
        started = time.perf_counter()
        pending: dict[Any, Node] = {}
        nodes: list[Node] = []
        for info in alive:
            node = Node(
                node_id=info["NodeID"],
                ip=info.get("NodeManagerAddress"),
                engine="ray",
                source="a Ray task pinned to the node",
                offered_gpus=int(info.get("Resources", {}).get("GPU", 0)),
                is_head=info["NodeID"] in head_ids,
                hostname=info.get("NodeManagerHostname"),
            )
            nodes.append(node)
            ref = task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(info["NodeID"], soft=False)
            ).remote(serve_argv)
            pending[ref] = node
        if meanwhile is not None:
            meanwhile()
        late = list(pending)
        while late:
            left = deadline_s - (time.perf_counter() - started)
            if left <= 0:
                break
            ready, late = ray.wait(late, num_returns=1, timeout=left)
            for ref in ready:
                _answer(ray, pending[ref], ref, started)
                if on_answer is not None and pending[ref].answered:
                    on_answer(pending[ref], nodes)
        for ref in late:
            pending[ref].silent = (
                f"no answer within the {deadline_s:g} s deadline (its task was cancelled; the "
                "node's raylet, its Python or a collector there is stuck)"
            )
            ray.cancel(ref, force=True)
        collect_s = time.perf_counter() - started
    except BaseException:
        ray.shutdown()
        raise
    # nothing more is asked of Ray: leave it while the caller judges and reports
    disconnect = threading.Thread(target=ray.shutdown, name="ray-shutdown", daemon=False)
    disconnect.start()
    nodes.sort(key=lambda n: (not n.is_head, n.ip or "", n.node_id))
    return RayRun(nodes, where, how, connect_s, collect_s, disconnect)


def _answer(ray: Any, node: Node, ref: Any, started: float) -> None:
    try:
        answer = ray.get(ref, timeout=0)
    except Exception as err:  # the task failed on the node: its first line says why
        cause = getattr(err, "cause", None) or err
        text = str(cause).strip().splitlines()
        node.silent = f"the doctor failed there: {type(cause).__name__}: {text[-1] if text else ''}"
        return
    node.facts = Facts.from_dict(answer["document"])
    node.crashes = list(answer.get("crashes") or [])
    node.seconds = float(answer.get("seconds") or 0.0)
    node.hostname = answer.get("hostname") or node.hostname
    doctor = answer.get("doctor") or {}
    node.doctor = f"{doctor.get('version')} at {Path(str(doctor.get('path'))).parent}"
