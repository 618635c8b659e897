"""Benchmark: `vllm-doctor check` against `vllm-doctor facts` on the same inputs.

Target (issue): check with the shipped rule base (>= 50 rules) stays within 0.1 s of facts,
as installed (the modules' bytecode cached); also timed with sources only (no .pyc files).
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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "gemma4-mtp-tp2"
SERVE = (
    "vllm serve google/gemma-4-E2B-it --tensor-parallel-size 2 --speculative-config "
    '\'{"method": "mtp", "model": "gg-hf-am/gemma-4-E2B-it-assistant", '
    '"num_speculative_tokens": 1}\''
)
INPUTS = [
    "--serve",
    SERVE,
    "--model-config",
    str(EXAMPLE / "model"),
    "--report",
    str(EXAMPLE / "collect-env.txt"),
    "--format",
    "json",
]


def wall(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "vllm_doctor", *args], capture_output=True, env=env)
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
    # As installed, the doctor's modules have bytecode (pip compiles them); a checkout run in
    # place with PYTHONDONTWRITEBYTECODE=1 compiles them on every run instead, and check
    # imports more of them than facts. Both are timed, in the same interleaved rounds.
    pyc = tempfile.mkdtemp(prefix="bench-check-pyc-")
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    envs = {
        "bytecode": dict(base, PYTHONPYCACHEPREFIX=pyc),
        "sources": dict(base, PYTHONDONTWRITEBYTECODE="1"),
    }  # as a checkout run in place
    commands = {"facts": ["facts", *INPUTS], "check": ["check", *INPUTS, "--fail-on", "never"]}
    cases = {(cmd, how): (argv, env) for how, env in envs.items() for cmd, argv in commands.items()}
    for argv, env in cases.values():  # warm the page cache and write the bytecode
        wall(argv, env)
    times: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for _ in range(args.rounds):
        for case, (argv, env) in cases.items():
            times[case].append(wall(argv, env))
    shutil.rmtree(pyc, ignore_errors=True)
    med = {case: statistics.median(t) for case, t in times.items()}
    lines = [
        f"date: {dt.date.today()}  machine: {platform.node()} ({os.cpu_count()} cores), "
        f"python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}",
        f"rules: {n_rules}; rounds: {args.rounds} (interleaved)",
    ]
    for how in envs:
        lines += [
            f"{cmd:6} {how:8} median {med[cmd, how]:.3f} s  (min {min(times[cmd, how]):.3f}, "
            f"max {max(times[cmd, how]):.3f})"
            for cmd in commands
        ]
    lines += [
        f"check - facts, {how}: {med['check', how] - med['facts', how]:+.3f} s"
        + (
            " (target: at most +0.100 s)"
            if how == "bytecode"
            else " (the doctor's modules without .pyc files: each run compiles those it imports)"
        )
        for how in envs
    ]
    print("\n".join(lines))
    if args.write:
        out = ROOT / "bench" / "check" / "RESULTS.md"
        out.write_text(
            "# check vs facts\n\nCommand: `python bench/check/bench_check.py --rounds "
            f"{args.rounds} --write`\n\n```\n" + "\n".join(lines) + "\n```\n"
        )


if __name__ == "__main__":
    main()
