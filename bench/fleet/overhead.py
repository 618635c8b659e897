"""Fleet check of N simulated nodes (Ray's multi-node test cluster on one machine) against its
floor: Ray's own start (connect + one trivial task pinned to every node with the same runtime
environment + disconnect) plus one node's `facts` time.

    python bench/fleet/overhead.py 3 8      # results: bench/fleet/RESULTS.md
"""

import statistics
import subprocess
import sys
import time

from ray.cluster_utils import Cluster

FLOOR = r"""
import sys, time, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from vllm_doctor.fleet.ray_engine import _runtime_env
env, _ = _runtime_env("upload")
t = time.perf_counter()
ray.init(address=sys.argv[1], runtime_env=env, logging_level="ERROR", log_to_driver=False,
         configure_logging=False)
noop = ray.remote(num_cpus=0, max_retries=0)(lambda: 1)
refs = [noop.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in ray.nodes() if n["Alive"]]
ray.get(refs)
ray.shutdown()
print(time.perf_counter() - t)
"""


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False)
    return time.perf_counter() - start


def main(sizes):
    py = sys.executable
    for n in sizes:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        for _ in range(n - 1):
            c.add_node(num_cpus=1)
        c.wait_for_nodes()
        rows = []
        for _ in range(3):
            fleet = timed(
                [py, "-m", "vllm_doctor", "fleet", "--ray", c.address, "--format", "json"]
            )
            floor = float(
                subprocess.run([py, "-c", FLOOR, c.address], capture_output=True, text=True)
                .stdout.strip()
                .splitlines()[-1]
            )
            floor_cli = timed([py, "-c", "import vllm_doctor.cli"])  # the command's own start
            facts = timed([py, "-m", "vllm_doctor", "facts", "--format", "json"])
            rows.append((fleet, floor + floor_cli, facts))
        f, r, k = (statistics.median(x) for x in zip(*rows, strict=True))
        print(
            f"{n} nodes: fleet {f:.2f} s; Ray's own start {r:.2f} s; one node's facts {k:.2f} s; "
            f"fleet - (Ray + facts) = {f - r - k:+.2f} s (median of 3)"
        )
        c.shutdown()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [3, 8])
