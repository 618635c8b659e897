"""Benchmark: `vllm-doctor explain --log` on a 50 MB log against the whole error catalogue.

Goal (issue 9): under 1 s on the project's machine for a 50 MB log, with every curated
signature and every catalogue message (all 50 releases) looked for.

The log is built from real vLLM log line shapes: periodic throughput lines from the API
server, request lines, warnings, and at the end a worker traceback ending in a real vLLM
error (the KV-cache check of v1/core/kv_cache_utils.py), wrapped in process prefixes.

    python bench/explain/bench_explain.py [--size-mb 50] [--rounds 5] [--write]

Each round runs the command as a user does (a subprocess: import, rule base, catalogue load,
scan, report); the in-process breakdown shows where the time goes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TAIL = """\
(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 700, in check_enough_kv_cache_memory
(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708]     raise ValueError(
(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.50 GiB). Based on the available memory, the estimated maximum model length is 77824. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""


def build_log(path: Path, size: int) -> None:
    lines = [
        "(APIServer pid=1201) INFO 11-23 05:{m:02d}:{s:02d} [loggers.py:127] Engine 000: Avg prompt "
        "throughput: {a}.4 tokens/s, Avg generation throughput: {b}.7 tokens/s, Running: {r} reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: {k}.1%, Prefix cache hit rate: 41.2%",
        '(APIServer pid=1201) INFO:     10.0.3.{r}:5{a:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "(APIServer pid=1201) INFO 11-23 05:{m:02d}:{s:02d} [logger.py:43] Received request "
        "chatcmpl-{a}{b}: params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens={k}00)",
        "(APIServer pid=1201) WARNING 11-23 05:{m:02d}:{s:02d} [protocol.py:93] The following fields "
        "were present in the request but ignored: {{'stream_options'}}",
    ]
    with path.open("w", encoding="utf-8") as out:
        out.write(
            "(APIServer pid=1201) INFO 11-23 05:00:00 [api_server.py:1755] vLLM API server "
            "version 0.11.0\n"
        )
        written, i = 0, 0
        tail = len(TAIL.encode())
        while written < size - tail:
            line = (
                lines[i % len(lines)].format(
                    m=i // 60 % 60, s=i % 60, a=i % 9000, b=i % 700, r=i % 64, k=i % 97
                )
                + "\n"
            )
            out.write(line)
            written += len(line)
            i += 1
        out.write(TAIL)


# As installed: the doctor's modules have bytecode (pip compiles them). A machine with
# PYTHONDONTWRITEBYTECODE=1 would otherwise compile them on every timed run.
_PYC = tempfile.mkdtemp(prefix="bench-explain-pyc-")
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPYCACHEPREFIX": _PYC,
}


def wall(args: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", *args], capture_output=True, text=True, env=ENV
    )
    elapsed = time.perf_counter() - start
    if run.returncode not in (0, 1):
        raise SystemExit(f"explain failed: {run.stderr[-500:]}")
    return elapsed, run.stdout


def breakdown(log: Path) -> list[str]:
    from vllm_doctor.engine import logmatch
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.engine.logreport import analyse_log
    from vllm_doctor.facts.crashlog import read_log
    from vllm_doctor.knowledge import load

    steps = []

    def step(name, fn):
        start = time.perf_counter()
        value = fn()
        steps.append(f"{name:28} {time.perf_counter() - start:6.3f} s")
        return value

    text = step("read the log", lambda: read_log(log))
    rules = step("load the rule base", lambda: load_rules(None))
    table = step("load the catalogue table", lambda: load("errors"))
    step("build the catalogue matchers", logmatch.load_catalogue)
    report = step("scan + match (first run)", lambda: analyse_log(text, rules))
    step("scan + match (again)", lambda: analyse_log(text, rules))
    steps.append(
        f"catalogue: {len(table)} messages over {len(table.releases)} "
        f"releases; named: {[m.hit.key[:60] for m in report.messages]}; "
        f"rules: {[r.code for r, *_ in report.rule_hits]}"
    )
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="append the result to RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vllm-doctor-bench-") as tmp:
        log = Path(tmp) / "big.log"
        build_log(log, int(args.size_mb * 1_000_000))
        small = Path(tmp) / "small.log"
        small.write_text(TAIL)
        size = log.stat().st_size
        wall(["explain", "--log", str(small), "--format", "json"])  # writes the bytecode
        big = [
            wall(["explain", "--log", str(log), "--format", "json"])[0] for _ in range(args.rounds)
        ]
        tiny = [
            wall(["explain", "--log", str(small), "--format", "json"])[0]
            for _ in range(args.rounds)
        ]
        rules_only = [wall(["explain", "MEM001", "--plain"])[0] for _ in range(args.rounds)]
        steps = breakdown(log)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    report = [
        f"date: {dt.date.today()}  machine: {platform.node() or 'vm'} ({os.cpu_count()} cores), "
        f"python {platform.python_version()}, load average {load:.2f}",
        f"log: {size / 1e6:.1f} MB, {args.rounds} rounds; the doctor's bytecode cached, as installed",
        f"explain --log (50 MB)   median {statistics.median(big):.3f} s  (min {min(big):.3f}, max {max(big):.3f})",
        f"explain --log (1 KB)    median {statistics.median(tiny):.3f} s  (min {min(tiny):.3f}, max {max(tiny):.3f})",
        f"explain CODE (no log)   median {statistics.median(rules_only):.3f} s  (start-up + rule base)",
        "in-process breakdown (50 MB):",
        *[f"  {line}" for line in steps],
    ]
    text = "\n".join(report)
    print(text)
    if args.write:
        results = Path(__file__).with_name("RESULTS.md")
        header = "" if results.exists() else "# explain --log on a large log\n\n"
        command = f"python bench/explain/bench_explain.py --size-mb {args.size_mb:g} --rounds {args.rounds} --write"
        with results.open("a", encoding="utf-8") as out:
            out.write(f"{header}Command: `{command}`\n\n```\n{text}\n```\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
