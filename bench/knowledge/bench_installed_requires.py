"""Cost of what pip check would say (facts/installed_requires.py) per `facts`/`check` run, and
of looking the packages it names up on a host.

Each round is a fresh interpreter: one cold call (requires.json parsed, its tables built),
then 100 warm calls, on a report's packages: torch 2.9.0, torchvision 0.24.0, torchaudio
2.9.0, transformers 4.57.6, tokenizers 0.22.1, huggingface-hub 0.36.0, pydantic 2.12.4,
pydantic-core 2.41.5, fastapi 0.121.0, starlette 0.49.3, numpy 2.2.6, numba 0.61.2, x86_64.
Then the host lookup: ``importlib.metadata`` for every name of packages_of_interest() (the
requirements knowledge adds the names its tables read or require) in this environment.

    python bench/knowledge/bench_installed_requires.py [ROUNDS]
"""

import statistics
import subprocess
import sys

from collector_timing import rounds_argument, time_collector

FLAT = {
    "vllm.machine": "x86_64",
    "packages.torch": "2.9.0",
    "packages.torchvision": "0.24.0",
    "packages.torchaudio": "2.9.0",
    "packages.transformers": "4.57.6",
    "packages.tokenizers": "0.22.1",
    "packages.huggingface-hub": "0.36.0",
    "packages.pydantic": "2.12.4",
    "packages.pydantic-core": "2.41.5",
    "packages.fastapi": "0.121.0",
    "packages.starlette": "0.49.3",
    "packages.numpy": "2.2.6",
    "packages.numba": "0.61.2",
}

_LOOKUP = r"""
import time
t = time.perf_counter()
from vllm_doctor.facts.packages import _find_dist, packages_of_interest
names = packages_of_interest()
found = [n for n, dists in names.items() if _find_dist(dists) is not None]
print(time.perf_counter() - t, len(names), len(found))
"""

rounds = rounds_argument()
cold, warm, fastest = time_collector(
    "vllm_doctor.facts.installed_requires", "collect_installed_requirements", FLAT, rounds
)
print(
    f"collector: cold (requires.json parsed) median {cold * 1000:.1f} ms "
    f"(min {fastest * 1000:.1f}); warm median {warm * 1000:.2f} ms"
)
lookups = []
for _ in range(rounds):
    seconds, names, found = subprocess.run(
        [sys.executable, "-c", _LOOKUP], capture_output=True, text=True, check=True
    ).stdout.split()
    lookups.append(float(seconds))
print(
    f"host lookup of {names} package names ({found} installed here): median "
    f"{statistics.median(lookups) * 1000:.1f} ms (min {min(lookups) * 1000:.1f})"
)
