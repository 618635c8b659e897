#!/bin/bash
# Start-up variants side by side (one device call; writes under $OUT), each with its own
# floor rounds, in the environment as the image ships it and with bytecode cached:
#   default: peer copies of p2p-nccl while the process group forms; copies: after it.
N=${1:-2}; TAG=${2:-dev}; ROUNDS=${3:-3}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B='env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc'
$B python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-bytecode-default --out $OUT/speed-$TAG-bytecode-default.json
$B VLLM_DOCTOR_PROBE_PARAMS='{"bench": {"copies_in_run": true}}' python3 bench/probes/speed.py --nproc $N \
  --rounds $ROUNDS --label $TAG-bytecode-copies --out $OUT/speed-$TAG-bytecode-copies.json
$B python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-bytecode-default2 --out $OUT/speed-$TAG-bytecode-default2.json
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-default --out $OUT/speed-$TAG-default.json
VLLM_DOCTOR_PROBE_PARAMS='{"bench": {"copies_in_run": true}}' python3 bench/probes/speed.py --nproc $N \
  --rounds $ROUNDS --label $TAG-copies --out $OUT/speed-$TAG-copies.json
