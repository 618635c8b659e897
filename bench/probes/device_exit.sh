#!/bin/bash
# The workers' exit (one device call; writes under $OUT), bytecode cached: default vs the
# CUDA caching allocator emptied in the teardown thread ({"bench": {"release_early": true}}).
N=${1:-2}; TAG=${2:-dev}; ROUNDS=${3:-3}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B='env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc'
$B python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-exit-default --out $OUT/speed-$TAG-exit-default.json
$B VLLM_DOCTOR_PROBE_PARAMS='{"bench": {"release_early": true}}' python3 bench/probes/speed.py --nproc $N \
  --rounds $ROUNDS --label $TAG-exit-release --out $OUT/speed-$TAG-exit-release.json
$B python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-exit-default2 --out $OUT/speed-$TAG-exit-default2.json
for f in $OUT/speed-$TAG-exit-*.json; do python3 -c "
import json, sys; d = json.load(open('$f'))
print(d['label'], 'exit after done', [r['warm']['exit_after_done_s'] for r in d['rounds']], 'last result', [max(r['warm']['results_at_s'].values()) for r in d['rounds']], 'elapsed', [r['warm']['elapsed_s'] for r in d['rounds']])"; done
