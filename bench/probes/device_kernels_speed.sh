#!/bin/bash
# One device call: the kernels probe on planted libraries, and the probe run's speed at N and 2
# ranks with bytecode cached: the peer copies through CUDA IPC (the default), with a context per
# peer GPU (the code before it) and left out, as variants in the same rounds.
#   bash bench/probes/device_kernels_speed.sh NPROC TAG [ROUNDS]
# Writes under $OUT: kernels-TAG.txt, kernels-TAG.json, speed-TAG-copies.json,
# speed-TAG-2-copies.json, events-TAG.tgz
N=${1:-4}; TAG=${2:-dev}; ROUNDS=${3:-3}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
if ! python3 -c "import re2, ahocorasick" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
D="python3 -m vllm_doctor"
K=$OUT/kernels-$TAG.txt
bash bench/probes/kernels/build.sh /tmp/planted 90 > $K 2>&1
for f in wrong right ptx80 ptx-newer; do
  echo "\$ vllm-doctor probe kernels --extension /tmp/planted/$f.so" >> $K
  $D probe kernels --extension /tmp/planted/$f.so >> $K 2>&1; echo "exit $?" >> $K; echo >> $K
done
echo "\$ vllm-doctor probe kernels --extension (all four) --format json" >> $K
$D probe kernels --format json --extension /tmp/planted/wrong.so --extension /tmp/planted/right.so \
  --extension /tmp/planted/ptx80.so --extension /tmp/planted/ptx-newer.so > $OUT/kernels-$TAG.json 2>> $K; echo "exit $?" >> $K
echo "\$ CUDA_MODULE_LOADING=EAGER vllm-doctor probe kernels --extension ptx-newer.so" >> $K
CUDA_MODULE_LOADING=EAGER $D probe kernels --extension /tmp/planted/ptx-newer.so >> $K 2>&1; echo "exit $?" >> $K
echo "\$ vllm-doctor probe p2p-nccl --tp $N -v" >> $K
$D probe p2p-nccl --tp $N -v >> $K 2>&1; echo "exit $?" >> $K
echo "\$ vllm-doctor probe --tp $N" >> $K
$D probe --tp $N >> $K 2>&1; echo "exit $?" >> $K
export -n PYTHONDONTWRITEBYTECODE; unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
V="--variant contexts:VLLM_DOCTOR_PROBE_PARAMS={\"bench\":{\"copies\":\"contexts\"}} --variant none:VLLM_DOCTOR_PROBE_PARAMS={\"bench\":{\"copies\":\"none\"}}"
python3 bench/probes/speed.py --nproc $N --rounds $ROUNDS --label $TAG-copies $V --out $OUT/speed-$TAG-copies.json
rm -rf /tmp/keep; VLLM_DOCTOR_PROBE_DIR=/tmp/keep $D probe --tp $N --format json > /tmp/keep-run.json 2>/dev/null
cp /tmp/keep-run.json /tmp/keep/; tar -czf $OUT/events-$TAG.tgz -C /tmp keep
[ "$N" != 2 ] && python3 bench/probes/speed.py --nproc 2 --rounds $ROUNDS --label $TAG-2-copies $V --out $OUT/speed-$TAG-2-copies.json
grep -E '^\$|^exit|^\[|^      \[|Summary|probe pass|copies' $K | cut -c1-300 | head -70
