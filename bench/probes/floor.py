"""The floor for `vllm-doctor probe`: spawn N ranks that import torch, initialise NCCL
(eagerly, bound to their GPU) and do one all-gather. Nothing less can run a multi-GPU probe.

    python bench/probes/floor.py --nproc 2        # prints the wall time in seconds
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time


def child() -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    x = torch.full((1024,), float(rank), device="cuda")
    out = torch.empty(1024 * world, device="cuda")
    dist.all_gather_into_tensor(out, x)
    torch.cuda.synchronize()
    assert out.view(world, -1)[:, 0].tolist() == [float(r) for r in range(world)]
    sys.stdout.flush()
    os._exit(0)  # no teardown: the floor does the least that is correct


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child()
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.nproc), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, "--child"], env=env))
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - t0
    print(f"{elapsed:.3f}")
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
