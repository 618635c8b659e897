"""The floor for `vllm-doctor probe`: spawn N ranks that import torch, initialise NCCL
(eagerly, bound to their GPU) and do one all-gather. Nothing less can run a multi-GPU probe.

    python bench/probes/floor.py --nproc 2        # prints the wall time in seconds
    python bench/probes/floor.py --nproc 2 --json # and where it went, per rank

Each rank reports when it started (after the launch), how long `import torch` and the NCCL
initialisation took, and when it finished, all in seconds since the launch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time


def child() -> None:
    launched = float(os.environ["FLOOR_T0"])
    started = time.time() - launched
    t = time.perf_counter()
    import torch
    import torch.distributed as dist

    import_s = time.perf_counter() - t
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    t = time.perf_counter()
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    x = torch.full((1024,), float(rank), device="cuda")
    out = torch.empty(1024 * world, device="cuda")
    dist.all_gather_into_tensor(out, x)
    torch.cuda.synchronize()
    init_s = time.perf_counter() - t
    assert out.view(world, -1)[:, 0].tolist() == [float(r) for r in range(world)]
    print(
        json.dumps(
            {
                "rank": rank,
                "started_s": round(started, 3),
                "import_torch_s": round(import_s, 3),
                "nccl_init_and_allgather_s": round(init_s, 3),
                "finished_s": round(time.time() - launched, 3),
            }
        ),
        flush=True,
    )
    os._exit(0)  # no teardown: the floor does the least that is correct


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the per-rank timings as JSON")
    args = parser.parse_args()
    if args.child:
        child()
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    launched = time.time()
    procs = []
    for rank in range(args.nproc):
        env = dict(
            os.environ,
            RANK=str(rank),
            WORLD_SIZE=str(args.nproc),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            FLOOR_T0=repr(launched),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "--child"], env=env, stdout=subprocess.PIPE, text=True
            )
        )
    outs = [p.communicate()[0] for p in procs]
    elapsed = time.perf_counter() - t0
    codes = [p.returncode for p in procs]
    if args.json:
        ranks = []
        for text in outs:
            for line in text.splitlines():
                with contextlib.suppress(ValueError):
                    ranks.append(json.loads(line))
        print(json.dumps({"elapsed_s": round(elapsed, 3), "ranks": ranks}))
    else:
        print(f"{elapsed:.3f}")
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
