"""Development check on a single GPU: run the multi-rank probes' code at world size 1.

At world size 1 the mechanisms do not reproduce (the "shard" is the whole weight), but every
kernel, collective and timing path of tp-softembed, pp-handoff and p2p-nccl runs on the GPU,
which catches API drift of the installed torch before a multi-GPU run.

    PYTHONPATH=. python bench/probes/dev_world1.py
"""

from __future__ import annotations

import json
import time
import traceback

import torch
import torch.distributed as dist

from vllm_doctor.probes import p2p_nccl, pp_handoff, tp_softembed
from vllm_doctor.probes._common import Ctx


def main() -> None:
    torch.cuda.set_device(0)
    t = time.perf_counter()
    dist.init_process_group(
        "nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cuda", 0)
    )
    init = {"dist_init_s": round(time.perf_counter() - t, 3)}
    ctx = Ctx(
        rank=0,
        world=1,
        local_rank=0,
        device_kind="cuda",
        params={"tp": 2},
        emit=lambda ev: print("  ", ev.get("msg")),
        dist_backend="nccl",
        init=init,
    )
    for mod in (tp_softembed, pp_handoff, p2p_nccl):
        ctx.probe = mod.__name__
        t = time.perf_counter()
        try:
            res = mod.run(ctx)
        except Exception:
            traceback.print_exc()
            continue
        print(mod.__name__, f"{time.perf_counter() - t:.2f}s", json.dumps(res, default=str)[:1500])
    t = time.perf_counter()
    res = tp_softembed.part_compile(ctx)
    print("compile part", f"{time.perf_counter() - t:.2f}s", json.dumps(res, default=str))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
