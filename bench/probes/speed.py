"""Speed of `vllm-doctor probe --tp N` (all probes) against the floor, timed in the same run.

    PYTHONPATH=. python bench/probes/speed.py --nproc 2 --rounds 3 --out speed.json

The floor (floor.py) spawns N ranks that import torch, initialise NCCL and do one all-gather.
One untimed warm-up of each comes first (page cache, first CUDA/NCCL use), then floor and
probe runs alternate; the medians and their ratio are reported, with each probe run's
per-probe statuses and the times its results arrived. The probe runs reuse the cached result
of the torch.compile sub-check (probes/cache.py; the warm-up run makes it); one last run with
--no-cache shows what re-tracing it costs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd: list[str], capture: bool = False) -> tuple[float, int, str]:
    with tempfile.TemporaryFile() as fh:
        t0 = time.perf_counter()
        code = subprocess.call(cmd, stdout=fh if capture else subprocess.DEVNULL)
        elapsed = time.perf_counter() - t0
        fh.seek(0)
        return elapsed, code, fh.read().decode(errors="replace") if capture else ""


def summarise(text: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError:
        return {"unparsed": text[-500:]}
    return {
        "elapsed_s": doc.get("elapsed_s"),
        "results_at_s": doc.get("results_at_s"),
        "status": {r["name"]: r["status"] for r in doc.get("results", [])},
        "duration_s": {r["name"]: r["duration_s"] for r in doc.get("results", [])},
        "teardown": next((r["metrics"] for r in doc.get("results", []) if r["name"] == "teardown"), None),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    floor_cmd = [sys.executable, os.path.join(HERE, "floor.py"), "--nproc", str(args.nproc)]
    probe_cmd = [sys.executable, "-m", "vllm_doctor", "probe", "--tp", str(args.nproc), "--format", "json"]
    timed(floor_cmd)
    timed(probe_cmd)
    floors, probes, codes, runs = [], [], [], []
    for k in range(args.rounds):
        t, _, _ = timed(floor_cmd)
        floors.append(round(t, 3))
        t, code, text = timed(probe_cmd, capture=True)
        probes.append(round(t, 3))
        codes.append(code)
        runs.append(summarise(text))
        print(f"round {k}: floor {floors[-1]:.2f}s  probe {probes[-1]:.2f}s (exit {code})", flush=True)
    # One run that re-traces the torch.compile sub-check instead of reusing its cached result.
    t, code, text = timed(probe_cmd + ["--no-cache"], capture=True)
    no_cache = {"probe_s": round(t, 3), "exit_code": code, "run": summarise(text)}
    print(f"probe --no-cache {t:.2f}s (exit {code})", flush=True)
    floor_med = statistics.median(floors)
    probe_med = statistics.median(probes)
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": args.nproc,
        "floor_s": floors, "probe_s": probes, "probe_exit_codes": codes,
        "floor_median_s": round(floor_med, 3), "probe_median_s": round(probe_med, 3),
        "ratio": round(probe_med / floor_med, 3), "target_ratio": 1.3,
        "floor_cmd": " ".join(floor_cmd), "probe_cmd": " ".join(probe_cmd),
        "probe_runs": runs,
        "probe_no_cache": no_cache,
    }
    text = json.dumps(doc, indent=2)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(f"floor median {floor_med:.2f}s, probe median {probe_med:.2f}s, ratio {probe_med / floor_med:.2f} "
          f"(target ≤ 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
