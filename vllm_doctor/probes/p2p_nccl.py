"""p2p-nccl: can these GPUs serve tensor parallelism? Peer access, copies, NCCL, teardown.

* the peer-access matrix (``cudaDeviceCanAccessPeer`` through torch) and the link of each
  pair (NVML: NVLink count, or the PCIe topology level);
* copy correctness between every pair of this node's GPUs (each rank copies from its GPU to
  every other one and checks the data on the destination and after the round trip);
* NCCL all-reduce and all-gather: correctness against values every rank can recompute, and
  bus bandwidth (all-reduce algbw × 2(n−1)/n, all-gather algbw × (n−1)/n) against what the
  link type should give;
* NCCL init time of the process group; its teardown time is measured at the end of the run
  (in the background, under a limit) and added to this probe's metrics by the runner.

The peer-access matrix, the links and the copies need no communicator: ``prepare`` does them
while the process group forms.

TP over PCIe without P2P (HW001) is confirmed when a pair has no NVLink and no peer access.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from vllm_doctor.probes._common import Ctx, result, sync, time_op

MIB = 1024 * 1024
# Conservative floors for the bus bandwidth of large NCCL collectives (GB/s). Below the floor
# of its link class a pair is suspect (a fallback transport, a degraded link, a busy GPU).
# NVLink, direct or through NVSwitch: a fifth of 25 GB/s per link and direction (NVLink 2-4),
# so NV18 (H100/H200) expects 90, NV12 (A100) 60, NV4 20, NV1 5. PCIe: Gen3 x16 with P2P
# moves ~10 GB/s, through the host without P2P less. Ranks on several nodes: the network.
PER_NVLINK_GBPS = 25.0
NVLINK_FRACTION = 0.2
EXPECTED_BUSBW_GBPS = {"pcie-p2p": 8.0, "pcie-no-p2p": 3.0, "inter-node": 1.0, "other": 1.0}


def expected_busbw(link_class: str, nvlinks: int = 0) -> float:
    """The least bus bandwidth (GB/s) a pair of this link class should give NCCL."""
    if link_class in ("nvlink", "nvswitch"):
        return round(max(1, nvlinks) * PER_NVLINK_GBPS * NVLINK_FRACTION, 1)
    return EXPECTED_BUSBW_GBPS.get(link_class, 1.0)


def _topology(ctx: Ctx) -> tuple[list, list]:
    """(devices, links) of this node from NVML: as the doctor read them (params), else read here
    (under torchrun)."""
    given = ctx.params.get("topology")
    if isinstance(given, dict):
        return list(given.get("devices") or []), list(given.get("links") or [])
    try:
        from vllm_doctor.facts.gpus import collect_gpus
        from vllm_doctor.facts.model import Facts
    except ImportError:  # pragma: no cover
        return [], []
    facts = Facts()
    try:
        collect_gpus(facts)
    except Exception:
        return [], []
    return list(facts.value("gpu.devices") or []), list(facts.value("topology.links") or [])


def _links(ctx: Ctx, ngpu: int) -> dict[tuple[int, int], dict]:
    """NVML link of each pair of torch device indices (mapped through the GPU UUIDs)."""
    import torch

    devices, links = _topology(ctx)
    by_uuid = {}
    for pos, dev in enumerate(devices):
        uuid = str(dev.get("uuid", "")).lower().removeprefix("gpu-")
        if uuid:
            by_uuid[uuid] = pos
    pos_of = {}
    for i in range(ngpu):
        uuid = (
            str(getattr(torch.cuda.get_device_properties(i), "uuid", ""))
            .lower()
            .removeprefix("gpu-")
        )
        pos_of[i] = by_uuid.get(uuid, i)
    by_pos = {(rec["a"], rec["b"]): rec for rec in links}
    out = {}
    for i in range(ngpu):
        for j in range(ngpu):
            if i != j:
                a, b = sorted((pos_of[i], pos_of[j]))
                if (a, b) in by_pos:
                    out[(i, j)] = by_pos[(a, b)]
    return out


def _nccl_version() -> str:
    import torch

    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return "unknown"
    return ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


def _link_class(link: str | None, p2p: bool, nvswitch: bool = False) -> str:
    if link and link.startswith("NV"):
        return "nvswitch" if nvswitch else "nvlink"
    if link in ("PIX", "PXB", "PHB", "NODE", "SYS"):
        return "pcie-p2p" if p2p else "pcie-no-p2p"
    return "other"


def _local_world(ctx: Ctx, ngpu: int) -> int:
    """The GPUs this node's ranks use (LOCAL_WORLD_SIZE under torchrun and the doctor's runner):
    every pair of them is copied between; the others on the node are not part of the run."""
    import os

    try:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "0"))
    except ValueError:
        local = 0
    return min(ngpu, local or ctx.world)


def prepare(ctx: Ctx) -> dict:
    """Peer access, links and peer copies: no communicator needed, so they run while the
    process group forms. Under the doctor's runner the copies go through CUDA IPC and create
    no context on the peer GPUs; a context per peer GPU in every rank (n - 1 more per rank,
    what torchrun runs still do) slowed the group's formation and the exit at 4 ranks
    (bench/probes/README.md)."""
    import torch

    dev = ctx.device
    ngpu = torch.cuda.device_count()
    metrics: dict = {
        "ranks": ctx.world,
        "gpus_on_node": ngpu,
        "gpu": torch.cuda.get_device_name(dev),
        "nccl_version": _nccl_version(),
    }

    # Peer-access matrix and links (this node's GPUs).
    ctx.progress("peer-access matrix")
    matrix = [
        [(i == j) or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(ngpu)]
        for i in range(ngpu)
    ]
    metrics["peer_access"] = matrix
    links = _links(ctx, ngpu)
    metrics["links"] = {f"{i}-{j}": rec.get("link") for (i, j), rec in links.items() if i < j}

    state: dict[str, Any] = {"metrics": metrics, "matrix": matrix, "links": links}
    bench = ctx.params.get("bench") or {}
    if bench.get("copies") == "none":  # bench: what the copies cost, measured by leaving them out
        metrics["copies"] = "not run (bench)"
        state["copy_bad"] = []
    elif bench.get("copies_in_run"):
        pass  # bench: run() copies once the group has formed
    elif ctx.store is not None and bench.get("copies") != "contexts":
        # the doctor's runner: the ranks trade IPC handles through its store file
        _peer_copies_ipc(ctx, state)
    else:  # torchrun (no store before the group forms), or bench: a context per peer GPU
        _peer_copies(ctx, state)
    return state


def _peer_copies(ctx: Ctx, state: dict) -> None:
    """Copies from this rank's GPU to every other GPU its node's ranks use, checked on the
    destination and after the round trip; torch creates a context on each of those GPUs."""
    import torch

    dev = ctx.device
    me = ctx.local_rank
    ctx.progress("copies to every peer GPU")
    gen = torch.Generator(device=dev).manual_seed(1000 + me)
    src = torch.randint(
        -(2**31), 2**31 - 1, (64 * MIB // 4,), generator=gen, device=dev, dtype=torch.int32
    )
    src_sum = int(src.to(torch.int64).sum())
    copies = {}
    copy_bad = []
    for j in range(_local_world(ctx, torch.cuda.device_count())):
        if j == me:
            continue
        other = torch.device("cuda", j)
        dst = src.to(other)
        torch.cuda.synchronize(other)
        on_dst = int(dst.to(torch.int64).sum()) == src_sum
        back = dst.to(dev)
        sync(dev)
        round_trip = bool(torch.equal(back, src))
        secs = time_op(partial(dst.copy_, src, non_blocking=True), dev, iters=5, warmup=1)
        torch.cuda.synchronize(other)
        copies[f"{me}->{j}"] = {
            "ok": on_dst and round_trip,
            "gbps": round(src.numel() * 4 / secs / 1e9, 1),
        }
        if not (on_dst and round_trip):
            copy_bad.append(f"{me}->{j}")
        del dst, back
    state["metrics"]["copies"] = copies
    state["copy_bad"] = copy_bad


IPC_PREFIX = "vllm-doctor/p2p-copies"


def _peer_copies_ipc(ctx: Ctx, state: dict) -> None:
    """Copies from this rank's GPU into every peer rank's GPU memory, mapped into this rank's
    own context by CUDA IPC (no context is created on the peer GPU), read back here, and checked
    on the destination by the rank that owns it once every rank has written."""
    import datetime as dt

    import torch

    from vllm_doctor.probes.cuda_driver import Driver

    store = ctx.store
    dev = ctx.device
    me = ctx.local_rank
    n = _local_world(ctx, torch.cuda.device_count())
    ctx.progress("copies to every peer GPU (CUDA IPC)")
    words = 64 * MIB // 4
    nbytes = words * 4

    def data(r: int):
        gen = torch.Generator(device=dev).manual_seed(1000 + r)
        return torch.randint(
            -(2**31), 2**31 - 1, (words,), generator=gen, device=dev, dtype=torch.int32
        )

    inbox = torch.zeros(n * words, device=dev, dtype=torch.int32)  # one slot per sender
    src = data(me)
    torch.cuda.synchronize(dev)
    driver = Driver()
    driver.use(me)
    handle, offset = driver.ipc_handle(inbox.data_ptr())
    store.set(f"{IPC_PREFIX}/{me}", handle + offset.to_bytes(8, "little"))
    copies: dict[str, dict] = {}
    copy_bad: list[str] = []
    back = torch.empty_like(src)
    for j in range(n):
        if j == me:
            continue
        key = f"{IPC_PREFIX}/{j}"
        store.wait([key], dt.timedelta(seconds=60))
        raw = store.get(key)
        base = driver.ipc_open(raw[:64])
        slot = base + int.from_bytes(raw[64:72], "little") + me * nbytes
        driver.copy(slot, src.data_ptr(), nbytes)
        driver.synchronize()
        driver.copy(back.data_ptr(), slot, nbytes)
        driver.synchronize()
        round_trip = bool(torch.equal(back, src))
        started = time.perf_counter()
        for _ in range(5):
            driver.copy(slot, src.data_ptr(), nbytes)
        driver.synchronize()
        secs = (time.perf_counter() - started) / 5
        driver.ipc_close(base)
        copies[f"{me}->{j}"] = {"ok": round_trip, "gbps": round(nbytes / secs / 1e9, 1)}
        if not round_trip:
            copy_bad.append(f"{me}->{j} (round trip)")
    # every sender has written (and synchronised) before the owners look at their inboxes
    store.add(f"{IPC_PREFIX}/written", 1)
    deadline = time.monotonic() + 60
    while store.add(f"{IPC_PREFIX}/written", 0) < n and time.monotonic() < deadline:
        time.sleep(0.002)
    for j in range(n):
        if j == me:
            continue
        arrived = bool(torch.equal(inbox[j * words : (j + 1) * words], data(j)))
        copies.setdefault(f"{j}->{me}", {})["on_destination"] = arrived
        if not arrived:
            copy_bad.append(f"{j}->{me} (on the destination)")
    state["metrics"]["copies"] = copies
    state["metrics"]["copies_via"] = "CUDA IPC"
    state["copy_bad"] = copy_bad


def run(ctx: Ctx) -> dict:
    import torch
    import torch.distributed as dist

    state = ctx.take_prepared() or prepare(ctx)
    dev = ctx.device
    n = ctx.world
    ngpu = torch.cuda.device_count()
    metrics: dict = state["metrics"]
    metrics["nccl_init_s"] = ctx.init.get("dist_init_s")
    if "copy_bad" not in state:
        _peer_copies(ctx, state)
    matrix, links, copy_bad = state["matrix"], state["links"], state["copy_bad"]

    # NCCL all-reduce: each rank's data is recomputable by every rank (seeded by rank).
    ctx.progress("NCCL all-reduce and all-gather")
    numel = 64 * MIB  # float32: 256 MiB

    def data(r):
        g = torch.Generator(device=dev).manual_seed(50_000 + r)
        return torch.randint(-1000, 1000, (numel,), generator=g, device=dev).float()

    x = data(ctx.rank)
    expected = sum(data(r) for r in range(n))
    y = x.clone()
    dist.all_reduce(y)
    sync(dev)
    ar_ok = bool(torch.equal(y, expected))
    del expected
    bytes_ar = numel * 4
    t_ar = time_op(partial(dist.all_reduce, y), dev, iters=5, warmup=2)
    ar_bus = bytes_ar / t_ar / 1e9 * 2 * (n - 1) / n
    # All-gather: every rank contributes its seeded block.
    per = numel // n
    gathered = torch.empty(per * n, device=dev)
    dist.all_gather_into_tensor(gathered, x[:per].contiguous())
    sync(dev)
    ag_ok = all(torch.equal(gathered[r * per : (r + 1) * per], data(r)[:per]) for r in range(n))
    part = x[:per].contiguous()
    t_ag = time_op(partial(dist.all_gather_into_tensor, gathered, part), dev, iters=5, warmup=2)
    ag_bus = per * n * 4 / t_ag / 1e9 * (n - 1) / n
    metrics.update(
        allreduce_ok=ar_ok,
        allreduce_bytes=bytes_ar,
        allreduce_s=t_ar,
        allreduce_busbw_gbps=round(ar_bus, 1),
        allgather_ok=ag_ok,
        allgather_bytes=per * n * 4,
        allgather_s=t_ag,
        allgather_busbw_gbps=round(ag_bus, 1),
    )
    del x, y, gathered

    # Verdict.
    local_world = _local_world(ctx, ngpu)  # the collectives run over these GPUs of the node
    classes = {}
    floors = {}
    no_p2p_pcie = []
    for (i, j), rec in links.items():
        if i < j < local_world:
            cls = _link_class(
                rec.get("link"), matrix[i][j] and matrix[j][i], bool(rec.get("nvswitch"))
            )
            classes[f"{i}-{j}"] = cls
            floors[f"{i}-{j}"] = expected_busbw(cls, int(rec.get("nvlinks") or 0))
            if cls == "pcie-no-p2p":
                no_p2p_pcie.append(f"{i}-{j}")
    if not links:  # no NVML: judge by peer access only
        for i in range(local_world):
            for j in range(i + 1, local_world):
                if not (matrix[i][j] and matrix[j][i]):
                    no_p2p_pcie.append(f"{i}-{j}")
    # The slowest pair among the ranks' GPUs sets the floor; across nodes, the network does.
    if n > local_world:
        worst_cls, floor = "inter-node", expected_busbw("inter-node")
    elif floors:
        worst_pair = min(floors, key=floors.__getitem__)
        worst_cls, floor = classes[worst_pair], floors[worst_pair]
    else:
        worst_cls, floor = "other", expected_busbw("other")
    metrics["link_classes"] = classes
    metrics["link_class"] = worst_cls
    metrics["expected_min_busbw_gbps"] = floor
    confirmed = ["HW001"] if no_p2p_pcie else []
    all_p2p = all(matrix[i][j] for i in range(local_world) for j in range(local_world))
    refuted = ["HW001"] if (all_p2p and not no_p2p_pcie) else []
    problems = []
    if copy_bad:
        problems.append("peer copies corrupted data: " + ", ".join(copy_bad))
    if not ar_ok:
        problems.append("NCCL all-reduce gave a wrong sum")
    if not ag_ok:
        problems.append("NCCL all-gather gave wrong blocks")
    if problems:
        return result("fail", "; ".join(problems), metrics, confirmed, refuted)
    warns = []
    if no_p2p_pcie:
        warns.append(f"no P2P between GPUs {', '.join(no_p2p_pcie)} over PCIe")
    low = min(ar_bus, ag_bus)
    if low < floor:
        warns.append(
            f"bus bandwidth {low:.1f} GB/s is under the {floor:g} GB/s expected of {worst_cls}"
        )
    summary = (
        f"{worst_cls}: peer access {'all pairs' if all_p2p else 'missing on some pairs'}; copies ok; "
        f"all-reduce {ar_bus:.0f} GB/s, all-gather {ag_bus:.0f} GB/s bus bandwidth "
        f"(≥ {floor:g} expected); NCCL init {metrics['nccl_init_s']}s"
    )
    if warns:
        return result("warn", "; ".join(warns), metrics, confirmed, refuted, notes=[summary])
    return result("pass", summary, metrics, confirmed, refuted)
