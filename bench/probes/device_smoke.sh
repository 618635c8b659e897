export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site ${WHEELS:-.whlmin}/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site
D="python3 -m vllm_doctor"
R=$OUT/smoke-h200x1.txt
step() { echo "\$ $*" >> $R; /usr/bin/time -f "wall %e s" "$@" >> $R 2>&1; echo "exit $?" >> $R; echo >> $R; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"; git log --oneline -1 2>/dev/null; } > $R 2>&1
step $D facts
step $D probe
$D probe --format json > $OUT/probe-h200x1.json 2>/dev/null
step $D probe kernels
step $D probe memory -- vllm serve Qwen/Qwen3-8B --max-model-len 8192
step $D check --probe --vllm-version 0.24.0 --model-config tests/fixtures/models/diffusiongemma-26B-A4B-IT-NVFP4/config.json -- vllm serve google/diffusiongemma-26B-A4B-IT-NVFP4 --tensor-parallel-size 1
step $D check --offline --gpu "NVIDIA H200" -- vllm serve Qwen/Qwen3-8B -tp 1
step $D check --offline -- vllm serve Qwen/Qwen3-8B -tp 2
cat $R | tail -c 6000
