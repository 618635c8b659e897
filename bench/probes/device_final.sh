#!/bin/bash
# The final device call (a fresh machine; writes under $OUT):
#   bash bench/probes/device_final.sh NPROC TAG [ROUNDS]
# 1. speed-TAG.json: cold first on the fresh machine, then floor / warm / cold rounds, with the
#    Python environment as the image ships it (PYTHONDONTWRITEBYTECODE=1, no .pyc files);
# 2. speed-TAG-bytecode.json: the same rounds with bytecode cached (as a pip-installed torch has
#    it), for the floor and the probe alike;
# 3. torchrun-TAG.txt: the worker under torchrun, collated with --results; the text report;
# 4. events-TAG.tgz: one warm run's event files (every event has its time since worker start).
N=${1:-2}; TAG=${2:-dev}; ROUNDS=${3:-4}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE|PYTHONDONT)' | sort
  nproc; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
} > $OUT/env-$TAG.txt 2>&1
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --fresh --label $TAG --out $OUT/speed-$TAG.json
env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc python3 bench/probes/speed.py --nproc $N \
  --rounds $((ROUNDS - 1)) --label $TAG-bytecode --out $OUT/speed-$TAG-bytecode.json
{
  rm -rf /tmp/tr; /usr/bin/time -f "torchrun wall %e s" timeout 300 torchrun --standalone --nproc-per-node $N \
    -m vllm_doctor.probes.worker --out /tmp/tr --quiet; echo "torchrun rc=$?"
  PYTHONPATH=$PWD python3 -m vllm_doctor probe --results /tmp/tr; echo "results rc=$?"
  PYTHONPATH=$PWD python3 -m vllm_doctor probe --tp $N; echo "probe text rc=$?"
  PYTHONPATH=$PWD python3 -m vllm_doctor probe p2p-nccl --tp $N; echo "probe p2p-nccl rc=$?"
} > $OUT/torchrun-$TAG.txt 2>&1
rm -rf /tmp/keep; PYTHONPATH=$PWD VLLM_DOCTOR_PROBE_DIR=/tmp/keep python3 -m vllm_doctor probe --tp $N --format json \
  > /tmp/keep-run.json 2>/dev/null; cp /tmp/keep-run.json /tmp/keep/; tar -czf $OUT/events-$TAG.tgz -C /tmp keep
tail -45 $OUT/torchrun-$TAG.txt
