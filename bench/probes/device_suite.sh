#!/bin/bash
# Everything for one device kind in one call:  bash bench/probes/device_suite.sh NPROC TAG [ROUNDS] [nofacts]
# Writes under $OUT: probe-TAG.json, probe-TAG.txt, speed-TAG.json, facts-TAG.txt, facts-TAG.json,
# log-TAG.txt (environment, topology, torchrun run, timings).
N=${1:-2}; TAG=${2:-dev}; ROUNDS=${3:-3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
LOG=$OUT/log-$TAG.txt
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  python3 -c "import torch, inspect; from torch.nn.attention.varlen import varlen_attn; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'varlen block_table:', 'block_table' in inspect.signature(varlen_attn).parameters)"
  for i in 1 2; do /usr/bin/time -f "import torch: %e s" python3 -c "import torch"; done
  /usr/bin/time -f "import torch + torch._dynamo: %e s" python3 -c "import torch, torch._dynamo"
} > $LOG 2>&1
python3 -m vllm_doctor probe --tp $N --format json > $OUT/probe-$TAG.json 2>> $LOG; echo "probe json rc=$?" >> $LOG
python3 -m vllm_doctor probe --tp $N > $OUT/probe-$TAG.txt 2>&1; echo "probe text rc=$?" >> $OUT/probe-$TAG.txt
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --out $OUT/speed-$TAG.json >> $LOG 2>&1
if [ "$4" != nofacts ]; then
  python3 -m vllm_doctor facts > $OUT/facts-$TAG.txt 2>&1; echo "rc=$?" >> $OUT/facts-$TAG.txt
  python3 -m vllm_doctor facts --format json > $OUT/facts-$TAG.json 2>> $LOG
fi
{
  echo "== torchrun --standalone --nproc-per-node $N -m vllm_doctor.probes.worker --out DIR"
  rm -rf /tmp/tr; timeout 300 torchrun --standalone --nproc-per-node $N -m vllm_doctor.probes.worker --out /tmp/tr --quiet; echo "torchrun rc=$?"
  python3 -m vllm_doctor probe --results /tmp/tr; echo "results rc=$?"
} >> $LOG 2>&1
cat $OUT/probe-$TAG.txt; tail -25 $LOG
