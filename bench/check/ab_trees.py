"""A/B: `facts` and `check` of two source trees, interleaved, under the same machine load.

    git worktree add --detach /tmp/main-bench main
    python bench/check/ab_trees.py /tmp/main-bench . --rounds 8

Each tree runs with its own package (PYTHONPATH) and its own rules (--rules-dir), on the
bundled example `gemma4-mtp-tp2`; the order of the trees alternates round by round. Use it when
the machine is too loaded for bench_check.py's absolute target: the difference between the
trees is what a change costs.

`--inputs unknown-version` times a model config and a serve line on this machine instead,
where no vLLM is installed: the version is unknown, so the newer doctor judges the
version-dependent rules over every covered release. The Hub is never asked (HF_HUB_OFFLINE).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The same inputs as bench_check.py (this directory is on sys.path when run as a script).
from bench_check import EXAMPLE, INPUTS

UNKNOWN_VERSION = [
    "--serve",
    "vllm serve google/gemma-4-E2B-it --tensor-parallel-size 2",
    "--model-config",
    str(EXAMPLE / "model"),
    "--format",
    "json",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, type=Path)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--inputs", choices=("example", "unknown-version"), default="example")
    args = parser.parse_args()
    inputs = INPUTS if args.inputs == "example" else UNKNOWN_VERSION
    trees = [t.resolve() for t in args.trees]
    times: dict[tuple[Path, str], list[float]] = {}
    for round_ in range(args.rounds):
        for tree in trees if round_ % 2 == 0 else trees[::-1]:
            for command in ("facts", "check"):
                # each tree with its own rules only
                extra = (
                    ["--no-default-rules", "--rules-dir", str(tree / "rules")]
                    if command == "check"
                    else []
                )
                start = time.perf_counter()
                run = subprocess.run(
                    [sys.executable, "-m", "vllm_doctor", command, *inputs, *extra],
                    capture_output=True,
                    cwd=tree,
                    env=dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1"),
                )
                times.setdefault((tree, command), []).append(time.perf_counter() - start)
                if run.returncode not in (0, 1):
                    sys.exit(f"{tree} {command}: {run.stderr.decode()[-400:]}")
    print(f"load average {os.getloadavg()[0]:.2f}; rounds {args.rounds} (interleaved)")
    for tree in trees:
        facts = statistics.median(times[(tree, "facts")])
        check = statistics.median(times[(tree, "check")])
        print(
            f"{tree}: facts {facts:.3f} s, check {check:.3f} s, check - facts {check - facts:+.3f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
