"""Benchmark: what the stack messages (knowledge/data/stack_errors.json) cost `explain --log`.

    python bench/knowledge/bench_stack_catalogue.py --before OLD_stack_errors.json [--rounds 5]

`explain --log LOG` as a user runs it (a subprocess), cold (an empty cache directory: the
compact catalogue is built from errors.json and stack_errors.json, then stored) and warm (the
stored build read back), and in process the build alone (`logmatch.store._compact_catalogue`)
from the shipped table and from ``--before`` (another version of the table, e.g. ``git show
HEAD~1:vllm_doctor/knowledge/data/stack_errors.json``), interleaved round by round.
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
DATA = ROOT / "vllm_doctor" / "knowledge" / "data"
DEFAULT_LOG = ROOT / "bench" / "reports2026" / "reports" / "vllm-49804" / "log.txt"


def run_explain(log: Path, cache: Path) -> float:
    env = {**os.environ, "VLLM_DOCTOR_CACHE_DIR": str(cache)}
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
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    errors = (DATA / "errors.json").read_bytes()
    now, before = (DATA / "stack_errors.json").read_bytes(), args.before.read_bytes()
    times: dict[str, list[float]] = {}
    keys: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, stack in (("before", before), ("now", now)):
            took, keys[name] = build(errors, stack)
            times.setdefault(f"build ({name})", []).append(took)
        with tempfile.TemporaryDirectory() as cache:
            times.setdefault("explain --log, cold (now)", []).append(
                run_explain(args.log, Path(cache))
            )
            times.setdefault("explain --log, warm (now)", []).append(
                run_explain(args.log, Path(cache))
            )
    load = os.getloadavg()[0]
    print(f"log: {args.log.name}; rounds: {args.rounds}; load average {load:.2f}")
    print(f"stack_errors.json: before {len(before):,} bytes, now {len(now):,} bytes")
    print(f"catalogue messages: before {keys['before']:,}, now {keys['now']:,}")
    for name, found in times.items():
        print(f"{name:28} median {statistics.median(found):.3f} s (min {min(found):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
