"""collectives: all-reduce and all-gather across every rank of the group, on every node it spans.

NCCL between GPUs, gloo between CPU processes. Each rank first says where it is (its node, its
host, its GPU, the host's InfiniBand ports and socket interface) and the ranks trade that through
the process group; then:

* correctness: all-reduce and all-gather of data every rank can recompute (seeded by rank);
* bus bandwidth, as nccl-tests counts it (all-reduce algbw × 2(n−1)/n, all-gather algbw ×
  (n−1)/n), against the floor of the slowest link between two ranks of the group: two ranks of
  one host move data over their GPUs' link (NVML: NVLink, NVSwitch or PCIe, the floors of
  p2p-nccl); ranks on two hosts over the network: InfiniBand when both hosts have an active port,
  else the sockets NCCL falls back to (their interface's speed). A floor is a fifth of the
  nominal rate, as p2p-nccl's NVLink floors are.

On the CPU the bandwidth is gloo's over loopback or TCP, reported and not judged. Several Ray
nodes on one host (a test cluster, or raylets per GPU subset) are one host here: the link between
them is their GPUs' own, which NCCL uses as well.
"""

from __future__ import annotations

import json
import os
import socket
from functools import partial
from pathlib import Path
from typing import Any

from vllm_doctor.probes._common import Ctx, result, sync, time_op

NODE_ENV = "VLLM_DOCTOR_NODE"  # the launcher's name for the rank's node (a Ray node's label)
NETWORK_FRACTION = 0.2  # of the nominal rate, as p2p-nccl's NVLink floors
MIB = 1024 * 1024


def _host_id() -> str:
    """The same on every process of one host (one boot of one kernel), different across hosts."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return socket.gethostname()


def _ib_ports() -> list[dict[str, Any]]:
    """The host's active InfiniBand (or RoCE) ports and their rate in Gb/s."""
    ports = []
    for port in sorted(Path("/sys/class/infiniband").glob("*/ports/*")):
        try:
            state = (port / "state").read_text(encoding="ascii")
            rate = (port / "rate").read_text(encoding="ascii")
            layer = (port / "link_layer").read_text(encoding="ascii").strip()
        except OSError:
            continue
        if "ACTIVE" not in state:
            continue
        try:
            gbps = float(rate.split()[0])
        except (ValueError, IndexError):
            continue
        ports.append(
            {"port": f"{port.parent.parent.name}/{port.name}", "gbps": gbps, "layer": layer}
        )
    return ports


def _socket_interface() -> dict[str, Any]:
    """The interface NCCL's sockets would use when named (NCCL_SOCKET_IFNAME), and its speed."""
    names = [
        n.strip()
        for n in os.environ.get("NCCL_SOCKET_IFNAME", "").lstrip("=^").split(",")
        if n.strip()
    ]
    for name in names:
        try:
            mbps = int(Path(f"/sys/class/net/{name}/speed").read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            continue
        if mbps > 0:
            return {"name": name, "gbps": mbps / 1000}
    return {"name": ",".join(names) or None, "gbps": None}


def _where(ctx: Ctx) -> dict[str, Any]:
    import torch

    uuid = None
    if ctx.device_kind == "cuda":
        uuid = str(getattr(torch.cuda.get_device_properties(ctx.device), "uuid", "") or "")
    return {
        "rank": ctx.rank,
        "node": os.environ.get(NODE_ENV) or socket.gethostname(),
        "host": _host_id(),
        "gpu_uuid": uuid.lower().removeprefix("gpu-") if uuid else None,
        "ib": _ib_ports(),
        "socket": _socket_interface(),
    }


def _gpu_links() -> tuple[dict[str, int], dict[tuple[int, int], dict]]:
    """(GPU uuid -> NVML index, NVML link of each pair) of every GPU of this host."""
    from vllm_doctor.facts.gpus import collect_gpus
    from vllm_doctor.facts.model import Facts

    facts = Facts()
    try:
        collect_gpus(facts, environ={})  # every GPU, whatever this rank's CUDA_VISIBLE_DEVICES
    except Exception:
        return {}, {}
    devices = facts.value("gpu.devices") or []
    index = {
        str(d.get("uuid", "")).lower().removeprefix("gpu-"): pos for pos, d in enumerate(devices)
    }
    links = {(rec["a"], rec["b"]): rec for rec in facts.value("topology.links") or []}
    return index, links


def pair_link(
    a: dict, b: dict, device_kind: str, gpus: tuple[dict, dict]
) -> tuple[str, float | None]:
    """(link class, floor in GB/s or None where not judged) between two ranks' places."""
    from vllm_doctor.probes.p2p_nccl import EXPECTED_BUSBW_GBPS, expected_busbw

    if a["host"] == b["host"]:
        if device_kind != "cuda":
            return "loopback", None
        index, links = gpus
        i, j = index.get(a["gpu_uuid"] or ""), index.get(b["gpu_uuid"] or "")
        if i is None or j is None:
            return "one host (link unknown: NVML did not list both GPUs)", None
        if i == j:
            return "one GPU", None
        rec = links.get((min(i, j), max(i, j))) or {}
        link = str(rec.get("link") or "")
        if link.startswith("NV"):
            cls = "nvswitch" if rec.get("nvswitch") else "nvlink"
            return cls, expected_busbw(cls, int(rec.get("nvlinks") or 0))
        return "pcie", EXPECTED_BUSBW_GBPS["pcie-no-p2p"]  # P2P untested here: the lower floor
    if device_kind != "cuda":
        return "network (gloo over TCP)", None
    if a["ib"] and b["ib"]:
        gbps = min(p["gbps"] for p in (*a["ib"], *b["ib"]))
        return "infiniband", round(NETWORK_FRACTION * gbps / 8, 1)
    speeds = [s["gbps"] for s in (a["socket"], b["socket"]) if s.get("gbps")]
    if speeds:
        return "sockets", round(NETWORK_FRACTION * min(speeds) / 8, 2)
    return "sockets", EXPECTED_BUSBW_GBPS["inter-node"]


def _slowest(places: list[dict], device_kind: str) -> tuple[str, float | None, dict[str, str]]:
    """The link class and floor of the slowest pair, and the class of each pair of nodes."""
    gpus = _gpu_links() if device_kind == "cuda" else ({}, {})
    worst: tuple[str, float | None] = ("", None)
    between: dict[str, str] = {}
    for x in range(len(places)):
        for y in range(x + 1, len(places)):
            cls, floor = pair_link(places[x], places[y], device_kind, gpus)
            nodes = sorted({places[x]["node"], places[y]["node"]})
            between.setdefault(" - ".join(nodes), cls)
            if floor is not None and (worst[1] is None or floor < worst[1]):
                worst = (cls, floor)
            elif not worst[0]:
                worst = (cls, worst[1])
    return worst[0], worst[1], between


def _all_gather_json(torch: Any, dist: Any, value: Any, world: int, dev: Any) -> list[Any]:
    """Every rank's ``value`` (JSON), through two all-gathers of plain tensors: torch's
    all_gather_object reads its bytes back through numpy, which a torch install need not
    have ("Numpy is not available")."""
    data = json.dumps(value).encode("utf-8")
    size = torch.tensor([len(data)], dtype=torch.int64, device=dev)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    lengths = [int(s.item()) for s in sizes]
    buf = torch.zeros(max(lengths), dtype=torch.uint8, device=dev)
    buf[: len(data)] = torch.tensor(list(data), dtype=torch.uint8, device=dev)
    bufs = [torch.empty_like(buf) for _ in range(world)]
    dist.all_gather(bufs, buf)
    return [json.loads(bytes(b[:k].tolist())) for b, k in zip(bufs, lengths, strict=True)]


def run(ctx: Ctx) -> dict:
    import torch
    import torch.distributed as dist

    dev = ctx.device
    n = ctx.world
    ctx.progress("trading where each rank is")
    places = _all_gather_json(torch, dist, _where(ctx), n, dev)
    nodes: dict[str, list[int]] = {}
    for place in places:
        nodes.setdefault(place["node"], []).append(place["rank"])
    hosts = len({p["host"] for p in places})
    link, floor, between = _slowest(places, ctx.device_kind)
    numel = (64 if ctx.device_kind == "cuda" and not ctx.small else 1) * MIB

    def data(r: int):
        g = torch.Generator(device=dev).manual_seed(70_000 + r)
        return torch.randint(-1000, 1000, (numel,), generator=g, device=dev).float()

    span = f"{n} ranks on {len(nodes)} node(s), {hosts} host(s)"
    ctx.progress(f"all-reduce of {numel * 4 // MIB} MiB across {span}")
    x = data(ctx.rank)
    y = x.clone()
    dist.all_reduce(y)
    sync(dev)
    ar_ok = bool(torch.equal(y, sum(data(r) for r in range(n))))
    t_ar = time_op(partial(dist.all_reduce, y), dev, iters=5, warmup=2)
    ar_bus = numel * 4 / t_ar / 1e9 * 2 * (n - 1) / n
    ctx.progress(f"all-gather of {numel * 4 // MIB} MiB across {span}")
    per = numel // n
    part = x[:per].contiguous()
    gathered = torch.empty(per * n, device=dev)
    dist.all_gather_into_tensor(gathered, part)
    sync(dev)
    ag_ok = all(torch.equal(gathered[r * per : (r + 1) * per], data(r)[:per]) for r in range(n))
    t_ag = time_op(partial(dist.all_gather_into_tensor, gathered, part), dev, iters=5, warmup=2)
    ag_bus = per * n * 4 / t_ag / 1e9 * (n - 1) / n
    metrics = {
        "backend": ctx.dist_backend,
        "ranks_by_node": nodes,
        "hosts": hosts,
        "places": places,
        "link_between_nodes": between,
        "link_class": link,
        "expected_min_busbw_gbps": floor,
        "allreduce_ok": ar_ok,
        "allreduce_bytes": numel * 4,
        "allreduce_busbw_gbps": round(ar_bus, 2),
        "allgather_ok": ag_ok,
        "allgather_bytes": per * n * 4,
        "allgather_busbw_gbps": round(ag_bus, 2),
        "dist_init_s": ctx.init.get("dist_init_s"),
    }
    what = "NCCL" if ctx.dist_backend == "nccl" else "gloo"
    wrong = [
        f"{what} {op} gave wrong data"
        for op, ok in (("all-reduce", ar_ok), ("all-gather", ag_ok))
        if not ok
    ]
    if wrong:
        return result("fail", f"{'; '.join(wrong)} across {span}", metrics)
    summary = (
        f"{span}, slowest link {link}: all-reduce {ar_bus:.1f} GB/s, all-gather "
        f"{ag_bus:.1f} GB/s bus bandwidth"
    )
    if floor is None:
        why = f"{what} on the CPU" if ctx.device_kind != "cuda" else f"no floor known for {link}"
        return result("pass", f"{summary} (not judged: {why})", metrics)
    low = min(ar_bus, ag_bus)
    if low < floor:
        return result(
            "warn",
            f"bus bandwidth {low:.1f} GB/s across {span} is under the {floor:g} GB/s expected "
            f"of {link}",
            metrics,
            notes=[summary],
        )
    return result("pass", f"{summary} (≥ {floor:g} expected)", metrics)
