"""What `check --recommend` costs: the releases it judges and the time it takes.

    python bench/check/bench_recommend.py [--rounds 7]

Three scenarios, each in a fresh subprocess per round (median of the rounds):

* ``diffusion-gemma``: the bundled example (vLLM 0.23.1rc1.dev20 judged; the newest release
  runs on its driver, MODEL001 is cleared at 0.25.0): the answer passes over few releases;
* ``driver-535``: a real report of 2 × RTX 3090 on driver 535 (tests/fixtures/reports/
  rtx3090_x2_driver535.txt, vLLM version unknown) with Qwen3-8B at TP 2: the newer releases
  are judged down to the newest that runs there;
* ``worst``: the same report with TP 3 (Qwen3-8B's 32 heads: PAR001 in every release): no
  release clears the serve line, so every covered release is judged with it (and the newer
  ones with the stack alone as well).

``recommend`` is the step alone (commands/recommend.py, timed inside the run); ``check`` and
``check --recommend`` are the whole commands' wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "diffusion-gemma-tp2"
REPORT = ROOT / "tests" / "fixtures" / "reports" / "rtx3090_x2_driver535.txt"
QWEN = ROOT / "tests" / "fixtures" / "memory-logs" / "configs" / "Qwen3-8B"
SCENARIOS = {
    "diffusion-gemma": (
        str(EXAMPLE / "collect-env.txt"),
        str(EXAMPLE / "model"),
        "vllm serve nvidia/diffusiongemma-26B-A4B-IT-NVFP4 --tensor-parallel-size 2 "
        "--max-model-len 8192 --gpu-memory-utilization 0.92",
    ),
    "driver-535": (str(REPORT), str(QWEN), "vllm serve Qwen/Qwen3-8B -tp 2"),
    "worst": (str(REPORT), str(QWEN), "vllm serve Qwen/Qwen3-8B -tp 3"),
}

STEP = r"""
import json, sys, time
from vllm_doctor.commands.inputs import collect_options
from vllm_doctor.commands.recommend import recommend
from vllm_doctor.engine.evaluate import APPLIES, evaluate_rules
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.facts.collect import collect_facts
report, model, serve = sys.argv[1:4]
options = collect_options(None, serve, None, model, report, None, None, None, offline=True)
facts = collect_facts(options)
rules = load_rules()
errors = [f for f in evaluate_rules(rules, facts) if f.verdict == APPLIES and f.severity == "error"]
start = time.perf_counter()
result = recommend(facts, rules, errors)
spent = time.perf_counter() - start
print(json.dumps({"recommend": spent, "judged": len(result.stack) + len(result.full),
                  "newest_running": result.newest_running, "oldest_clearing": result.oldest_clearing}))
"""


def doctor(report: str, model: str, serve: str, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_doctor",
            "check",
            "--offline",
            "--report",
            report,
            "--model-config",
            model,
            "--serve",
            serve,
            "--fail-on",
            "never",
            "-q",
            *extra,
        ],
        capture_output=True,
        check=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("VLLM_DOCTOR_")},
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; rounds {args.rounds}")
    for name, (report, model, serve) in SCENARIOS.items():
        steps, plain, recommended = [], [], []
        last: dict = {}
        for _ in range(args.rounds):
            done = subprocess.run(
                [sys.executable, "-c", STEP, report, model, serve],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            last = json.loads(done.stdout.strip().splitlines()[-1])
            steps.append(last["recommend"])
            plain.append(doctor(report, model, serve))
            recommended.append(doctor(report, model, serve, "--recommend"))
        print(
            f"{name}: {last['judged']} release judgements "
            f"(newest running {last['newest_running']}, oldest clearing "
            f"{last['oldest_clearing']}); recommend {statistics.median(steps) * 1000:.0f} ms; "
            f"check {statistics.median(plain):.2f} s, check --recommend "
            f"{statistics.median(recommended):.2f} s"
        )


if __name__ == "__main__":
    main()
