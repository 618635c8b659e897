"""Fleet check of N simulated nodes (Ray's multi-node test cluster on one machine) against its
floor: Ray's own start (import ray, connect, one trivial task pinned to every node with the same
runtime environment, disconnect, and the command's own start) plus one node's `facts` time.

    python bench/fleet/overhead.py 3 8                              # results: RESULTS.md
    python bench/fleet/overhead.py 3 8 --baseline /tmp/fleet-base   # side by side with another
                                                                    # checkout (git archive)

Each size gets its own cluster; each repetition (median of --reps) runs, back to back, the fleet
check of this checkout, that of the baseline checkout when given (PYTHONPATH first), the floor
and one node's facts.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from ray.cluster_utils import Cluster

FLOOR = r"""
import sys, time
t = time.perf_counter()
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from vllm_doctor.fleet.ray_engine import _runtime_env
env, _ = _runtime_env("upload")
ray.init(address=sys.argv[1], runtime_env=env, logging_level="ERROR", log_to_driver=False,
         configure_logging=False)
noop = ray.remote(num_cpus=0, max_retries=0)(lambda: 1)
refs = [noop.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in ray.nodes() if n["Alive"]]
ray.get(refs)
ray.shutdown()
print(time.perf_counter() - t)
"""


def timed(cmd, env=None):
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    return time.perf_counter() - start, done


def fleet(py, address, env=None):
    """(seconds, the command's own timings, the slowest node's collection in this run)."""
    took, done = timed(
        [py, "-m", "vllm_doctor", "fleet", "--ray", address, "--format", "json"], env=env
    )
    doc = json.loads(done.stdout)
    assert all(n["answered"] for n in doc["fleet"]["nodes"]), done.stderr
    slowest = max(n["seconds"] for n in doc["fleet"]["nodes"])
    return took, doc["fleet"]["timings_s"], slowest


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[3, 8])
    parser.add_argument("--baseline", help="another checkout's root (vllm_doctor/ in it)")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    py = sys.executable
    base_env = None
    if args.baseline:
        base_env = dict(os.environ, PYTHONPATH=args.baseline)
    for n in args.sizes:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        for _ in range(n - 1):
            c.add_node(num_cpus=1)
        c.wait_for_nodes()
        rows = []
        for _ in range(args.reps):
            new, timings, slowest = fleet(py, c.address)
            base = fleet(py, c.address, base_env)[0] if base_env else float("nan")
            _, done = timed([py, "-c", FLOOR, c.address])
            floor = float(done.stdout.strip().splitlines()[-1])
            cli, _ = timed([py, "-c", "import vllm_doctor.cli"])  # the command's own start
            facts, _ = timed([py, "-m", "vllm_doctor", "facts", "--format", "json"])
            rows.append((new, base, floor + cli, facts, timings.get("judge_s", 0.0), slowest))
        f, b, r, k, j, s = (statistics.median(x) for x in zip(*rows, strict=True))
        line = (
            f"{n} nodes: fleet {f:.2f} s (judging {j:.2f} s, slowest node's collection {s:.2f} "
            f"s); Ray's own start {r:.2f} s; one node's facts {k:.2f} s; fleet - (Ray + facts) "
            f"= {f - r - k:+.2f} s; fleet - (Ray + slowest collection) = {f - r - s:+.2f} s"
        )
        if base_env:
            line += f"; baseline fleet {b:.2f} s, - (Ray + facts) = {b - r - k:+.2f} s"
        print(line + f" (median of {args.reps})", flush=True)
        c.shutdown()


if __name__ == "__main__":
    main()
