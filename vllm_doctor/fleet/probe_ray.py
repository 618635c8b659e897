"""`vllm-doctor probe --ray`: the probes' ranks placed on a Ray cluster as vLLM places its workers.

The placement is vLLM's Ray executor's (vllm/v1/executor/ray_utils.py initialize_ray_cluster and
ray_executor.py _init_workers_ray):

- one placement group of world-size bundles of one GPU each (``{"CPU": 1}`` for the CPU variant),
  the first on the driver's node (a ``node:<driver IP>`` resource of 0.001), strategy PACK;
- one actor per bundle, asking no CPU beside its GPU;
- the ranks ordered as vLLM orders its workers: the driver's node first, then nodes holding fewer
  of them, then by IP (here the Ray node id breaks ties where several nodes share one IP, as on a
  test cluster on one host, where vLLM itself refuses to start);
- every rank of a node sees the node's GPUs of the group (CUDA_VISIBLE_DEVICES, sorted) and its
  local rank is its index among that node's ranks;
- the driver's ``VLLM_``, ``NCCL_``, ``UCX_``, ``HF_``, ``HUGGING_FACE_`` and ``LMCACHE_``
  variables and PYTHONHASHSEED travel to every rank (vllm/ray/ray_env.py's defaults).

The ranks meet through torch.distributed's own rendezvous: the TCP store of rank 0's node
(MASTER_ADDR, 127.0.0.1 when one node holds every rank, as vLLM does; MASTER_PORT free there).
Each actor (``rank_host.RankHost``) starts ``python -m vllm_doctor.probes.worker`` for its rank,
the module the local runner and torchrun start, and rank 0's actor the probes' isolated parts.
The local runner does the rest as for one machine (its deadlines, the collection of the events,
mirrored here from the actors as they grow, the teardown), with ``RayLauncher`` in place of its
``Launcher``: a rank that never joins the group is a finding at the join deadline naming the
rank, its node and where each rank had got to.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.probes.launch import Launcher, Proc, describe_exit, worker_args
from vllm_doctor.probes.registry import Part

CARRIED_PREFIXES = ("VLLM_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_", "LMCACHE_")
CARRIED_NAMES = ("PYTHONHASHSEED",)
# each worker's own: never copied from the driver (RayDistributedExecutor.WORKER_SPECIFIC_ENV_VARS)
WORKER_SPECIFIC = ("VLLM_HOST_IP", "VLLM_HOST_PORT", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES")
POLL_S = 0.1


@dataclass
class Rank:
    rank: int
    actor: Any
    node_id: str
    ip: str
    gpu_ids: list[str]
    hostname: str = ""
    local_rank: int = 0
    local_world: int = 1
    visible: str | None = None  # CUDA_VISIBLE_DEVICES: the node's GPUs of the group

    @property
    def label(self) -> str:
        """As the fleet command names a node: the short Ray node id and its IP."""
        return f"{self.node_id[:8]}@{self.ip}"


@dataclass
class Placement:
    ranks: list[Rank]
    group: Any  # the placement group
    driver_node: str
    master_addr: str
    master_port: int
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        nodes: dict[str, dict[str, Any]] = {}
        for r in self.ranks:
            node = nodes.setdefault(
                r.node_id,
                {"node": r.label, "host": r.hostname, "ranks": [], "gpus": r.visible},
            )
            node["ranks"].append(r.rank)
        return list(nodes.values())


def carried_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The driver's variables vLLM's Ray executor copies to every worker (not those that are
    each worker's own)."""
    env = os.environ if environ is None else environ
    return {
        k: v
        for k, v in env.items()
        if (k.startswith(CARRIED_PREFIXES) or k in CARRIED_NAMES) and k not in WORKER_SPECIFIC
    }


def worker_order(ranks: list[Rank], driver_node: str) -> list[Rank]:
    """vLLM's sort_by_driver_then_worker_ip: the driver's node first, then nodes holding fewer
    workers, then by IP; keyed by node (its id breaks ties where nodes share an IP). Stable:
    the workers of one node keep their bundle order."""
    count: dict[str, int] = {}
    for r in ranks:
        count[r.node_id] = count.get(r.node_id, 0) + 1
    return sorted(
        ranks, key=lambda r: (r.node_id != driver_node, count[r.node_id], r.ip, r.node_id)
    )


def place(ray: Any, world: int, device: str, deadline_s: float) -> Placement:
    """vLLM's placement group and one RankHost actor per bundle, ranks ordered as vLLM's."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from vllm_doctor.fleet.rank_host import RankHost

    key = "GPU" if device == "cuda" else "CPU"
    driver_node = ray.get_runtime_context().get_node_id()
    driver_ip = ray.util.get_node_ip_address()
    have = ray.cluster_resources().get(key, 0)
    if have < world:  # Ray would wait for them without end (vLLM gives up after 30 minutes)
        raise InputError("--ray", _unplaceable(ray, world, key, 0))
    bundles: list[dict[str, float]] = [{key: 1.0} for _ in range(world)]
    bundles[0][f"node:{driver_ip}"] = 0.001
    group = placement_group(bundles, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=deadline_s)
    if not ready:
        remove_placement_group(group)
        raise InputError("--ray", _unplaceable(ray, world, key, deadline_s))
    host = ray.remote(RankHost)
    actors = []
    for index in range(world):
        actors.append(
            host.options(
                num_cpus=0 if key == "GPU" else 1,
                num_gpus=1 if key == "GPU" else 0,
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group,
                    placement_group_capture_child_tasks=True,
                    placement_group_bundle_index=index,
                ),
            ).remote()
        )
    asked = {actor.where.remote(): index for index, actor in enumerate(actors)}
    answered, late = ray.wait(list(asked), num_returns=len(asked), timeout=deadline_s)
    if late:
        table = ray.util.placement_group_table(group).get("bundles_to_node_id", {})
        names = ", ".join(
            f"bundle {asked[ref]} on node {str(table.get(asked[ref], '?'))[:8]}" for ref in late
        )
        for actor in actors:
            ray.kill(actor)
        remove_placement_group(group)
        raise RankHostsLate(
            f"the Ray actors of {names} did not start within {deadline_s:g} s (the node's "
            "runtime environment or Python is stuck, or the node is gone)"
        )
    ranks = []
    for ref in answered:
        info = ray.get(ref)
        ranks.append(
            Rank(
                rank=asked[ref],
                actor=actors[asked[ref]],
                node_id=info["node_id"],
                ip=info["ip"],
                gpu_ids=info["gpu_ids"],
                hostname=info["hostname"],
            )
        )
    ranks.sort(key=lambda r: r.rank)  # bundle order, then vLLM's order
    ranks = worker_order(ranks, driver_node)
    by_node: dict[str, list[Rank]] = {}
    for position, r in enumerate(ranks):
        r.rank = position
        by_node.setdefault(r.node_id, []).append(r)
    for members in by_node.values():
        gpus = sorted({int(g) for r in members for g in r.gpu_ids if str(g).isdigit()})
        for local, r in enumerate(members):
            r.local_rank, r.local_world = local, len(members)
            r.visible = ",".join(map(str, gpus)) if key == "GPU" else None
    notes = []
    ips = {r.ip for r in ranks}
    if len(ips) < len(by_node):
        notes.append(
            f"{len(by_node)} Ray nodes share {len(ips)} IP address(es) (a test cluster on one "
            "host): vLLM's Ray executor refuses such a group ('Every node should have a unique "
            "IP address'); the probes place its ranks by node id"
        )
    master = "127.0.0.1" if len(by_node) == 1 else ranks[0].ip
    port = int(ray.get(ranks[0].actor.free_port.remote(), timeout=deadline_s))
    return Placement(ranks, group, driver_node, master, port, notes)


def default_names() -> list[str]:
    """What `probe --ray` runs when no probe is named: the default probes and collectives."""
    from vllm_doctor.probes.registry import DEFAULT_PROBES

    return [s.name for s in DEFAULT_PROBES] + ["collectives"]


class RankHostsLate(Exception):
    """Some rank's actor never started: nothing can be launched for the group."""


def _unplaceable(ray: Any, world: int, key: str, deadline_s: float) -> str:
    free = []
    for node in ray.nodes():
        if node.get("Alive"):
            have = node.get("Resources", {}).get(key, 0)
            free.append(f"{node['NodeID'][:8]}@{node.get('NodeManagerAddress')}: {have:g}")
    within = f" within {deadline_s:g} s" if deadline_s else ""
    return (
        f"the cluster cannot place vLLM's placement group of {world} {key} bundles{within} "
        f"({key} per node: {'; '.join(free) or 'no alive node'}); give a smaller --tp or add "
        "nodes"
    )


class RayLauncher(Launcher):
    """Starts the run's processes on the ranks' Ray actors instead of this machine, and mirrors
    their event and log files into the run directory for the runner."""

    def __init__(
        self,
        run_dir: Path,
        python: str,
        device: str,
        tp: int,
        specs: list,
        params: dict,
        teardown_timeout: float,
        *,
        ray: Any,
        placement: Placement,
    ):
        super().__init__(run_dir, python, device, tp, specs, params, teardown_timeout)
        self.ray = ray
        self.placement = placement
        self.hosted: dict[str, tuple[Rank, Proc]] = {}  # key -> (its host, its record)
        self.keys: dict[int, str] = {}  # id(proc) -> its key on its host (tag and group)
        self.offsets: dict[str, tuple[int, int]] = {}
        self.exits: dict[str, str] = {}
        self.lock = threading.Lock()
        self.pumping = threading.Lock()
        self.stopping = threading.Event()
        self.mirror: threading.Thread | None = None

    # the runner's Launcher interface
    def start_compiler(self, specs: list, parts: list) -> None:
        """Each node compiles its own bytecode, if at all: nothing to do here."""

    def stop_compiler(self) -> None:
        pass

    def launch_parts(self, parts: list[tuple[str, Part]]) -> list[Proc]:
        host = self.placement.ranks[0]
        started = []
        for name, part in parts:
            tag = f"part-{name}-{part.name}"
            args = [
                "--part",
                f"{name}:{part.name}",
                "--device",
                self.device,
                "--params",
                json.dumps(self.params),
            ]
            env = dict(self._base_env(host), **part.env, LOCAL_RANK="0")
            proc = self._start(host, tag, 0, args, env)
            proc.part = (name, part.name)
            started.append(proc)
        return started

    def launch_group(self, names: list[str]) -> list[Proc]:
        self.groups += 1
        args = worker_args(self.device, self.params, self.teardown_timeout, names)
        port = self.placement.master_port
        if self.groups > 1:  # a fresh group after a failed one: a fresh store
            rank0 = self.placement.ranks[0].actor
            port = int(self.ray.get(rank0.free_port.remote(), timeout=30))
        group = []
        for r in self.placement.ranks:
            env = dict(
                self._base_env(r),
                RANK=str(r.rank),
                WORLD_SIZE=str(self.tp),
                LOCAL_RANK=str(r.local_rank),
                LOCAL_WORLD_SIZE=str(r.local_world),
                MASTER_ADDR=self.placement.master_addr,
                MASTER_PORT=str(port),
            )
            group.append(self._start(r, f"rank{r.rank}", r.rank, args, env, f".g{self.groups}"))
        return group

    # what the runner asks of a process on another node (Proc.remote)
    def alive(self, proc: Proc) -> bool:
        return self.keys[id(proc)] not in self.exits

    def exit_text(self, proc: Proc) -> str:
        return self.exits.get(self.keys[id(proc)], "still running")

    def kill(self, proc: Proc) -> None:
        key = self.keys[id(proc)]
        if key in self.exits:
            return
        host = self.hosted[key][0]
        try:
            self.ray.get(host.actor.kill.remote(key), timeout=10)
            self._pump_once()
        except Exception:  # the actor is stuck or gone: end it, and its processes with it
            self.ray.kill(host.actor)
        with self.lock:
            self.exits.setdefault(key, "killed")

    def close(self) -> None:
        """Stop mirroring (the runner has ended the processes)."""
        self.stopping.set()
        if self.mirror is not None:
            self.mirror.join(timeout=5)

    # internals
    def _base_env(self, r: Rank) -> dict[str, str]:
        env = carried_env()
        env["VLLM_DOCTOR_NODE"] = r.label
        if r.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = r.visible
        if self.device == "cpu":
            env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def _start(
        self,
        host: Rank,
        tag: str,
        rank: int,
        args: list[str],
        env: dict[str, str],
        suffix: str = "",
    ) -> Proc:
        key = f"{tag}{suffix}"
        events = self.run_dir / f"events.{key}.jsonl"
        log = self.run_dir / f"{key}.log"
        events.touch()
        log.touch()
        proc = Proc(
            tag=tag, events=events, log=log, launched=time.monotonic(), group=self.groups, rank=rank
        )
        proc.where = f"node {host.label}"
        proc.remote = self
        with self.lock:
            self.keys[id(proc)] = key
            self.hosted[key] = (host, proc)
            self.offsets[key] = (0, 0)
        host.actor.start.remote(key, "vllm_doctor.probes.worker", args, env)
        if self.mirror is None:
            self.mirror = threading.Thread(
                target=self._mirror, name="vllm-doctor-ray-mirror", daemon=True
            )
            self.mirror.start()
        return proc

    def _mirror(self) -> None:
        while not self.stopping.is_set():
            self._pump_once()
            self.stopping.wait(POLL_S)

    def _pump_once(self) -> None:
        with self.pumping:  # the mirror thread and a kill: one reader of the actors at a time
            self._pump()

    def _pump(self) -> None:
        with self.lock:
            by_host: dict[int, tuple[Rank, dict[str, tuple[int, int]]]] = {}
            for key, (host, _) in self.hosted.items():
                if key not in self.exits:
                    by_host.setdefault(id(host), (host, {}))[1][key] = self.offsets[key]
        if not by_host:
            return
        asked = {
            host.actor.poll.remote(offsets): (host, offsets) for host, offsets in by_host.values()
        }
        ready, _ = self.ray.wait(list(asked), num_returns=len(asked), timeout=5)
        for ref in ready:
            host, offsets = asked[ref]
            try:
                answer = self.ray.get(ref)
            except Exception as err:  # the actor died: so did every process it hosted
                with self.lock:
                    for key in offsets:
                        self.exits.setdefault(
                            key, f"its Ray actor on node {host.label} died ({type(err).__name__})"
                        )
                continue
            for key, (events, log, log_from, code) in answer.items():
                proc = self.hosted[key][1]
                events_at, _ = self.offsets[key]
                if events:
                    with open(proc.events, "ab") as fh:
                        fh.write(events)
                if log:
                    with open(proc.log, "ab") as fh:  # type: ignore[arg-type]
                        fh.write(log)
                with self.lock:
                    self.offsets[key] = (events_at + len(events), log_from + len(log))
                    if code is not None and len(events) == 0:
                        self.exits.setdefault(key, describe_exit(code))


def release(ray: Any, placement: Placement) -> None:
    """End every actor (and the processes each hosts) and give the placement group back."""
    from ray.util.placement_group import remove_placement_group

    closing = [r.actor.close.remote() for r in placement.ranks]
    ray.wait(closing, num_returns=len(closing), timeout=10)
    for r in placement.ranks:
        ray.kill(r.actor)
    remove_placement_group(placement.group)


def probe_over_ray(
    address: str | None,
    names: list[str] | None,
    world: int | None,
    serve: dict[str, Any],
    device: str | None,
    timeout: float,
    join_timeout: float | None,
    teardown_timeout: float,
    model: dict | None,
    doctor_from: str,
    on_update: Any = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Run the probes with their ranks on the Ray cluster at ``address``: (results, what the
    report says of the run). ``world``: --tp; else the serve line's TP × PP; else every GPU the
    cluster offers (2 ranks on the CPU)."""
    from vllm_doctor.fleet.ray_engine import connect
    from vllm_doctor.probes.deadlines import Deadlines
    from vllm_doctor.probes.result import TIMEOUT, ProbeResult
    from vllm_doctor.probes.runner import resolve, run_probes

    limits = Deadlines(timeout, teardown_timeout, join_timeout)  # bad limits before connecting
    ray, where, how, connect_s = connect(address, doctor_from)
    meta: dict[str, Any] = {
        "ray": {"address": where, "doctor": how, "connect_s": round(connect_s, 3)}
    }
    launchers: list[RayLauncher] = []
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if device is None:
            device = "cuda" if gpus else "cpu"
            meta["device_defaulted"] = True
        source = "--tp"
        if world is None and serve.get("tp"):
            world, source = int(serve["tp"]) * int(serve.get("pp") or 1), "the serve line's TP × PP"
        if world is None:
            world, source = (gpus, "the cluster's GPUs") if device == "cuda" else (2, "default")
        if world < 1:
            raise InputError(source, f"must be at least 1 (got {world})")
        meta.update(tp=world, device=device)
        meta["ray"]["world_from"] = source
        try:
            placement = place(ray, world, device, limits.start_limit)
        except RankHostsLate as late:
            reason = str(late)
            return [
                ProbeResult(name=s.name, status=TIMEOUT, reason=reason)
                for s in resolve(names)
                if s.skip_reason(world, device) is None
            ], meta
        meta["ray"].update(
            placement=placement.describe(),
            master=f"{placement.master_addr}:{placement.master_port}",
            notes=placement.notes,
        )

        def launcher(*args: Any) -> RayLauncher:
            made = RayLauncher(*args, ray=ray, placement=placement)
            launchers.append(made)
            return made

        info: dict[str, Any] = {}
        try:
            results = run_probes(
                names,
                world,
                device,
                timeout,
                model,
                on_update=on_update,
                teardown_timeout=teardown_timeout,
                use_cache=False,  # the nodes' torch decides, not this machine's cache
                join_timeout=join_timeout,
                launcher=launcher,
                info=info,
            )
        finally:
            for made in launchers:
                made.close()
            release(ray, placement)
        return results, meta
    finally:
        ray.shutdown()
