"""The fleet's facts: every node's facts set side by side, in facts a rule can test.

``fleet_facts(nodes, serve_argv, driver)`` gives one ``Facts`` with the serve line's facts,
``vllm.version`` of the driver node (for the fleet rules' release ranges), and the ``fleet.*``
facts of vllm_doctor/facts/schema.py: each compared quantity of ``quantities.py`` grouped by
value, the nodes that did not answer, the placement vLLM's Ray executor would make
(``placement.py``), the model's files and /dev/shm on the nodes that would hold ranks.

Three-valued as every fact: a quantity a node could not collect leaves the comparison unknown
unless the known values already differ; a node that did not answer leaves every comparison
unknown (and is a finding of its own).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.fleet.node import Node
from vllm_doctor.fleet.placement import place
from vllm_doctor.fleet.quantities import COMPARED, Quantity

FLEET = "fleet"  # the source of every fleet fact; the detail says over which nodes
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _shape(quantity: Quantity, value: Any) -> str:
    if quantity.shape == "major":
        return str(value).split(".", 1)[0]
    if quantity.shape == "devices":
        names = Counter(str(v) for v in (value if isinstance(value, list) else [value]))
        return " + ".join(f"{n} x {name}" for name, n in sorted(names.items())) or quantity.absent
    return str(value)


def node_value(quantity: Quantity, facts: Facts) -> tuple[str | None, str | None]:
    """A node's value of ``quantity`` (its ``absent`` word when the node has none), or None
    and why it is unknown there."""
    if (
        quantity.installed
        and facts.get(quantity.paths[0]) is None
        and facts.value(quantity.installed) is False
    ):
        return quantity.absent, None
    parts: list[str | None] = []
    for path in quantity.paths:
        fact = facts.get(path)
        if fact is None:
            why = facts.why_missing(path)
            if why:
                return None, f"{path}: {why}"
            parts.append(None)
        else:
            parts.append(_shape(quantity, fact.value))
    if all(p is None for p in parts):
        return quantity.absent, None
    if len(parts) == 2 and parts[1] is not None:  # a library and its build
        return f"{parts[0] or '?'} build {parts[1][:16]}", None
    return str(parts[0]), None


def groups(values: dict[str, str]) -> list[str]:
    """'VALUE: node, node' per value, the most common value first."""
    by_value: dict[str, list[str]] = {}
    for label, value in values.items():
        by_value.setdefault(value, []).append(label)
    ordered = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0]))
    return [f"{value}: {', '.join(labels)}" for value, labels in ordered]


def _compare(facts: Facts, nodes: list[Node], silent: list[Node]) -> None:
    answered = [n for n in nodes if n.answered]
    over = f"{len(answered)} of {len(nodes)} nodes"
    for q in COMPARED:
        values: dict[str, str] = {}
        unknown: dict[str, str] = {}
        for node in answered:
            assert node.facts is not None
            value, why = node_value(q, node.facts)
            if value is None:
                unknown[node.label] = why or "unknown"
            else:
                values[node.label] = value
        shown = groups(values) + [f"unknown: {label} ({why})" for label, why in unknown.items()]
        if shown:
            facts.set(f"fleet.{q.name}.nodes", shown, FLEET, over)
        whom = [f"{label}: {why}" for label, why in unknown.items()] + [
            f"{n.label} did not answer" for n in silent
        ]
        if not values and not whom:
            facts.mark_missing(f"fleet.{q.name}", "no node answered")
            continue
        _count(facts, f"fleet.{q.name}.distinct", set(values.values()), whom, q.what, over)
        # a node without the package differs from one with it only where something uses it
        # (Ray on nodes whose serve line does not run on Ray): installed values counted apart
        present = {v for v in values.values() if v != q.absent}
        _count(facts, f"fleet.{q.name}.installed_distinct", present, whom, q.what, over)


def _count(facts: Facts, path: str, known: set[str], whom: list[str], what: str, over: str) -> None:
    """How many different values: decided when the known ones already differ, or when every
    node's value is known; else missing, naming the nodes whose value is unknown."""
    if len(known) > 1 or not whom:
        facts.set(path, len(known), FLEET, over)
    else:
        facts.mark_missing(path, f"the {what} is unknown on {'; '.join(whom)}")


def driver_of(nodes: list[Node], wanted: str | None) -> Node | None:
    """The node where `vllm serve` runs: the one named (--head), else the Ray head."""
    if wanted:
        for node in nodes:
            names = {node.label, node.node_id, node.ip, node.hostname}
            if wanted in names or node.node_id.startswith(wanted):
                return node
        return None
    return next((n for n in nodes if n.is_head), nodes[0] if nodes else None)


def _placement(facts: Facts, nodes: list[Node], driver: Node) -> dict[str, list[int]] | None:
    """fleet.placement.* and fleet.driver_gpus; the ranks per node label (None: unknown)."""
    backend = facts.value("serve.distributed_executor_backend")
    if backend not in (None, "ray"):
        reason = (
            f"--distributed-executor-backend {backend}: each node starts its own ranks; the "
            "launcher places them, not Ray"
        )
        facts.mark_missing("fleet.placement", reason)
        facts.set("fleet.placement.backend", str(backend), Source.SERVE)
        return None
    facts.set(
        "fleet.placement.backend",
        "ray",
        Source.SERVE if backend else FLEET,
        None if backend else "a world beyond one node's GPUs runs on Ray's executor",
    )
    gpus = {n.label: n.gpus for n in nodes if n.answered}
    unknown = [label for label, count in gpus.items() if count is None]
    if driver.gpus is not None:
        facts.set("fleet.driver_gpus", driver.gpus, FLEET, driver.label)
    else:
        facts.mark_missing("fleet.driver_gpus", f"the GPUs of {driver.label} are unknown")
    if unknown:
        facts.mark_missing("fleet.placement", f"the GPUs of {', '.join(unknown)} are unknown")
        return None
    offered = {label: int(count or 0) for label, count in gpus.items()}
    facts.set("fleet.gpus_offered", sum(offered.values()), FLEET, f"{len(offered)} nodes")
    world, tp = facts.value("serve.world_size"), facts.value("serve.tensor_parallel_size")
    if not isinstance(world, int) or not isinstance(tp, int):
        facts.mark_missing("fleet.placement", "needs the serve line (after --)")
        return None
    dp = facts.value("serve.data_parallel_size")
    replicas = dp if isinstance(dp, int) and dp > 0 else 1
    result = place(offered, driver.label, tp, world, replicas)
    detail = f"TP {tp}, world {world}" + (
        f", {replicas} data-parallel ranks" if replicas > 1 else ""
    )
    facts.set("fleet.placement.gpus_needed", result.gpus_needed, FLEET, detail)
    facts.set("fleet.placement.fits", result.fits, FLEET, f"{sum(offered.values())} GPUs offered")
    facts.set("fleet.placement.tp_spans_nodes", result.tp_spans_nodes, FLEET, detail)
    if result.fits:
        facts.set("fleet.placement.ranks", result.describe(), FLEET, "Ray PACK, driver first")
        facts.set("fleet.placement.max_ranks_per_node", result.max_ranks_per_node, FLEET)
        return result.ranks
    return None


def _gpus_withheld(facts: Facts, nodes: list[Node]) -> None:
    engine_nodes = [n for n in nodes if n.answered and n.offered_gpus is not None]
    if not engine_nodes:
        facts.mark_missing("fleet.gpus_withheld", "only a Ray cluster says which GPUs it offers")
        return
    withheld, unknown = [], []
    for node in engine_nodes:
        assert node.facts is not None
        seen = node.facts.value("gpu.count")
        if not isinstance(seen, int):
            if node.facts.why_missing("gpu.count"):
                unknown.append(node.label)
            continue
        if seen > (node.offered_gpus or 0):
            withheld.append(
                f"{node.label}: NVML sees {seen} GPUs, Ray offers {node.offered_gpus or 0}"
            )
    if withheld:
        facts.set("fleet.gpus_withheld", withheld, FLEET)
    elif unknown:
        facts.mark_missing("fleet.gpus_withheld", f"NVML could not be read on {', '.join(unknown)}")


# the interface variables; vLLM copies NCCL_* (not GLOO_*) from the driver to its Ray workers
# (vllm/ray/ray_env.py: DEFAULT_ENV_VAR_PREFIXES), so a node without its own NCCL value runs
# with the driver's
IFNAME_VARIABLES = {"NCCL_SOCKET_IFNAME": True, "GLOO_SOCKET_IFNAME": False}


def ifname_matches(spec: str, interfaces: list[str]) -> bool:
    """Whether NCCL's interface selection ``spec`` (comma-separated prefixes; ``^`` excludes;
    ``=`` matches names exactly) picks one of ``interfaces``; Gloo takes a list of names."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    words = [w for w in spec.lstrip("=").split(",") if w]

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in words)

    if exclude:
        return any(not hit(name) for name in interfaces if name != "lo")
    return any(hit(name) for name in interfaces)


def _interfaces(facts: Facts, nodes: list[Node], driver: Node) -> None:
    unmatched, unknown = [], []
    driver_env = driver.facts if driver.facts is not None else Facts()
    for node in nodes:
        if not node.answered:
            continue
        assert node.facts is not None
        names = node.facts.value("host.interfaces")
        for variable, copied in IFNAME_VARIABLES.items():
            own = node.facts.value(f"env.{variable}")
            value = (
                own
                if own is not None
                else (driver_env.value(f"env.{variable}") if copied else None)
            )
            if value is None:
                continue
            if not isinstance(names, list):
                unknown.append(node.label)
                continue
            if not ifname_matches(str(value), [str(n) for n in names]):
                whose = "" if own is not None else " (the driver's, copied by vLLM)"
                unmatched.append(
                    f"{node.label}: {variable}={value}{whose} matches none of "
                    f"{', '.join(map(str, names))}"
                )
    if unmatched:
        facts.set("fleet.ifname_unmatched", unmatched, FLEET)
    elif unknown:
        facts.mark_missing(
            "fleet.ifname_unmatched", f"the interfaces of {', '.join(unknown)} are unknown"
        )


def _model(facts: Facts, nodes: list[Node], ranks: dict[str, list[int]] | None) -> None:
    model = facts.value("serve.model")
    if not isinstance(model, str):
        facts.mark_missing("fleet.model", "needs the serve line (after --)")
        return
    from vllm_doctor.facts.model_source import names_a_path

    is_path = names_a_path(model)
    facts.set("fleet.model.is_path", is_path, Source.SERVE, model)
    holders = [n for n in nodes if n.answered and (ranks is None or ranks.get(n.label))]
    missing, offline, unknown = [], [], []
    for node in holders:
        assert node.facts is not None
        if node.facts.get("host.model_copy") is not None:
            continue
        if node.facts.why_missing("host.model_copy"):
            unknown.append(node.label)
            continue
        missing.append(node.label)
        env = {v: node.facts.value(f"env.{v}") for v in OFFLINE_VARIABLES}
        if any(str(value).lower() in ("1", "true", "yes", "on") for value in env.values()):
            offline.append(node.label)
    whom = "nodes that would hold ranks" if ranks is not None else "nodes"
    if missing:
        facts.set("fleet.model.missing_nodes", missing, FLEET, f"{model} on the {whom}")
        if offline:
            facts.set("fleet.model.offline_missing_nodes", offline, FLEET, "HF_HUB_OFFLINE")
    elif unknown:
        facts.mark_missing("fleet.model", f"the model's files were not looked for on {unknown}")


def _shm(facts: Facts, nodes: list[Node], ranks: dict[str, list[int]] | None) -> None:
    if ranks is None:
        facts.mark_missing("fleet.shm_smallest_mib", "the placement of the ranks is unknown")
        return
    sizes = {}
    for node in nodes:
        if node.answered and len(ranks.get(node.label, [])) > 1:
            assert node.facts is not None
            size = node.facts.value("host.shm_mib")
            if not isinstance(size, int):
                facts.mark_missing("fleet.shm_smallest_mib", f"/dev/shm unknown on {node.label}")
                return
            sizes[node.label] = size
    if sizes:
        label = min(sizes, key=lambda k: sizes[k])
        facts.set("fleet.shm_smallest_mib", sizes[label], FLEET, label)


def _gpu_memory(facts: Facts, nodes: list[Node], ranks: dict[str, list[int]] | None) -> None:
    """fleet.gpu_memory_spread_pct and fleet.gpu_memory_nodes over the GPUs of the nodes that
    would hold ranks (every node with GPUs while the placement is unknown). vLLM gives every
    rank the KV cache blocks of the smallest (get_kv_cache_configs), so what a larger GPU holds
    beyond the smallest stays unused."""
    shown: list[str] = []
    sizes: dict[str, tuple[int, int]] = {}  # node: (smallest, largest) GPU memory
    unknown = []
    for node in nodes:
        if not node.answered or node.facts is None or node.gpus == 0:
            continue
        if ranks is not None and not ranks.get(node.label):
            continue
        records = node.facts.value("gpu.devices")
        devices = [d for d in records if isinstance(d, dict)] if isinstance(records, list) else []
        memory = [m for d in devices if isinstance(m := d.get("memory_total_mib"), int) and m > 0]
        if not memory or len(memory) < len(devices):
            unknown.append(node.label)
            continue
        sizes[node.label] = (min(memory), max(memory))
        names: dict[str, int] = {}
        for device in devices:
            key = f"{device.get('name') or 'GPU'} ({device['memory_total_mib']} MiB)"
            names[key] = names.get(key, 0) + 1
        shown.append(f"{node.label}: " + ", ".join(f"{n} x {k}" for k, n in names.items()))
    why = None
    if unknown:
        why = f"the GPUs' memory is unknown on {', '.join(unknown)}"
    elif not sizes:
        why = "no node that would hold ranks has GPUs"
    if why:
        for path in ("fleet.gpu_memory_spread_pct", "fleet.gpu_memory_nodes"):
            facts.mark_missing(path, why)
        return
    smallest = min(low for low, _ in sizes.values())
    largest = max(high for _, high in sizes.values())
    over = (
        "the nodes that would hold ranks"
        if ranks is not None
        else "every node with GPUs (the placement is unknown)"
    )
    spread = (largest - smallest) * 100 // smallest
    facts.set(
        "fleet.gpu_memory_spread_pct", spread, FLEET, f"{largest} against {smallest} MiB, {over}"
    )
    facts.set("fleet.gpu_memory_nodes", shown, FLEET, over)


def _pod_gpus(facts: Facts, nodes: list[Node]) -> None:
    """fleet.pod_gpus_beyond_request: the nodes whose pod sees more GPUs than the workload's pod
    asks for (deploy.gpus_per_pod, from --manifest). The DaemonSet's documents are left out: it
    asks for no GPU and shows the container the node's (VLLM_DOCTOR_COLLECTED_BY=daemonset)."""
    path = "fleet.pod_gpus_beyond_request"
    asked_somewhere, beyond, unknown = False, [], []
    for node in nodes:
        if not node.answered or node.facts is None:
            continue
        asked = node.facts.value("deploy.gpus_per_pod")
        if not isinstance(asked, int):
            continue
        asked_somewhere = True
        if node.facts.value("env.VLLM_DOCTOR_COLLECTED_BY") == "daemonset":
            continue
        seen = node.facts.value("gpu.count")
        if not isinstance(seen, int):
            unknown.append(node.label)
        elif seen > asked:
            beyond.append(f"{node.label}: sees {seen} GPUs, the pod asks for {asked}")
    if not asked_somewhere:
        facts.mark_missing(path, "needs the workload's manifest (--manifest FILE)")
    elif beyond:
        facts.set(path, beyond, FLEET, "gpu.count against the manifest's GPUs per pod")
    elif unknown:
        facts.mark_missing(path, f"the GPUs of {', '.join(unknown)} are unknown")


def fleet_facts(
    nodes: list[Node], serve_argv: Iterable[str] | None = None, driver: str | None = None
) -> Facts:
    """The facts of the fleet of ``nodes`` for the serve line ``serve_argv``."""
    from vllm_doctor.errors import InputError

    facts = Facts()
    if serve_argv:
        from vllm_doctor.serveline.parser import parse_serve_argv

        parse_serve_argv(list(serve_argv)).to_facts(facts, Source.SERVE, {})
    else:
        facts.mark_missing(
            "serve", "pass the serve line after --: vllm-doctor fleet ... -- vllm serve MODEL ..."
        )
    facts.set("fleet.nodes", len(nodes), FLEET)
    silent = [n for n in nodes if not n.answered]
    if silent:
        facts.set(
            "fleet.silent_nodes", [f"{n.label}: {n.silent or 'no facts'}" for n in silent], FLEET
        )
    _compare(facts, nodes, silent)
    head = driver_of(nodes, driver)
    if head is None:
        raise InputError("--head", f"no node of the fleet is {driver!r}")
    facts.set("fleet.driver", head.label, FLEET, "--head" if driver else "the head node")
    if head.facts is not None and head.facts.get("vllm.version") is not None:
        version = head.facts.get("vllm.version")
        assert version is not None
        facts.set("vllm.version", version.value, f"node {head.label}", version.source)
    elif head.facts is not None and head.facts.why_missing("vllm.version") is None:
        facts.set("vllm.installed", False, f"node {head.label}")
    ranks = _placement(facts, nodes, head) if head.answered else None
    if not head.answered:
        facts.mark_missing("fleet.placement", f"the driver node {head.label} did not answer")
    _gpus_withheld(facts, nodes)
    _interfaces(facts, nodes, head)
    _model(facts, nodes, ranks)
    _shm(facts, nodes, ranks)
    _gpu_memory(facts, nodes, ranks)
    _pod_gpus(facts, nodes)
    return facts
