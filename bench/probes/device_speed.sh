#!/bin/bash
# One device call on a fresh machine: the speed of this tree's `vllm-doctor probe` (cold and
# warm) against the floor, where the time goes, and the same for a baseline checkout.
#   bash bench/probes/device_speed.sh NPROC TAG [BASELINE_ROOT] [ROUNDS]
# Writes under $OUT: env-TAG.txt, speed-TAG.json, speed-TAG-baseline.json, importtime-TAG.txt,
# torchrun-TAG.txt.
N=${1:-2}; TAG=${2:-dev}; BASE=${3:-}; ROUNDS=${4:-3}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  nproc; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  python3 -m pip list 2>/dev/null | grep -i -E '^(triton|sympy|torch) '
} > $OUT/env-$TAG.txt 2>&1
# 1. This tree, first thing on the machine (--fresh), then alternating rounds.
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --fresh --label $TAG --out $OUT/speed-$TAG.json
# 2. The baseline checkout, same rounds.
if [ -n "$BASE" ]; then
  python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --root "$BASE" --label $TAG-baseline \
    --out $OUT/speed-$TAG-baseline.json
fi
# 3. Where a cold sub-check's time goes: import times (warm page cache now).
{
  for i in 1 2; do python3 -c "import time; t=time.perf_counter(); import torch; a=time.perf_counter()-t; t=time.perf_counter(); import torch._dynamo; print(f'import torch {a:.2f}s, then torch._dynamo {time.perf_counter()-t:.2f}s')"; done
  python3 -X importtime -c "import torch, torch._dynamo" 2>&1 | python3 -c "
import re, sys
rows = [m.groups() for m in (re.match(r'import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)', l) for l in sys.stdin) if m]
rows = [(int(a), int(b), len(c), d) for a, b, c, d in rows]
top = [i for i, r in enumerate(rows) if r[3] == 'torch' and r[2] == 1][0]
print('torch cumulative', rows[top][1] / 1e6)
after = rows[top + 1:]
print('after torch, self total', sum(r[0] for r in after) / 1e6)
for r in sorted(after, key=lambda r: -r[1])[:45]: print(f'{r[1]/1e6:8.3f} {r[0]/1e6:8.3f} {r[2]:3d} {r[3]}')
print('--- largest self times')
for r in sorted(after, key=lambda r: -r[0])[:25]: print(f'{r[0]/1e6:8.3f} {r[3]}')
"
} > $OUT/importtime-$TAG.txt 2>&1
# 4. The same worker under torchrun, collated with --results.
{
  rm -rf /tmp/tr; /usr/bin/time -f "torchrun wall %e s" timeout 300 torchrun --standalone --nproc-per-node $N \
    -m vllm_doctor.probes.worker --out /tmp/tr --quiet; echo "torchrun rc=$?"
  PYTHONPATH=$PWD python3 -m vllm_doctor probe --results /tmp/tr; echo "results rc=$?"
  ls /tmp/tr
  PYTHONPATH=$PWD python3 -m vllm_doctor probe --tp $N; echo "probe text rc=$?"
} > $OUT/torchrun-$TAG.txt 2>&1
cat $OUT/env-$TAG.txt | head -12; cat $OUT/importtime-$TAG.txt | head -30; tail -40 $OUT/torchrun-$TAG.txt
