#!/bin/bash
# Diagnostics for where the probe run's time goes (one device call; writes under $OUT):
# bytecode caches, the compile sub-check's own floor, and the worker's start-up variants.
N=${1:-2}; TAG=${2:-dev}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
{
  python3 -c "import sys, sympy, torch, os; print(sys.version, 'dont_write_bytecode', sys.flags.dont_write_bytecode, 'prefix', sys.pycache_prefix); print(sympy.__file__, os.access(os.path.dirname(sympy.__file__), os.W_OK))"
  d=$(python3 -c "import sympy, os; print(os.path.dirname(sympy.__file__))"); ls $d/__pycache__ 2>&1 | head -3; ls $d/core/__pycache__ 2>&1 | head -3
  t=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__))"); ls $t/__pycache__ 2>&1 | head -3; ls $t/_dynamo/__pycache__ 2>&1 | head -3
  env | grep -i -E 'PYTHON' | sort
  for i in 1 2; do python3 -c "import time; t=time.perf_counter(); import sympy; print(f'import sympy {time.perf_counter()-t:.2f}s')"; done
  for i in 1 2; do PYTHONPYCACHEPREFIX=/tmp/pyc python3 -c "import time; t=time.perf_counter(); import sympy; print(f'import sympy (pycache prefix) {time.perf_counter()-t:.2f}s')"; done
  for i in 1 2; do python3 - <<'PY'
import time
T = time.perf_counter(); t0 = T
def lap(msg):
    global T
    n = time.perf_counter(); print(f"  {msg}: {n - T:.2f}s", end=""); T = n
import torch; lap("import torch")
import torch._dynamo; lap("import torch._dynamo")
c = torch.compile(lambda p, w: p @ w, backend="eager", fullgraph=True); lap("torch.compile()")
p = torch.randn(8, 512); w = torch.randn(256, 64)
torch._dynamo.mark_dynamic(p, 0); torch._dynamo.mark_dynamic(p, 1)
try:
    c(p, w)
except Exception as e:
    lap("trace (" + type(e).__name__ + ")")
print(f"  total {time.perf_counter() - t0:.2f}s")
PY
  done
  python3 -c "
import time; t=time.perf_counter()
from vllm_doctor.facts.gpus import collect_gpus
from vllm_doctor.facts.model import Facts
f=Facts(); collect_gpus(f); print(f'collect_gpus {time.perf_counter()-t:.2f}s', f.value('topology.links'))"
} > $OUT/diag-$TAG.txt 2>&1
cat $OUT/diag-$TAG.txt
python3 bench/probes/speed.py --nproc $N --rounds 3 --label $TAG-default --out $OUT/speed-$TAG-default.json
VLLM_DOCTOR_PROBE_PARAMS='{"bench": {"init_first": true}}' python3 bench/probes/speed.py --nproc $N --rounds 2 \
  --label $TAG-initfirst --out $OUT/speed-$TAG-initfirst.json
PYTHONPYCACHEPREFIX=/tmp/pyc2 python3 bench/probes/speed.py --nproc $N --rounds 2 --label $TAG-pycache \
  --out $OUT/speed-$TAG-pycache.json
