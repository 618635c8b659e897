"""Fleet check of N simulated nodes (Ray's multi-node test cluster on one machine) against its
floor: Ray's own start plus one node's `facts` time (`vllm-doctor facts --format json`, a whole
process). Ray's own start is a whole process that does what the fleet check cannot avoid but
collecting and judging: start Python, import the doctor's CLI, import Ray, connect with the same
runtime environment, run one trivial task pinned to every node, disconnect, exit. (Earlier
figures counted the same steps timed inside the process plus a separate `import vllm_doctor.cli`
process: that leaves out the interpreter's exit after importing Ray, 0.3-0.5 s here, which the
fleet check pays as a whole process. Both are recorded; the summary prints both excesses.)

    python bench/fleet/overhead.py 3 8 --reps 8 --raw OUT.jsonl      # results: RESULTS.md
    python bench/fleet/overhead.py 3 8 --bytecode cached ...         # as a pip install runs
    python bench/fleet/overhead.py 3 --baseline /tmp/fleet-base      # beside another checkout

Each size gets its own cluster. Each repetition runs the fleet check of this checkout, the floor,
one node's facts (and the baseline checkout's fleet check when given), in an order that turns
round from one repetition to the next (A B C, C B A, ...; give an even --reps) so that a drift
of the machine's load falls on every figure alike, each after a pause (--settle) in which the
previous command's Ray workers exit (without it, whichever command ran first in a repetition,
right after another Ray job, was 1-2 s slower at 8 nodes); the excess (fleet - floor - facts)
is taken within a repetition, and its median and range over the repetitions are printed with
the load average seen.

Every command runs from an empty folder: Ray puts the driver's working folder first on its
workers' module path, and the floor's tasks, like the fleet check's, should not find a checkout
there (the fleet check itself connects from an empty folder of its own).

--bytecode: `as-is` leaves Python's bytecode cache as the environment sets it (a shell with
PYTHONDONTWRITEBYTECODE=1 and a checkout without __pycache__ compiles every module of the doctor
in every process, the nodes' included); `cached` gives every process, the cluster's, a bytecode
cache in a folder of its own (PYTHONPYCACHEPREFIX), as after `pip install`, which compiles the
package's bytecode, or on a node whose Ray runtime environment has run the doctor once.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

FLOOR = r"""
import sys, time
t = time.perf_counter()
import vllm_doctor.cli  # the command's own start
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


def timed(cmd, cwd, env):
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=cwd)
    return time.perf_counter() - start, done


def fleet(py, address, cwd, env):
    """The fleet check's seconds and what its JSON says of itself."""
    took, done = timed(
        [py, "-m", "vllm_doctor", "fleet", "--ray", address, "--format", "json"], cwd, env
    )
    doc = json.loads(done.stdout)
    nodes = doc["fleet"]["nodes"]
    assert all(n["answered"] for n in nodes), done.stderr
    return took, {
        "timings_s": doc["fleet"]["timings_s"],
        "slowest_node_s": max(n["seconds"] for n in nodes),
        "doctor_on_nodes": sorted({str(n.get("doctor")) for n in nodes}),
    }


def environment(bytecode, scratch):
    env = dict(os.environ)
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
    return env


def one_size(n, args, py, scratch, env, raw):
    from ray.cluster_utils import Cluster

    os.environ.clear()
    os.environ.update(env)  # the cluster's processes (and so the nodes' tasks) inherit it
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(n - 1):
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    base_env = dict(env, PYTHONPATH=args.baseline) if args.baseline else None
    runs = {
        "fleet": lambda: fleet(py, c.address, scratch, env),
        "floor": lambda: timed([py, "-c", FLOOR, c.address], scratch, env),
        "cli": lambda: timed([py, "-c", "import vllm_doctor.cli"], scratch, env),
        "facts": lambda: timed(
            [py, "-m", "vllm_doctor", "facts", "--format", "json"], scratch, env
        ),
    }
    if base_env:
        runs["baseline"] = lambda: fleet(py, c.address, scratch, base_env)
    order = list(runs)
    for _ in range(args.warmup):  # the runtime environment unpacked, bytecode written
        runs["fleet"]()
        runs["floor"]()
    rows = []
    for rep in range(args.reps):
        row = {"nodes": n, "rep": rep, "bytecode": args.bytecode, "load_before": os.getloadavg()}
        for name in order if rep % 2 == 0 else order[::-1]:
            # the last job's workers are still exiting after a command: each starts alike
            time.sleep(args.settle)
            took, extra = runs[name]()
            if name == "floor":
                row["floor_in_process_s"] = float(extra.stdout.strip().splitlines()[-1])
            elif name in ("fleet", "baseline"):
                row[name + "_detail"] = extra
            row[name + "_s"] = took
        row["load_after"] = os.getloadavg()
        row["ray_start_s"] = row["floor_s"]  # the whole process
        row["excess_s"] = row["fleet_s"] - row["ray_start_s"] - row["facts_s"]
        # as first measured: the floor timed inside its process, plus importing the CLI
        row["ray_start_in_process_s"] = row["floor_in_process_s"] + row["cli_s"]
        row["excess_in_process_floor_s"] = (
            row["fleet_s"] - row["ray_start_in_process_s"] - row["facts_s"]
        )
        if base_env:
            row["baseline_excess_s"] = row["baseline_s"] - row["ray_start_s"] - row["facts_s"]
        rows.append(row)
        if raw:
            raw.write(json.dumps(row) + "\n")
            raw.flush()
    c.shutdown()
    return rows


def summary(n, rows, bytecode):
    def med(key):
        return statistics.median(r[key] for r in rows)

    excess = sorted(r["excess_s"] for r in rows)
    loads = [x for r in rows for x in (r["load_before"][0], r["load_after"][0])]
    line = (
        f"{n} nodes, bytecode {bytecode}: fleet {med('fleet_s'):.2f} s; Ray's own start "
        f"{med('ray_start_s'):.2f} s; one node's facts {med('facts_s'):.2f} s; excess "
        f"(fleet - Ray - facts, per repetition) median {statistics.median(excess):+.2f} s, "
        f"range {excess[0]:+.2f} .. {excess[-1]:+.2f} s over {len(rows)}; slowest node's "
        f"collection median {statistics.median(r['fleet_detail']['slowest_node_s'] for r in rows):.2f}"
        f" s; load average (1 min) {min(loads):.1f}-{max(loads):.1f}"
    )
    inner = sorted(r["excess_in_process_floor_s"] for r in rows)
    line += (
        f"; against the floor timed inside its process (+ importing the CLI) "
        f"{med('ray_start_in_process_s'):.2f} s: excess median {statistics.median(inner):+.2f} s, "
        f"range {inner[0]:+.2f} .. {inner[-1]:+.2f} s"
    )
    if "baseline_excess_s" in rows[0]:
        line += f"; baseline excess median {med('baseline_excess_s'):+.2f} s"
    return line


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[3, 8])
    parser.add_argument("--baseline", help="another checkout's root (vllm_doctor/ in it)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before each command")
    parser.add_argument("--bytecode", choices=("as-is", "cached"), default="as-is")
    parser.add_argument("--raw", help="append each repetition's figures here (JSON lines)")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as scratch:
        env = environment(args.bytecode, scratch)
        work = os.path.join(scratch, "cwd")
        os.mkdir(work)
        raw = open(args.raw, "a") if args.raw else None  # noqa: SIM115
        try:
            for n in args.sizes:
                rows = one_size(n, args, py, work, env, raw)
                print(summary(n, rows, args.bytecode), flush=True)
        finally:
            if raw:
                raw.close()


if __name__ == "__main__":
    main()
