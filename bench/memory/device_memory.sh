#!/bin/bash
# The memory probe on one device kind, in one call:  bash bench/memory/device_memory.sh TAG
# Runs `vllm-doctor probe memory` with the default sizes (Llama-3.1-8B's, vLLM's default budgets),
# then again as text with every metric, then for Qwen3-32B's config at a 16k token budget.
# Writes under $OUT: env-TAG.txt, memory-TAG.json (the raw output the knowledge table is read
# from), memory-TAG.txt, memory-TAG-qwen3-32b.json, and runs-TAG.log (each command, its stderr
# and its exit code).
TAG=${1:-dev}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
test -f vllm_doctor/probes/memory.py || { echo "this tree has no memory probe"; exit 1; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  python3 -m pip list 2>/dev/null | grep -iE "^(torch|nvidia-ml-py|nvidia-nccl-cu13|nvidia-cublas) "
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE|PYTORCH)' | sort
} > "$OUT/env-$TAG.txt" 2>&1
LOG=$OUT/runs-$TAG.log; : > "$LOG"
run() {  # NAME ARGS...: one probe run, its stdout to NAME; the command, stderr and exit code to LOG
  local name=$1; shift
  echo "\$ vllm-doctor probe $*  > $name" >> "$LOG"
  python3 -m vllm_doctor probe "$@" > "$OUT/$name" 2>> "$LOG"
  echo "exit $?" >> "$LOG"
}
run "memory-$TAG.json" memory --timeout 300 --format json
run "memory-$TAG.txt" memory --timeout 300 -v
run "memory-$TAG-qwen3-32b.json" memory --timeout 300 --format json \
  --model-config tests/fixtures/models/Qwen3-32B/config.json -- vllm serve Qwen/Qwen3-32B \
  --max-num-batched-tokens 16384
cat "$OUT/env-$TAG.txt" "$OUT/memory-$TAG.txt" "$LOG"
