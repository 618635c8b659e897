#!/usr/bin/env bash
# `vllm-doctor probe --ray` and the cross-node collectives on one host split into several Ray
# nodes, each holding a subset of its GPUs (or, with no GPU, its CPUs): `ray start --head` plus
# one `ray start --address` per further node, each with CUDA_VISIBLE_DEVICES naming its subset.
# Runs, writing under $OUT (default /tmp/fleet-device-probe):
#   probe_tp2.json, probe_tp4.json  every default probe and collectives at 2 and 4 ranks (4 when
#                                   the host has 4 GPUs; the CPU path always runs both); a host
#                                   of one GPU runs probe_tp1.json alone (no hang to plant)
#   hang.json                       collectives with a planted rank that never joins the group,
#                                   ended by --join-timeout
#   device_probe.log                everything printed, with the commands; env.txt the host
#
#   bash bench/fleet/device_probe.sh             # from the repository's root
#
# Without network: the wheels under .whl/ are installed into $SITE (/tmp/site) first. What the
# device image lacks (Python 3.12; 40.5 MB together, Ray slimmed from 79.3 to 39.3 MB):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     ray==2.60.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
#     rpds-py==2026.9.1 google-re2==1.1.20251105 pyahocorasick==2.3.1
#   python3 bench/fleet/slim_wheel.py .whl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
# NVLink multicast stays off in every process started here (the raylets and all they start
# inherit it; the driver's NCCL_* also travel to every rank as vLLM's executor copies them).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fleet-device-probe}
PY=${PYTHON:-python3}
JOIN_TIMEOUT=${JOIN_TIMEOUT:-20}
SITE=${SITE:-/tmp/site}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_probe.log") 2>&1

if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl || exit 1
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
DOCTOR=($PY -m vllm_doctor)
RAY=($PY -m ray.scripts.scripts)

GPUS=$($PY -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "$GPUS" -ge 2 ]; then
  DEVICE=cuda
  PER_NODE=${PER_NODE:-$((GPUS >= 4 ? 2 : 1))}  # 4 GPUs: 2 nodes of 2; 2 GPUs: 2 nodes of 1
  NODES=$((GPUS / PER_NODE))
  SIZES="2"; [ "$GPUS" -ge 4 ] && SIZES="2 4"
elif [ "$GPUS" = 1 ]; then  # one GPU: Ray's placement of a CUDA rank, at one rank
  DEVICE=cuda; PER_NODE=1; NODES=1; SIZES="1"
else
  DEVICE=cpu; PER_NODE=2; NODES=2; SIZES="2 4"
fi
{
  date -u +%FT%TZ; uname -a; nvidia-smi 2>/dev/null; nvidia-smi topo -m 2>/dev/null
  $PY -c 'import ray, torch; print("ray", ray.__version__, "torch", torch.__version__)'
  env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_)' | sort
} >"$OUT/env.txt" 2>&1
echo "device $DEVICE: $NODES Ray nodes of $PER_NODE each; sizes $SIZES"

RAY_TMP=$(mktemp -d /tmp/vdr.XXXXXX)
stop_cluster() {  # this cluster's processes alone: all of them name its temp directory
  for pid in $(pgrep -f -- "$RAY_TMP/"); do kill -9 "$pid" 2>/dev/null; done
}
trap stop_cluster EXIT
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
IP=$($PY -c 'from ray._private.services import get_node_ip_address as ip; print(ip())')
for node in $(seq 0 $((NODES - 1))); do
  first=$((node * PER_NODE))
  subset=$(seq -s, "$first" $((first + PER_NODE - 1)))
  if [ "$DEVICE" = cuda ]; then
    resources=(--num-gpus "$PER_NODE" --num-cpus 4); export CUDA_VISIBLE_DEVICES=$subset
  else
    resources=(--num-gpus 0 --num-cpus "$PER_NODE")
  fi
  if [ "$node" = 0 ]; then
    "${RAY[@]}" start --head --port "$PORT" --temp-dir "$RAY_TMP" --include-dashboard false \
      --disable-usage-stats "${resources[@]}" || exit 1
  else
    "${RAY[@]}" start --address "$IP:$PORT" --disable-usage-stats "${resources[@]}" || exit 1
  fi
  echo "node $node: ${CUDA_VISIBLE_DEVICES:+GPUs $CUDA_VISIBLE_DEVICES}${resources[*]}"
done
unset CUDA_VISIBLE_DEVICES
export RAY_ADDRESS=$IP:$PORT

for tp in $SIZES; do
  echo "== probe --ray --tp $tp ($DEVICE)"
  start=$(date +%s%N)
  "${DOCTOR[@]}" probe --ray "$RAY_ADDRESS" --device "$DEVICE" --tp "$tp" --format json \
    >"$OUT/probe_tp$tp.json"
  echo "exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms"
  $PY - "$OUT/probe_tp$tp.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for node in doc["ray"].get("placement", []):
    print(f"  node {node['node']}: ranks {node['ranks']} GPUs {node.get('gpus')}")
for r in doc["results"]:
    print(f"  {r['name']}: {r['status']}: {r['reason'][:300]}")
EOF
done

if [ "${SIZES##* }" -lt 2 ]; then exit 0; fi  # a planted hang needs a rank that waits for it
hang=$(( ${SIZES##* } - 1 ))
echo "== planted hang: rank $hang never joins (--join-timeout $JOIN_TIMEOUT)"
start=$(date +%s%N)
VLLM_DOCTOR_PROBE_PARAMS="{\"selftest\": {\"never_join_rank\": $hang}}" \
  "${DOCTOR[@]}" probe collectives --ray "$RAY_ADDRESS" --device "$DEVICE" --tp "${SIZES##* }" \
  --join-timeout "$JOIN_TIMEOUT" --format json >"$OUT/hang.json"
echo "exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms"
$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(" ", r["status"], r["reason"])' "$OUT/hang.json"
