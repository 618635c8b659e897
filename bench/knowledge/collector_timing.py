"""The timing loop both collector benchmarks share.

Each round is a fresh interpreter, so the knowledge tables a collector reads are parsed as in
one CLI run: one cold call, then 100 warm calls on the same facts.
"""

import json
import statistics
import subprocess
import sys

_ROUND = r"""
import importlib, json, sys, time
from vllm_doctor.facts.model import Facts
module, function, flat = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
collect = getattr(importlib.import_module(module), function)
t = time.perf_counter(); collect(Facts.from_flat(flat)); cold = time.perf_counter() - t
t = time.perf_counter()
for _ in range(100): collect(Facts.from_flat(flat))
print(json.dumps([cold, (time.perf_counter() - t) / 100]))
"""


def time_collector(
    module: str, function: str, flat: dict, rounds: int
) -> tuple[float, float, float]:
    """Median cold, median warm and fastest cold seconds of ``module.function(Facts.from_flat(flat))``."""
    colds, warms = [], []
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", _ROUND, module, function, json.dumps(flat)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        cold, warm = json.loads(out)
        colds.append(cold)
        warms.append(warm)
    return statistics.median(colds), statistics.median(warms), min(colds)


def rounds_argument(default: int = 7) -> int:
    return int(sys.argv[1]) if len(sys.argv) > 1 else default
