"""The doctor's own CPU per forked command-line run (bench/suite/RESULTS.md, eighth pass).

    python bench/suite/doctor_cost.py cpu [ROUNDS]        # CPU of each command's child
    python bench/suite/doctor_cost.py profile [N] [CMD]   # cProfile of the children, top N

The process imports what tests/fixtures/doctor_forks.py's servers import (PRELOAD) and loads
the shipped rules once, as those servers do, then forks one child per run of each command
below (the kinds of `check` the suite repeats: version-less serve lines, a host check, a
report, a dev build's report, a manifest, a serve config). ``cpu`` prints each command's CPU
(user + sys of the child, from ``os.wait4``), the median of ROUNDS runs, and their sum;
``profile`` merges the children's cProfile statistics (of command CMD only, given its index)
and prints the N costliest functions by cumulative time.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pstats
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "fixtures")]
for name in ("VLLM_DOCTOR_CACHE_DIR", "VLLM_DOCTOR_STATE_DIR"):  # as tests/conftest.py does
    os.environ.setdefault(name, tempfile.mkdtemp(prefix="vllm-doctor-bench-"))

EXAMPLE = ROOT / "vllm_doctor" / "examples"
REPORTS = ROOT / "tests" / "fixtures" / "reports"
COMMANDS: list[list[str]] = [
    ["check", "--offline", "--serve", "vllm serve m -tp 2", "--format", "json"],
    ["check", "--offline", "--serve", "vllm serve org/m -tp 2 --task embed --api-key x"],
    ["check", "--offline", "--elsewhere", "--serve", "vllm serve m --max-model-len 8192"],
    ["check", "--offline", "--serve", "vllm serve m", "--vllm-version", "0.14.0"],
    ["check", "--offline", "--report", str(REPORTS / "h100x8_nvlink_nightly.txt")],
    ["check", "--offline", "--report", str(REPORTS / "rtx3090_x2_driver535.txt"),
     "--serve", "vllm serve m -tp 2"],
    ["check", "--offline", "--manifest",
     str(ROOT / "tests" / "fixtures" / "manifests" / "deployments" / "aibrix-qwen-vl.yaml")],
    ["facts", "--offline", "--serve", "vllm serve m"],
]  # fmt: skip


def _preload() -> None:
    import doctor_forks

    from vllm_doctor.engine import loader

    for name in doctor_forks.PRELOAD:
        __import__(name)
    loader.load_rules()
    gc.collect()
    gc.freeze()


def _child(argv: list[str], profile_to: str | None) -> None:
    from vllm_doctor import cli

    out, err = io.StringIO(), io.StringIO()
    profiler = None
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        contextlib.suppress(SystemExit),
    ):
        cli.main(argv)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_to)
    os._exit(0)


def _fork(argv: list[str], profile_to: str | None = None) -> float:
    pid = os.fork()
    if pid == 0:
        try:
            _child(argv, profile_to)
        finally:
            os._exit(3)
    _, status, usage = os.wait4(pid, 0)
    if status:
        raise SystemExit(f"{argv}: child ended with status {status}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    _preload()
    if mode == "cpu":
        rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
        total = 0.0
        for argv in COMMANDS:
            runs = [_fork(argv) for _ in range(rounds)]
            total += statistics.median(runs)
            print(f"{statistics.median(runs):.3f} s  (min {min(runs):.3f})  {' '.join(argv)[:90]}")
        print(f"{total:.3f} s  the sum of the medians")
        return
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    chosen = [COMMANDS[int(sys.argv[3])]] if len(sys.argv) > 3 else COMMANDS
    with tempfile.TemporaryDirectory() as folder:
        files = []
        for index, argv in enumerate(chosen):
            files.append(f"{folder}/{index}.prof")
            _fork(argv, files[-1])
        stats = pstats.Stats(*files)
    stats.sort_stats(os.environ.get("SORT", "cumulative")).print_stats(top)


if __name__ == "__main__":
    main()
