"""Time the slow paths of issue 37 against a checkout: each input is generated here, each
command run ``--runs`` times as ``python -P -m vllm_doctor`` in a fresh process, and the median
wall time printed with the exit code and the machine's load (a shared 2-core machine: the
load is part of the figure).

    python bench/hardening/slow_paths.py [--repo PATH] [--runs 3] [--only SUBSTRING]

``--repo`` runs the checkout at PATH (PYTHONPATH), e.g. a tree before the pass made with
``git archive``. A run is cut at 120 s (reported as ">120").
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

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "vllm_doctor" / "examples" / "diffusion-gemma-tp2"
LIMIT_S = 120


def _pod(containers: str) -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n{containers}"


def _container(name: str) -> str:
    return (
        f"    - name: {name}\n      image: vllm/vllm-openai:v0.24.0\n"
        '      args: ["org/m", "-tp", "2"]\n      resources: {limits: {nvidia.com/gpu: 2}}\n'
    )


def _script(n: int) -> str:
    script = "vllm serve org/m " + "'a''b''c'$V1 " * n
    return _pod(
        "    - name: vllm\n      image: vllm/vllm-openai:v0.24.0\n"
        f'      command: ["sh", "-c", "{script.strip()}"]\n'
        '      env: [{name: V1, value: "x"}]\n'
    )


def inputs(tmp: Path) -> list[tuple[str, list[str]]]:
    """(label, argv) of each slow path, its files written under ``tmp``."""
    (tmp / "sh140.yaml").write_text(_script(11_000))  # 143 KB
    (tmp / "sh64.yaml").write_text(_script(4_900))  # 64 KB, the most a script may hold
    (tmp / "c1000.yaml").write_text(_pod("".join(_container(f"v{i}") for i in range(1000))))
    (tmp / "c32.yaml").write_text(_pod("".join(_container(f"v{i}") for i in range(32))))
    figure = (
        "INFO 06-15 10:06:20 [gpu_model_runner.py:1624] Model loading took 8.8728 GiB "
        "and 5.206910 seconds\nINFO 06-15 10:06:30 [kv_cache_utils.py:716] GPU KV cache "
        "size: 123,456 tokens\n"
    )
    crash = (EXAMPLE / "crash.log").read_text()
    for name, unit in (("figures.log", figure), ("plain.log", crash)):
        with open(tmp / name, "w") as out:
            out.writelines(unit for _ in range(60_000_000 // len(unit) + 1))
    report = (EXAMPLE / "collect-env.txt").read_text()
    gpu = "GPU 0: NVIDIA GeForce RTX 5060 Ti"
    (tmp / "gpu60k.txt").write_text(report.replace(gpu, gpu + " " * 60_000 + "x", 1))
    (tmp / "gpu60k-inside.txt").write_text(
        report.replace(gpu, "GPU 0: NVIDIA" + " " * 60_000 + "GeForce RTX 5060 Ti", 1)
    )
    manifest = ["check", "--offline", "-q", "--manifest"]
    report_check = ["check", "-q", "--report"]
    return [
        ("sh -c script, 143 KB (refused past 64 KiB)", [*manifest, str(tmp / "sh140.yaml")]),
        ("sh -c script, 64 KB of quoted spans and $V1", [*manifest, str(tmp / "sh64.yaml")]),
        ("1,000 vLLM containers (refused past 32)", [*manifest, str(tmp / "c1000.yaml")]),
        ("32 vLLM containers", [*manifest, str(tmp / "c32.yaml")]),
        (
            "explain --log, 60 MB of memory-figure lines",
            ["explain", "--log", str(tmp / "figures.log")],
        ),
        (
            "explain --log, 60 MB plain log (reference)",
            ["explain", "--log", str(tmp / "plain.log")],
        ),
        (
            "report with a 60 KB blank-padded GPU line",
            [*report_check, str(tmp / "gpu60k.txt"), "--", "vllm", "serve", "m"],
        ),
        (
            "the same, blanks inside the GPU name",
            [*report_check, str(tmp / "gpu60k-inside.txt"), "--", "vllm", "serve", "m"],
        ),
        (
            "the report without the padding (reference)",
            [*report_check, str(EXAMPLE / "collect-env.txt"), "--", "vllm", "serve", "m"],
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=HERE.parents[1])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    env["PYTHONPATH"] = str(args.repo.resolve())
    with tempfile.TemporaryDirectory(prefix="vllm-doctor-slow-") as name:
        tmp = Path(name)
        print(f"{args.repo} — median of {args.runs} runs, wall seconds, exit code, load average")
        for label, argv in inputs(tmp):
            if args.only not in label:
                continue
            times, codes = [], set()
            for _ in range(args.runs):
                start = time.perf_counter()
                try:
                    run = subprocess.run(
                        [sys.executable, "-P", "-m", "vllm_doctor", *argv],
                        env=env,
                        cwd=tmp,
                        capture_output=True,
                        timeout=LIMIT_S,
                    )
                    codes.add(run.returncode)
                    times.append(time.perf_counter() - start)
                except subprocess.TimeoutExpired:
                    codes.add("timeout")
                    times.append(float("inf"))
            median = statistics.median(times)
            shown = f">{LIMIT_S}" if median == float("inf") else f"{median:6.2f}"
            load = os.getloadavg()[0]
            print(
                f"  {shown} s  exit {','.join(map(str, sorted(codes, key=str)))}  "
                f"load {load:4.1f}  {label}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
