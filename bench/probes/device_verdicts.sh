#!/bin/bash
# The joined verdicts on one device kind, in one call:  bash bench/probes/device_verdicts.sh TAG
# Runs the whole probe suite judged against the installed vLLM (none on the device image) and
# against releases with and without each fix (--vllm-version), the TP=2 probes' CPU (gloo)
# variant where only one GPU is lent, and `check --probe` on serve lines SPEC002 (and, on two
# GPUs, MODEL001) applies to.
# Writes under $OUT: env-TAG.txt, verdicts-TAG.txt (each command, its text output and exit
# code), verdicts-TAG-json.tgz (the same commands with --format json, and their stderr).
TAG=${1:-dev}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the doctor's own dependencies that the image lacks travel as wheels in .whl (README of bench/probes)
if ! python3 -c "import re2, ahocorasick" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
ENV=$OUT/env-$TAG.txt
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  python3 -m pip list 2>/dev/null | grep -iE "^(packaging|nvidia-ml-py|typer|rich|pyyaml|google-re2|pyahocorasick|vllm) "
  python3 -c "import vllm" 2>&1 | tail -1
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
} > "$ENV" 2>&1
TXT=$OUT/verdicts-$TAG.txt; J=/tmp/verdicts-json-$TAG; mkdir -p "$J"; : > "$TXT"
run() {  # NAME COMMAND ARGS...: the text run, then the same with --format json
  local name=$1 cmd=$2; shift 2
  echo "\$ vllm-doctor $cmd $*" >> "$TXT"
  python3 -m vllm_doctor "$cmd" "$@" >> "$TXT" 2>&1; echo "exit $?" >> "$TXT"; echo >> "$TXT"
  python3 -m vllm_doctor "$cmd" --format json "$@" > "$J/$name.json" 2> "$J/$name.stderr"
  echo "exit $?" >> "$J/$name.stderr"
}
run probe-installed probe
# 0.19.0 lacks QUANT001's fix; 0.22.0 lacks SPEC001's and SPEC002's; 0.24.0 lacks MODEL001's
# and MODEL002's; 0.33.0 carries them all; SPEC003 was only ever in dev builds (0.20.0rc1)
for v in 0.19.0 0.22.0 0.24.0 0.33.0; do run "probe-$v" probe --vllm-version "$v"; done
run probe-0.20.0rc1 probe padded-batch --vllm-version 0.20.0rc1
for v in 0.24.0 0.33.0; do run "probe-cpu-tp2-$v" probe tp-softembed pp-handoff --device cpu --tp 2 --vllm-version "$v"; done
run check-probe-spec002-0.22.0 check --probe --vllm-version 0.22.0 \
  --model-config tests/fixtures/models/gemma-4-31B-it/config.json -- vllm serve google/gemma-4-31B-it \
  --speculative-config '{"method":"mtp","num_speculative_tokens":2}' --attention-backend FLASH_ATTN
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then  # DiffusionGemma at TP=2 on two GPUs
  run check-probe-model001-0.24.0 check --probe --vllm-version 0.24.0 \
    --model-config tests/fixtures/models/diffusiongemma-26B-A4B-IT-NVFP4/config.json -- vllm serve \
    google/diffusiongemma-26B-A4B-IT-NVFP4 --tensor-parallel-size 2
fi
(cd /tmp && tar czf "$OUT/verdicts-$TAG-json.tgz" "verdicts-json-$TAG")
cat "$ENV"; grep -E '^\$|^\[|^      \[|^Summary|^exit|^judged|^CPU' "$TXT"
