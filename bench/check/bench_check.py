"""Benchmark: `vllm-doctor check` against `vllm-doctor facts` on the same inputs.

Target (issue): check with the shipped rule base (>= 50 rules) stays within 0.1 s of facts.
Both commands run as subprocesses, interleaved round by round in this one process of
measurement, on a full machine state: a collect-env report, a model directory and a serve line
(the bundled example `gemma4-mtp-tp2`), plus this machine's own collectors.

    python bench/check/bench_check.py [--rounds 15] [--write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "gemma4-mtp-tp2"
SERVE = ("vllm serve google/gemma-4-E2B-it --tensor-parallel-size 2 --speculative-config "
         "'{\"method\": \"mtp\", \"model\": \"gg-hf-am/gemma-4-E2B-it-assistant\", "
         "\"num_speculative_tokens\": 1}'")
INPUTS = ["--serve", SERVE, "--model-config", str(EXAMPLE / "model"),
          "--report", str(EXAMPLE / "collect-env.txt"), "--format", "json"]


def wall(args: list[str]) -> float:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "vllm_doctor", *args], capture_output=True)
    elapsed = time.perf_counter() - start
    if run.returncode not in (0, 1):
        raise SystemExit(f"{args[0]} failed: {run.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--write", action="store_true", help="write bench/check/RESULTS.md")
    args = parser.parse_args()
    from vllm_doctor.engine.loader import load_rules

    n_rules = len(load_rules())
    cases = {"facts": ["facts", *INPUTS], "check": ["check", *INPUTS, "--fail-on", "never"]}
    for argv in cases.values():  # warm the page cache and .pyc files
        wall(argv)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, argv in cases.items():
            times[name].append(wall(argv))
    med = {name: statistics.median(t) for name, t in times.items()}
    lines = [
        f"date: {dt.date.today()}  machine: {platform.node()} ({os.cpu_count()} cores), "
        f"python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}",
        f"rules: {n_rules}; rounds: {args.rounds} (interleaved)",
        *(f"{name:6} median {med[name]:.3f} s  (min {min(t):.3f}, max {max(t):.3f})"
          for name, t in times.items()),
        f"check - facts: {med['check'] - med['facts']:+.3f} s (target: at most +0.100 s)",
    ]
    print("\n".join(lines))
    if args.write:
        out = ROOT / "bench" / "check" / "RESULTS.md"
        out.write_text("# check vs facts\n\nCommand: `python bench/check/bench_check.py --rounds "
                       f"{args.rounds} --write`\n\n```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
