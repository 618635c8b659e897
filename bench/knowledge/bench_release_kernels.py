"""Cost of the release-kernels collector (facts/release_kernels.py) per `facts`/`check` run.

Each round is a fresh interpreter (so the quantization and attention tables are parsed, as
in one CLI run): one cold call, then 100 warm calls on the same facts (a GPU, an FP8
checkpoint, Gemma-4 head sizes, a forced backend). Both `facts` and `check` pay the cold
cost once, so it adds to both and not to their difference.

    python bench/knowledge/bench_release_kernels.py [ROUNDS]
"""

import json
import statistics
import subprocess
import sys

code = r"""
import time, json
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_kernels import collect_release_kernels
flat = {"vllm.version": "0.22.1", "gpu.min_capability": 90, "model.quant_method": "fp8",
        "model.head_dim": 256, "model.global_head_dim": 512, "model.dtype": "bfloat16",
        "serve.kv_cache_dtype": "auto", "serve.attention_backend": "FLASHINFER"}
t = time.perf_counter(); collect_release_kernels(Facts.from_flat(flat)); cold = time.perf_counter() - t
t = time.perf_counter()
for _ in range(100): collect_release_kernels(Facts.from_flat(flat))
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
    f"cold (both tables parsed) median {statistics.median(colds) * 1000:.1f} ms (min {min(colds) * 1000:.1f}); warm median {statistics.median(warms) * 1000:.2f} ms"
)
