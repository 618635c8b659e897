"""Time the slow paths of issue 37 against a checkout: each input is generated here, each
command run ``--runs`` times as ``python -P -m vllm_doctor`` in a fresh process, and the median
wall time and the median CPU time (user + system of the process) printed with the exit code and
the machine's load. On a shared machine the wall time carries the load; the CPU time is what
the run itself costs (a wait, as for a slow Hub, shows in the wall time only).

    python bench/hardening/slow_paths.py [--repo PATH] [--runs 3] [--only SUBSTRING]

``--repo`` runs the checkout at PATH (PYTHONPATH), e.g. a tree before the pass made with
``git archive``. A run is cut at 120 s (reported as ">120").

The Hub's slow paths run against the hostile Hub of tests/fixtures/hostile_hub.py on
127.0.0.1 (``HF_ENDPOINT``), each run with an empty cache of its own: their bound is the
deadline per request and per run (``--hub-timeout`` sets VLLM_DOCTOR_HUB_TIMEOUT), not 2 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "fixtures"))
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


def _children_cpu() -> float:
    """User + system seconds of the waited-for child processes so far (the runs are one at a
    time, so the difference around a run is that run's)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


# the hostile Hub's repositories that answer slowly, hugely or with many files (hostile_hub.py)
HUB_ATTACKS = (
    ("slow-api", "the file list, one byte every 4 s"),
    ("slow-config", "config.json, one byte every 4 s"),
    ("slow-status", "the status line, one byte every 4 s"),
    ("endless-config", "a config.json that never ends"),
    ("huge-config", "a 1 GiB config.json"),
    ("huge-index", "a 300 MB safetensors index"),
    ("many-shards", "5,000 shards"),
    ("range-ignored", "a byte range answered with 2 GiB"),
)


def hub_inputs() -> list[tuple[str, list[str]]]:
    return [
        (f"Hub: {what}", ["check", "-q", "--", "vllm", "serve", f"evil/{attack}", "-tp", "3"])
        for attack, what in HUB_ATTACKS
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=HERE.parents[1])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="")
    parser.add_argument("--hub-timeout", default="", help="VLLM_DOCTOR_HUB_TIMEOUT for the Hub")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    env["PYTHONPATH"] = str(args.repo.resolve())
    from hostile_hub import HostileHub

    with (
        tempfile.TemporaryDirectory(prefix="vllm-doctor-slow-") as name,
        HostileHub() as hub,
    ):
        tmp = Path(name)
        print(f"{args.repo} — median of {args.runs} runs: wall and CPU s, exit code, load")
        for label, argv in inputs(tmp) + hub_inputs():
            if args.only not in label:
                continue
            times, cpu, codes = [], [], set()
            for run_number in range(args.runs):
                run_env = dict(env)
                if label.startswith("Hub: "):  # an empty cache each run: the Hub is asked
                    fresh = tmp / f"hub-{len(label)}-{run_number}-{time.monotonic_ns()}"
                    run_env.update(
                        HF_ENDPOINT=hub.url,
                        HF_HOME=str(fresh / "hf"),
                        VLLM_DOCTOR_CACHE_DIR=str(fresh / "cache"),
                    )
                    if args.hub_timeout:
                        run_env["VLLM_DOCTOR_HUB_TIMEOUT"] = args.hub_timeout
                used = _children_cpu()
                start = time.perf_counter()
                try:
                    run = subprocess.run(
                        [sys.executable, "-P", "-m", "vllm_doctor", *argv],
                        env=run_env,
                        cwd=tmp,
                        capture_output=True,
                        timeout=LIMIT_S,
                    )
                    codes.add(run.returncode)
                    times.append(time.perf_counter() - start)
                    cpu.append(_children_cpu() - used)
                except subprocess.TimeoutExpired:
                    codes.add("timeout")
                    times.append(float("inf"))
            median = statistics.median(times)
            shown = f">{LIMIT_S}" if median == float("inf") else f"{median:6.2f}"
            cpu_shown = f"{statistics.median(cpu):5.2f}" if cpu else "    -"
            load = os.getloadavg()[0]
            print(
                f"  {shown} s wall  {cpu_shown} s cpu  "
                f"exit {','.join(map(str, sorted(codes, key=str)))}  load {load:4.1f}  {label}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
