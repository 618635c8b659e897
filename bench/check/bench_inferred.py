"""What inferring facts, judging an unknown version over the releases and the Hub cost `check`.

    python bench/check/bench_inferred.py [--rounds 7]

Each figure is the median over fresh subprocesses (`python -X importtime` is not needed: the
steps are timed inside one `check` run each):

* ``inferred``: the collector step that infers hardware and stack facts (facts/hardware.py,
  facts/stack.py), on the bundled example gemma4-mtp-tp2 (a report, a model, a serve line);
* ``releases``: judging the undecided rules over every covered release
  (engine/over_releases.py), on the same model and serve line with no vLLM version (this
  machine has none);
* ``hub cold`` / ``hub cached``: `check -- vllm serve org/model -tp 3` against a local server
  with the Hub's layout (tests/hub_server.py): the first run fetches config.json and the
  safetensors header, the second finds them in the cache and asks nothing — the cached run is
  the path of every later check.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "gemma4-mtp-tp2"
SERVE = "vllm serve google/gemma-4-E2B-it --tensor-parallel-size 2"

STEPS = r"""
import json, sys, time
from vllm_doctor.commands.inputs import collect_options
from vllm_doctor.engine.evaluate import evaluate_rules
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.over_releases import judge_over_releases
from vllm_doctor.facts.collect import collect_facts
report = sys.argv[1] or None
options = collect_options(None, sys.argv[2], None, sys.argv[3], report, None, None, None)
timings = {}
facts = collect_facts(options, timings)
findings = evaluate_rules(load_rules(), facts)
start = time.perf_counter()
judge_over_releases(findings, facts)
timings["releases"] = time.perf_counter() - start
print(json.dumps(timings))
"""


def run_steps(report: str) -> dict[str, float]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", STEPS, report, SERVE, str(EXAMPLE / "model")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def hub_runs(rounds: int) -> tuple[list[float], list[float]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from hub_server import FakeHub, Repo, safetensors_file

    config = (
        ROOT / "vllm_doctor" / "examples" / "healthy-h100-llama" / "model" / "config.json"
    ).read_bytes()
    weights = safetensors_file({"embed": ("BF16", [64, 32])})
    cold, cached = [], []
    with FakeHub({"org/model": Repo({"config.json": config, "model.safetensors": weights})}) as hub:
        for _ in range(rounds):
            home = tempfile.mkdtemp(prefix="bench-hub-")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
            env.update(HF_ENDPOINT=hub.url, HF_HOME=home)
            for times in (cold, cached):
                start = time.perf_counter()
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "vllm_doctor",
                        "check",
                        "--format",
                        "json",
                        "--",
                        "vllm",
                        "serve",
                        "org/model",
                        "-tp",
                        "3",
                    ],
                    capture_output=True,
                    env=env,
                    cwd=ROOT,
                )
                times.append(time.perf_counter() - start)
    return cold, cached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    known = [run_steps(str(EXAMPLE / "collect-env.txt")) for _ in range(args.rounds)]
    unknown = [run_steps("") for _ in range(args.rounds)]
    cold, cached = hub_runs(args.rounds)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f} ms"

    print(f"load average {os.getloadavg()[0]:.2f}; rounds {args.rounds}")
    print(f"inferred (example, version known): {ms([t['inferred'] for t in known])}")
    print(f"releases (example, version known): {ms([t['releases'] for t in known])}")
    print(f"inferred (no vLLM version): {ms([t['inferred'] for t in unknown])}")
    print(
        f"releases (no vLLM version, every covered release): {ms([t['releases'] for t in unknown])}"
    )
    print(f"check, Hub cold (fetch): {ms(cold)}; check, Hub cached (no request): {ms(cached)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
