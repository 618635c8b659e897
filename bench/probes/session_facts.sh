# The host collectors added in the fifth session of 2026-11-29, read on a real GPU host (run from
# the copied tree on the device machine: OUT=... bash bench/probes/session_facts.sh).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site ${WHEELS:-.whlmin}/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site
D="python3 -m vllm_doctor"
R=$OUT/session-facts.txt
{ date -u; id -u; nvidia-smi --query-gpu=name,driver_version,pci.bus_id,compute_cap --format=csv; git log --oneline -1 2>/dev/null; cat /etc/ld.so.preload 2>&1 | head -3; } > $R 2>&1
$D facts --format json > $OUT/facts.json 2>> $R
python3 - "$OUT/facts.json" >> $R 2>&1 <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
facts, missing = doc.get("facts", {}), doc.get("missing", {})
for prefix in ("topology.acs_redirect", "platform.cuda_interposer", "release.kernels.published_cuda",
               "release.kernels.ptx_beyond_driver", "release.kernels.exact_arch_guard",
               "torch.cuda_version", "driver.cuda_version", "packages.nixl", "env.RAY_memory"):
    for path in sorted(set(facts) | set(missing)):
        if path.startswith(prefix):
            got = facts.get(path)
            print(path, "=", json.dumps(got.get("value") if isinstance(got, dict) else got)[:300] if path in facts else "missing: " + str(missing[path])[:300])
PY
step() { echo "\$ $*" >> $R; timeout 120 "$@" >> $R 2>&1; echo "exit $?" >> $R; echo >> $R; }
step $D check --offline --fail-on never --vllm-version 0.26.0 --select HW145,HW142,HW143,HW144,HW051,HW050 -v --model-config tests/fixtures/calibration/configs/zai-org--GLM-5.1-FP8/config.json -- vllm serve zai-org/GLM-5.1-FP8 --moe-backend flashinfer_trtllm
step $D check --offline --fail-on never --vllm-version 0.11.2 --select HW144 -v -- vllm serve Qwen/Qwen3-8B
step $D check --offline --fail-on never --serve "docker run --gpus all --ipc=host vllm/vllm-openai:v0.20.0 --model Qwen/Qwen3-8B" --select ENV101,ENV102 -v
tail -c 5000 $R
