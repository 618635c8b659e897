"""Where a fleet check's time goes beside Ray's own: the fleet check and the floor (a trivial task
pinned to every node, as overhead.py's floor) each run in a process that records, on one clock,
when it started, when each node's task began and ended there, when each answer came back and
when the process was done. The time before the first task begins is Ray's (connect, start one
worker per node with the runtime environment); what the doctor adds is its share of the time
from the last task's start to the end (collect there, answer, judge, report, disconnect), and
any delay it causes before. Worker start-up varies by seconds on a loaded machine; these
figures are taken inside one run each, so that variation falls out of them.

    python bench/fleet/timeline.py 3 8 --reps 6 --bytecode cached --raw OUT.jsonl
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# the fleet check, in-process, its node task and its answers timed (wrapping, not changing, them)
FLEET = r"""
import json, sys, time
t0 = time.time()
import vllm_doctor.fleet.ray_engine as engine
import vllm_doctor.fleet.remote as remote
collect = remote.collect_node
def timed_collect(serve_argv):
    import time
    begun = time.time()
    out = collect(serve_argv)
    out["_span"] = (begun, time.time())
    return out
remote.collect_node = timed_collect
spans, answers = [], []
answer = engine._answer
def timed_answer(ray, node, ref, started):
    answers.append(time.time())
    spans.append(ray.get(ref, timeout=0).get("_span"))
    answer(ray, node, ref, started)
engine._answer = timed_answer
from vllm_doctor.cli import main
sys.argv = ["vllm-doctor", "fleet", "--ray", sys.argv[1], "--format", "json"]
import contextlib, io
try:
    with contextlib.redirect_stdout(io.StringIO()):
        main()
except SystemExit:
    pass
print(json.dumps({"t0": t0, "begun": [s[0] for s in spans], "ended": [s[1] for s in spans],
                  "answers": answers, "end": time.time()}))
"""

FLOOR = r"""
import json, sys, time
t0 = time.time()
import vllm_doctor.cli
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from vllm_doctor.fleet.ray_engine import _runtime_env
env, _ = _runtime_env("upload")
ray.init(address=sys.argv[1], runtime_env=env, logging_level="ERROR", log_to_driver=False,
         configure_logging=False)
def body():
    import time
    return time.time()
noop = ray.remote(num_cpus=0, max_retries=0)(body)
refs = [noop.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in ray.nodes() if n["Alive"]]
begun = ray.get(refs)
got = time.time()
ray.shutdown()
print(json.dumps({"t0": t0, "begun": begun, "ended": begun, "answers": [got], "end": time.time()}))
"""


def run(script, address, cwd, env):
    done = subprocess.run(
        [sys.executable, "-c", script, address],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env=env,
    )
    m = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "first_task_begins_s": min(m["begun"]) - m["t0"],
        "last_task_begins_s": max(m["begun"]) - m["t0"],
        "last_task_ends_s": max(m["ended"]) - m["t0"],
        "last_answer_s": max(m["answers"]) - m["t0"],
        "after_last_task_begins_s": m["end"] - max(m["begun"]),
        "after_last_answer_s": m["end"] - max(m["answers"]),
        "in_process_s": m["end"] - m["t0"],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[3, 8])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--bytecode", choices=("as-is", "cached"), default="cached")
    parser.add_argument("--raw")
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    with tempfile.TemporaryDirectory(prefix="fleet-timeline-") as scratch:
        env = dict(os.environ)
        if args.bytecode == "cached":
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
        os.environ.clear()
        os.environ.update(env)
        raw = open(args.raw, "a") if args.raw else None  # noqa: SIM115
        for n in args.sizes:
            c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
            for _ in range(n - 1):
                c.add_node(num_cpus=1)
            c.wait_for_nodes()
            run(FLEET, c.address, scratch, env)  # warm-up: runtime environment, bytecode
            rows = []
            for rep in range(args.reps):
                row = {"nodes": n, "rep": rep, "bytecode": args.bytecode}
                for name in ("fleet", "floor") if rep % 2 == 0 else ("floor", "fleet"):
                    time.sleep(args.settle)
                    row[name] = run(FLEET if name == "fleet" else FLOOR, c.address, scratch, env)
                row["load"] = os.getloadavg()[0]
                rows.append(row)
                if raw:
                    raw.write(json.dumps(row) + "\n")
                    raw.flush()
            c.shutdown()

            def med(who, key, rows=rows):
                values = sorted(r[who][key] for r in rows)
                return f"{statistics.median(values):.2f} ({values[0]:.2f}-{values[-1]:.2f})"

            extra = sorted(
                r["fleet"]["after_last_task_begins_s"] - r["floor"]["after_last_task_begins_s"]
                for r in rows
            )
            print(
                f"{n} nodes, bytecode {args.bytecode}, median (range) of {args.reps}: first task "
                f"begins fleet {med('fleet', 'first_task_begins_s')} floor "
                f"{med('floor', 'first_task_begins_s')} s; last task begins fleet "
                f"{med('fleet', 'last_task_begins_s')} floor {med('floor', 'last_task_begins_s')}"
                f" s; from the last task's start to the end: fleet "
                f"{med('fleet', 'after_last_task_begins_s')} floor "
                f"{med('floor', 'after_last_task_begins_s')} s, the difference per run "
                f"{statistics.median(extra):+.2f} ({extra[0]:+.2f} .. {extra[-1]:+.2f}) s; after "
                f"the last answer: fleet {med('fleet', 'after_last_answer_s')} floor "
                f"{med('floor', 'after_last_answer_s')} s; load average "
                f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}",
                flush=True,
            )
        if raw:
            raw.close()


if __name__ == "__main__":
    main()
