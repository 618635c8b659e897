#!/bin/bash
# The 4-GPU runs in one device call (nvidia-h200-x4; writes under $OUT):
#   bash bench/probes/device_x4.sh NPROC TAG [ROUNDS]
# 1. run-TAG.txt: facts (text), probe --tp N (text), check --probe on TP-N serve lines, the
#    worker under torchrun collated with --results; facts-TAG.json, probe-TAG.json;
# 2. speed-TAG-bytecode.json and speed-TAG-2-bytecode.json: floor / warm / cold rounds at N and
#    at 2 ranks with bytecode cached (as a pip-installed torch has it), and the peer copies with a
#    context per peer GPU (the code before the CUDA IPC copies) as a variant in the same rounds;
# 3. events-TAG.tgz: one warm run's event files at N ranks, bytecode cached.
N=${1:-4}; TAG=${2:-dev}; ROUNDS=${3:-3}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
if ! python3 -c "import re2, ahocorasick" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
D="python3 -m vllm_doctor"
R=$OUT/run-$TAG.txt
step() { echo "\$ $*" >> $R; /usr/bin/time -f "wall %e s" "$@" >> $R 2>&1; echo "exit $?" >> $R; echo >> $R; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE|PYTHONDONT)' | sort
  nproc; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  python3 -m pip list 2>/dev/null | grep -iE "^(packaging|nvidia-ml-py|typer|rich|pyyaml|vllm) "
} > $R 2>&1
step $D facts
$D facts --format json > $OUT/facts-$TAG.json 2>/dev/null
step $D probe --tp $N
$D probe --tp $N --format json > $OUT/probe-$TAG.json 2>/dev/null
step $D check --probe --vllm-version 0.24.0 --model-config tests/fixtures/models/diffusiongemma-26B-A4B-IT-NVFP4/config.json \
  -- vllm serve google/diffusiongemma-26B-A4B-IT-NVFP4 --tensor-parallel-size $N
step $D check --probe --vllm-version 0.33.0 --model-config tests/fixtures/models/diffusiongemma-26B-A4B-IT-NVFP4/config.json \
  -- vllm serve google/diffusiongemma-26B-A4B-IT-NVFP4 --tensor-parallel-size $N
step $D check --offline -- vllm serve Qwen/Qwen3-8B -tp $N
step $D check --offline --gpu "NVIDIA H200" -- vllm serve Qwen/Qwen3-8B -tp $N
rm -rf /tmp/tr; step timeout 300 torchrun --standalone --nproc-per-node $N -m vllm_doctor.probes.worker --out /tmp/tr --quiet
step $D probe --results /tmp/tr
(cd bench/probes/kernels && bash explore.sh) > $OUT/kernels-explore-$TAG.txt 2>&1
export -n PYTHONDONTWRITEBYTECODE; unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
V="--variant contexts:VLLM_DOCTOR_PROBE_PARAMS={\"bench\":{\"copies\":\"contexts\"}}"
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-bytecode $V --out $OUT/speed-$TAG-bytecode.json
rm -rf /tmp/keep; VLLM_DOCTOR_PROBE_DIR=/tmp/keep $D probe --tp $N --format json > /tmp/keep-run.json 2>/dev/null
cp /tmp/keep-run.json /tmp/keep/; tar -czf $OUT/events-$TAG.tgz -C /tmp keep
python3 bench/probes/speed.py --nproc 2 --rounds $ROUNDS --label $TAG-2-bytecode $V --out $OUT/speed-$TAG-2-bytecode.json
grep -E '^\$|^exit|^wall|^\[|^Summary|HW005|✗' $R | head -80
cat $OUT/kernels-explore-$TAG.txt | tail -20
