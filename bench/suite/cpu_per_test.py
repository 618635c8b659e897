"""The CPU time each test costs, its subprocesses and fork servers included (bench/suite/RESULTS.md,
sixth pass). A pytest plugin; from the checkout root:

    PYTHONPATH=bench/suite SUITE_CPU_DIR=/tmp/cpu python -m pytest -q -n 2 -p cpu_per_test FILES
    python bench/suite/cpu_per_test.py /tmp/cpu          # per file, the costliest tests, workers

A test's CPU is what the test process and every process under it spent between the test's start
and its end: the process's own time, its waited-for children's (``RUSAGE_CHILDREN``) and, for
each process still under it (a fork server, a Ray cluster, a rank that has not been waited
for), that process's own and waited-for children's time from ``/proc/PID/stat``. A process that
ends during the test moves from the last sum into its parent's, so each CPU second is counted
once. Resolution: the kernel's clock tick (10 ms) per process.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _descendants_cpu(root: int) -> float:
    """User + system time of every live process under ``root`` (not root itself), each with
    the time of the children it has waited for."""
    total = 0.0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                    children = [int(c) for c in fh.read().split()]
            except OSError:
                continue
            for child in children:
                try:
                    with open(f"/proc/{child}/stat", encoding="ascii", errors="replace") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                # fields[11:15]: utime, stime, cutime, cstime (stat(5), counted from state)
                total += sum(int(f) for f in fields[11:15]) / _TICK
                stack.append(child)
    return total


def _tree_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + _descendants_cpu(os.getpid())


class _Recorder:
    def __init__(self, out: Path):
        self.out = out
        self.start_cpu = 0.0
        self.start_wall = 0.0

    def pytest_runtest_logstart(self, nodeid, location):
        self.start_cpu = _tree_cpu()
        self.start_wall = time.time()

    def pytest_runtest_logfinish(self, nodeid, location):
        row = {
            "test": nodeid,
            "cpu": round(_tree_cpu() - self.start_cpu, 3),
            "start": round(self.start_wall, 3),
            "end": round(time.time(), 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        }
        with open(self.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    def pytest_sessionfinish(self, session):
        with open(self.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"session_cpu": round(_tree_cpu(), 3)}) + "\n")


def pytest_configure(config):
    folder = os.environ.get("SUITE_CPU_DIR")
    if not folder:
        return
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        return  # the xdist controller: its workers record
    Path(folder).mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    config.pluginmanager.register(
        _Recorder(Path(folder) / f"{worker}.jsonl"), "cpu_per_test_recorder"
    )


def summarize(folder: Path, top: int = 40) -> None:
    rows, sessions = [], {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if "session_cpu" in row:
                sessions[path.stem] = row["session_cpu"]
            else:
                rows.append(row)
    per_file: dict[str, float] = collections.defaultdict(float)
    for row in rows:
        per_file[row["test"].split("::")[0]] += row["cpu"]
    print(f"{len(rows)} tests, {sum(r['cpu'] for r in rows):.1f} s of CPU in tests")
    for worker, cpu in sorted(sessions.items()):
        mine = [r for r in rows if r["worker"] == worker]
        last = max(mine, key=lambda r: r["end"]) if mine else None
        print(f"  {worker}: session {cpu:.1f} s CPU, last test ended {last and last['test']}")
    print("\nper file (CPU s):")
    for name, cpu in sorted(per_file.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {cpu:8.2f}  {name}")
    print("\ncostliest tests (CPU s, wall s, worker):")
    for row in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(
            f"  {row['cpu']:8.2f} {row['end'] - row['start']:7.2f}  {row['worker']}  {row['test']}"
        )
    if rows:
        first = min(r["start"] for r in rows)
        print("\nthe last tests of each worker (ended at, seconds from the first start):")
        for worker in sorted({r["worker"] for r in rows}):
            mine = sorted((r for r in rows if r["worker"] == worker), key=lambda r: r["end"])
            for row in mine[-3:]:
                print(f"  {worker} {row['end'] - first:7.1f}  {row['test']}")


if __name__ == "__main__":
    summarize(Path(sys.argv[1]))
