"""Benchmark: what the stack messages (knowledge/data/stack_errors.json) cost `explain --log`.

    git worktree add --detach /tmp/before <commit>
    python bench/knowledge/bench_stack_catalogue.py --before /tmp/before [--rounds 5]

`explain --log LOG` as a user runs it (a subprocess), from this tree and from ``--before`` (a
checkout of another commit, imported through PYTHONPATH), interleaved round by round: cold (an
empty cache directory: the compact catalogue is built from errors.json and stack_errors.json,
then stored) and warm (the stored build read back); and in process the build alone
(`logmatch.store._compact_catalogue`) from each tree's table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_LOG = ROOT / "bench" / "reports2026" / "reports" / "vllm-49804" / "log.txt"


def run_explain(log: Path, cache: Path, tree: Path) -> float:
    env = {**os.environ, "VLLM_DOCTOR_CACHE_DIR": str(cache), "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "explain", "--log", str(log)],
        env=env,
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - start


def build(errors: bytes, stack: bytes) -> tuple[float, int]:
    from vllm_doctor.engine.logmatch.store import _compact_catalogue

    start = time.perf_counter()
    compact = _compact_catalogue(errors, stack)
    return time.perf_counter() - start, len(compact["keys"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout to compare")
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "now": ROOT}
    tables = {
        name: (
            (tree / "vllm_doctor/knowledge/data/errors.json").read_bytes(),
            (tree / "vllm_doctor/knowledge/data/stack_errors.json").read_bytes(),
        )
        for name, tree in trees.items()
    }
    times: dict[str, list[float]] = {}
    keys: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            took, keys[name] = build(*tables[name])
            times.setdefault(f"catalogue build ({name})", []).append(took)
            with tempfile.TemporaryDirectory() as cache:
                cold = run_explain(args.log, Path(cache), tree)
                warm = run_explain(args.log, Path(cache), tree)
            times.setdefault(f"explain --log, cold ({name})", []).append(cold)
            times.setdefault(f"explain --log, warm ({name})", []).append(warm)
    load = os.getloadavg()[0]
    print(f"log: {args.log}; rounds: {args.rounds}; load average {load:.2f}")
    for name in trees:
        print(
            f"{name}: stack_errors.json {len(tables[name][1]):,} bytes, "
            f"{keys[name]:,} catalogue messages"
        )
    for name, found in sorted(times.items()):
        print(f"{name:32} median {statistics.median(found):.3f} s (min {min(found):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
