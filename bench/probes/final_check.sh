#!/bin/bash
# One device call that exercises the final tree end to end (writes under $OUT):
# facts, the probe suite at TP=N, and `check --probe` on a Gemma 4 MTP serve line at TP=N.
N=${1:-2}; TAG=${2:-dev}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
SERVE="vllm serve google/gemma-4-E2B-it --tensor-parallel-size $N --speculative-config '{\"method\": \"mtp\", \"model\": \"gg-hf-am/gemma-4-E2B-it-assistant\", \"num_speculative_tokens\": 1}'"
{ date -u; python3 -c "import typer, torch; print('typer', typer.__version__, 'torch', torch.__version__)"; } > $OUT/final-$TAG.txt 2>&1
/usr/bin/time -f "facts wall %e s" python3 -m vllm_doctor facts > $OUT/facts-final-$TAG.txt 2>&1; echo "facts rc=$?" >> $OUT/final-$TAG.txt
/usr/bin/time -f "probe wall %e s" python3 -m vllm_doctor probe --tp $N > $OUT/probe-final-$TAG.txt 2>&1; echo "probe rc=$?" >> $OUT/final-$TAG.txt
/usr/bin/time -f "check wall %e s" python3 -m vllm_doctor check --probe --serve "$SERVE" \
  --model-config vllm_doctor/examples/gemma4-mtp-tp2/model --vllm-version 0.22.1 \
  > $OUT/check-probe-final-$TAG.txt 2>&1; echo "check --probe rc=$? (1 expected: SPEC001 applies)" >> $OUT/final-$TAG.txt
cat $OUT/final-$TAG.txt; tail -5 $OUT/facts-final-$TAG.txt; cat $OUT/probe-final-$TAG.txt; sed -n '/Known failures/,$p' $OUT/check-probe-final-$TAG.txt
