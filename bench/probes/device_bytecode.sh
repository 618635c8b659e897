#!/bin/bash
# The run's bytecode compiler on the device image as it ships (no .pyc files,
# PYTHONDONTWRITEBYTECODE=1), side by side with it turned off, in one device call:
#   bash bench/probes/device_bytecode.sh NPROC TAG [ROUNDS] [cached]
# 1. bytecode-TAG.txt: whether the doctor wants it here, and the compiler run alone (jobs 12);
# 2. speed-TAG-compiler.json: a cold run on the fresh machine, then rounds of floor, warm, cold,
#    and warm and cold with VLLM_DOCTOR_PROBE_BYTECODE=0 (the code before the compiler);
# 3. with "cached", speed-TAG-compiler-bytecode.json: rounds with bytecode cached for the floor and the probe
#    alike (PYTHONPYCACHEPREFIX set by the user: the compiler stays off).
N=${1:-2}; TAG=${2:-dev}; ROUNDS=${3:-4}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
{
  date -u; nproc; env | grep -E '^(PYTHONDONT|PYTHONPYCACHE)' | sort
  python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"
  PYTHONPATH=$PWD python3 -c "import sys; from vllm_doctor.probes import bytecode; print('wanted', bytecode.wanted(sys.executable))"
} > $OUT/bytecode-$TAG.txt 2>&1
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --fresh --label $TAG-compiler \
  --variant nobytecode:VLLM_DOCTOR_PROBE_BYTECODE=0 --out $OUT/speed-$TAG-compiler.json
{
  rm -rf /tmp/bcx; /usr/bin/time -f "compiler alone: wall %e s, user %U s" env PYTHONPATH=$PWD python3 -m vllm_doctor.probes.bytecode \
    --prefix /tmp/bcx --roots vllm_doctor.probes.worker,torch,torch.distributed,torch._dynamo --jobs 12 --summary /tmp/bcx.json
  cat /tmp/bcx.json; echo
  for p in "" /tmp/bcx; do
    PYTHONPYCACHEPREFIX=$p python3 -c "import time; t=time.perf_counter(); import torch; a=time.perf_counter()-t; import torch._dynamo; print('prefix=${p:-none}: import torch %.2f s, torch._dynamo %.2f s more' % (a, time.perf_counter()-t-a))"
  done
} >> $OUT/bytecode-$TAG.txt 2>&1
[ "${4:-}" = cached ] && env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc python3 bench/probes/speed.py \
  --nproc $N --rounds $((ROUNDS - 1)) --label $TAG-compiler-bytecode --out $OUT/speed-$TAG-compiler-bytecode.json
cat $OUT/bytecode-$TAG.txt
