"""Self-test probes for the runner's own tests: they misbehave on purpose, without torch.

``params["selftest"]`` tunes them: ``{"sleep_rank": R}`` makes only rank R sleep in
``selftest-sleep``; ``{"crash_rank": R}`` likewise for ``selftest-crash``; ``{"teardown":
"soft"|"hard"}`` picks how ``selftest-teardown-hang`` hangs (soft: the teardown call never
returns; hard: the process ignores SIGTERM and never exits); ``{"part_sleep": true}`` makes
the isolated part of ``selftest-part`` never finish; ``{"never_join_rank": R}`` makes rank R of
any run with a process group stop before it joins the group (the others wait for it there);
``{"hold_s": S, "release_file": PATH}``: ``selftest-hold`` holds its process group for S seconds,
or until PATH exists (the test that looks at the held group lets go as soon as it has looked).
"""

from __future__ import annotations

import os
import time

from vllm_doctor.probes._common import Ctx, result


def _cfg(ctx: Ctx) -> dict:
    return ctx.params.get("selftest") or {}


def never_join(rank: int) -> None:
    """A rank that never joins its process group: its process lives on, silent, as a rank
    whose node stalls (a hung mount, a stuck driver call) would."""
    print(f"self-test: rank {rank} will never join its process group", flush=True)
    while True:
        time.sleep(3600)


def run_selftest_ok(ctx: Ctx) -> dict:
    print(f"selftest-ok on rank {ctx.rank} (pid {os.getpid()})", flush=True)
    confirmed = [_cfg(ctx)["confirm"]] if _cfg(ctx).get("confirm") else []
    return result(
        "pass", "ok", {"rank": ctx.rank, "world": ctx.world, "pid": os.getpid()}, confirmed
    )


def run_selftest_hold(ctx: Ctx) -> dict:
    """Holds the process group (gloo on the CPU) open for ``hold_s`` seconds, or until the
    ``release_file`` exists."""
    print(f"selftest-hold: rank {ctx.rank} holding its process group", flush=True)
    until = time.monotonic() + float(_cfg(ctx).get("hold_s", 3))
    release = _cfg(ctx).get("release_file")
    while time.monotonic() < until and not (release and os.path.exists(release)):
        time.sleep(min(0.05, max(0.0, until - time.monotonic())))
    return result("pass", "held", {"rank": ctx.rank, "backend": ctx.dist_backend})


def run_selftest_sleep(ctx: Ctx) -> dict:
    who = _cfg(ctx).get("sleep_rank")
    if who is None or who == ctx.rank:
        print(f"selftest-sleep: rank {ctx.rank} sleeping forever", flush=True)
        while True:
            time.sleep(3600)
    return result("pass", "did not sleep", {"rank": ctx.rank})


def run_selftest_crash(ctx: Ctx) -> dict:
    who = _cfg(ctx).get("crash_rank")
    if who is None or who == ctx.rank:
        print(f"selftest-crash: rank {ctx.rank} about to abort", flush=True)
        os.abort()
    return result("pass", "did not crash", {"rank": ctx.rank})


def run_selftest_raise(ctx: Ctx) -> dict:
    raise ValueError("planned failure in selftest-raise")


def run_selftest_poison(ctx: Ctx) -> dict:
    raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


def run_selftest_teardown_hang(ctx: Ctx) -> dict:
    ctx.hang_teardown = _cfg(ctx).get("teardown", "hard")
    return result("pass", "teardown will hang", {"rank": ctx.rank})


def run_selftest_part(ctx: Ctx) -> dict:
    return result("pass", "main part ok", {"rank": ctx.rank})


def part_child(ctx: Ctx) -> dict:
    if _cfg(ctx).get("part_sleep"):
        while True:
            time.sleep(3600)
    return result("pass", "child ok", {"child_pid": os.getpid()})
