"""Speed of `vllm-doctor probe --tp N` (all probes), warm and cold, against the floor, timed
side by side in the same run.

    PYTHONPATH=. python bench/probes/speed.py --nproc 2 --rounds 3 --fresh --out speed.json

* floor (floor.py): N ranks import torch, initialise NCCL and do one all-gather;
* warm: `vllm-doctor probe --tp N --format json` with the torch.compile sub-check's result in
  the cache (probes/cache.py; an untimed run fills it);
* cold: the same with `--no-cache`, which re-traces it (what a first run on a node does).

With --fresh (a machine that has run nothing yet) the very first commands are one cold probe
run and then one floor, recorded apart ("fresh"): they also pay for the page cache. Then the
rounds alternate floor, warm and cold runs, and the medians and ratios are reported, with each
probe run's per-probe arrival times, the ranks' torch import / CUDA / process-group times, the
isolated sub-checks' own times, and the floor ranks' import and NCCL times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, int, str]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        code = subprocess.call(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        elapsed = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        if code not in (0, 1):
            sys.stderr.write(err.read().decode(errors="replace")[-3000:])
        return elapsed, code, text


def summarise_probe(text: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError:
        return {"unparsed": text[-500:]}
    results = {r["name"]: r for r in doc.get("results", [])}
    teardown = results.get("teardown", {})
    soft = results.get("tp-softembed", {}).get("metrics", {})
    graph = results.get("cudagraph-replay", {}).get("metrics", {})
    return {
        "elapsed_s": doc.get("elapsed_s"),
        "doctor_start_s": doc.get("doctor_start_s"),
        "results_at_s": doc.get("results_at_s"),
        "status": {name: r["status"] for name, r in results.items()},
        "duration_s": {name: r["duration_s"] for name, r in results.items()},
        "rank_init": [r.get("init") for r in teardown.get("ranks", [])],
        "exit_after_done_s": [r.get("exit_after_done_s") for r in teardown.get("ranks", [])],
        "destroy_process_group_s": teardown.get("metrics", {}).get("destroy_process_group_s"),
        "compile_part": {
            k: soft.get("compile", {}).get(k)
            for k in (
                "status",
                "import_torch_s",
                "dynamo_import_s",
                "compile_setup_s",
                "compile_s",
                "cached",
            )
        },
        "transient_part": {
            k: graph.get("transient", {}).get(k) for k in ("status", "import_torch_s", "outcome")
        },
        "bytecode": doc.get("bytecode"),
    }


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="the machine has run nothing yet")
    parser.add_argument("--root", default=os.getcwd(), help="checkout whose vllm_doctor runs")
    parser.add_argument("--label", default="probe")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE",
        help="also time warm and cold runs with VAR=VALUE in their environment, "
        "in the same rounds (e.g. nobytecode:VLLM_DOCTOR_PROBE_BYTECODE=0)",
    )
    args = parser.parse_args()
    variants: dict[str, dict[str, str]] = {}
    for spec in args.variant:
        name, _, assignment = spec.partition(":")
        var, _, value = assignment.partition("=")
        variants.setdefault(name, {})[var] = value
    cache = tempfile.mkdtemp(prefix=f"vllm-doctor-cache-{args.label}-")
    # the checkout first, then what the caller had (the doctor's wheels carried to a device)
    path = os.pathsep.join(p for p in (args.root, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, VLLM_DOCTOR_CACHE_DIR=cache)
    floor_cmd = [
        sys.executable,
        os.path.join(HERE, "floor.py"),
        "--nproc",
        str(args.nproc),
        "--json",
    ]
    warm_cmd = [
        sys.executable,
        "-m",
        "vllm_doctor",
        "probe",
        "--tp",
        str(args.nproc),
        "--format",
        "json",
    ]
    cold_cmd = [*warm_cmd, "--no-cache"]

    def floor() -> tuple[float, dict]:
        t, code, text = timed(floor_cmd, env, args.root)
        try:
            detail = json.loads(text)
        except ValueError:
            detail = {"unparsed": text[-300:], "exit": code}
        return round(t, 3), detail

    def probe(cmd: list[str], extra: dict[str, str] | None = None) -> tuple[float, int, dict]:
        t, code, text = timed(cmd, dict(env, **(extra or {})), args.root)
        return round(t, 3), code, summarise_probe(text)

    doc: dict = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "label": args.label,
        "root": args.root,
        "nproc": args.nproc,
        "floor_cmd": " ".join(floor_cmd[1:]),
        "warm_cmd": " ".join(warm_cmd[1:]),
        "cold_cmd": " ".join(cold_cmd[1:]),
    }
    if args.fresh:
        t_cold, code, run = probe(cold_cmd)
        t_floor, detail = floor()
        doc["fresh"] = {
            "cold_probe_s": t_cold,
            "cold_exit": code,
            "cold_run": run,
            "floor_s": t_floor,
            "floor": detail,
            "ratio": round(t_cold / t_floor, 3),
        }
        print(
            f"[{args.label}] fresh machine: cold probe {t_cold:.2f}s (exit {code}), then floor "
            f"{t_floor:.2f}s",
            flush=True,
        )
    else:
        floor()
    probe(warm_cmd)  # fills the cache (and warms the page cache) for the warm runs
    floors, warms, colds, runs = [], [], [], []
    other: dict[str, dict[str, list[float]]] = {n: {"warm": [], "cold": []} for n in variants}
    for k in range(args.rounds):
        t_floor, detail = floor()
        t_warm, code_w, run_w = probe(warm_cmd)
        t_cold, code_c, run_c = probe(cold_cmd)
        floors.append(t_floor)
        warms.append(t_warm)
        colds.append(t_cold)
        runs.append(
            {
                "floor": detail,
                "warm": dict(run_w, wall_s=t_warm, exit=code_w),
                "cold": dict(run_c, wall_s=t_cold, exit=code_c),
            }
        )
        line = (
            f"[{args.label}] round {k}: floor {t_floor:.2f}s  warm {t_warm:.2f}s (exit {code_w})  "
            f"cold {t_cold:.2f}s (exit {code_c})"
        )
        for name, extra in variants.items():
            t_vw, code_vw, run_vw = probe(warm_cmd, extra)
            t_vc, code_vc, run_vc = probe(cold_cmd, extra)
            other[name]["warm"].append(t_vw)
            other[name]["cold"].append(t_vc)
            runs[-1][name] = {
                "warm": dict(run_vw, wall_s=t_vw, exit=code_vw),
                "cold": dict(run_vc, wall_s=t_vc, exit=code_vc),
            }
            line += f"  | {name}: warm {t_vw:.2f}s cold {t_vc:.2f}s"
        print(line, flush=True)
    f, w, c = median(floors), median(warms), median(colds)
    doc.update(
        floor_s=floors,
        warm_s=warms,
        cold_s=colds,
        floor_median_s=f,
        warm_median_s=w,
        cold_median_s=c,
        warm_ratio=round(w / f, 3),
        cold_ratio=round(c / f, 3),
        targets={"warm_ratio": 1.2, "cold_ratio": 1.5},
        rounds=runs,
    )
    doc["variants"] = {}
    for name, times in other.items():
        vw, vc = median(times["warm"]), median(times["cold"])
        doc["variants"][name] = {
            "env": variants[name],
            "warm_s": times["warm"],
            "cold_s": times["cold"],
            "warm_median_s": vw,
            "cold_median_s": vc,
            "warm_ratio": round(vw / f, 3),
            "cold_ratio": round(vc / f, 3),
        }
        print(
            f"[{args.label}] {name}: warm {vw:.2f}s ({vw / f:.2f}x)  cold {vc:.2f}s ({vc / f:.2f}x)"
        )
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(json.dumps(doc, indent=2) + "\n")
    print(
        f"[{args.label}] floor {f:.2f}s  warm {w:.2f}s ({w / f:.2f}x, target 1.2)  "
        f"cold {c:.2f}s ({c / f:.2f}x, target 1.5)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
