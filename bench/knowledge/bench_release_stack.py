"""Cost of the stack collector (facts/release_stack.py) per `facts`/`check` run.

Each round is a fresh interpreter (the tables are parsed as in one CLI run): one cold call,
then 100 warm calls on the same facts: vLLM 0.24.0 on a GB10 (aarch64) with the packages of
the issue's example report (flashinfer-python 0.6.12, flashinfer-cubin 0.6.8.post1, torch
2.11.0 CUDA 13.0). The cold call parses dependencies.json, kernel_images.json and the stack
tables of the installed companions.

    python bench/knowledge/bench_release_stack.py [ROUNDS]
"""

import json
import statistics
import subprocess
import sys

code = r"""
import time, json
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_stack import collect_release_stack
flat = {"vllm.version": "0.24.0", "gpu.capabilities": [121], "gpu.min_capability": 121,
        "vllm.machine": "aarch64", "packages.flashinfer-python": "0.6.12",
        "packages.flashinfer-cubin": "0.6.8.post1", "torch.version": "2.11.0",
        "torch.cuda_version": "13.0"}
t = time.perf_counter(); collect_release_stack(Facts.from_flat(flat)); cold = time.perf_counter() - t
t = time.perf_counter()
for _ in range(100): collect_release_stack(Facts.from_flat(flat))
warm = (time.perf_counter() - t) / 100
print(json.dumps([cold, warm]))
"""
colds, warms = [], []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 7):
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    c, w = json.loads(out)
    colds.append(c)
    warms.append(w)
print(
    f"cold (tables parsed) median {statistics.median(colds) * 1000:.1f} ms (min {min(colds) * 1000:.1f}); warm median {statistics.median(warms) * 1000:.2f} ms"
)
