"""Wall time of `vllm-doctor facts --format json` against `python -m torch.utils.collect_env`.

Both run as subprocesses, interleaved round by round (so load on the machine hits both alike),
timed with time.perf_counter around subprocess.run. One warm-up round is not counted. Also timed:
`python -c pass`, the interpreter's own start-up on this machine (the floor for any Python CLI).

    python bench/facts/bench_facts.py [--rounds N] [--write]

--write stores the table in bench/facts/RESULTS.md with the command, machine and date.
Targets: facts median <= 0.35 s and >= 6x faster than torch's collect_env.
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_S = 0.35
TARGET_RATIO = 6.0


def commands() -> dict[str, list[str]]:
    doctor = shutil.which("vllm-doctor")
    cli = [doctor] if doctor else [sys.executable, "-m", "vllm_doctor"]
    return {
        "vllm-doctor facts --format json": [*cli, "facts", "--format", "json"],
        "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
        "python -c pass (interpreter start-up)": [sys.executable, "-c", "pass"],
    }


def run_once(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace')[-500:]}"
        )
    return elapsed


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )


def versions() -> str:
    from importlib import metadata

    out = []
    for name in (
        "vllm-preflight",
        "typer",
        "torch",
    ):  # vllm-preflight: the distribution of vllm-doctor
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--write", action="store_true", help="write bench/facts/RESULTS.md")
    args = parser.parse_args()

    cmds = commands()
    for cmd in cmds.values():  # warm-up: page cache, .pyc files
        run_once(cmd)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(args.rounds):
        for name, cmd in cmds.items():
            times[name].append(run_once(cmd))

    med = {name: statistics.median(ts) for name, ts in times.items()}
    facts_name, torch_name, floor_name = list(cmds)
    ratio = med[torch_name] / med[facts_name]
    rows = [
        f"| {name} | {med[name]:.3f} | {min(ts):.3f} | {max(ts):.3f} |"
        for name, ts in times.items()
    ]
    ok = med[facts_name] <= TARGET_S and ratio >= TARGET_RATIO
    verdict = (
        f"vllm-doctor facts: median {med[facts_name]:.3f} s, {ratio:.1f}× faster than "
        f"torch's collect_env (target ≤ {TARGET_S} s and ≥ {TARGET_RATIO:.0f}×): "
        f"{'met' if ok else 'NOT met'}; interpreter start-up alone: "
        f"{med[floor_name]:.3f} s."
    )
    table = "\n".join(["| command | median s | min s | max s |", "|---|---|---|---|", *rows])
    print(table)
    print(verdict)
    if args.write:
        text = f"""# facts benchmark

Command: `python bench/facts/bench_facts.py --rounds {args.rounds} --write`
Date: {dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
Machine: {machine()}
Versions: {versions()}

Each command runs as a subprocess; the commands are interleaved round by round, {args.rounds}
rounds after one warm-up round; wall time per run with `time.perf_counter`.

{table}

{verdict}
"""
        (HERE / "RESULTS.md").write_text(text, encoding="utf-8")
        print(f"wrote {HERE / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
