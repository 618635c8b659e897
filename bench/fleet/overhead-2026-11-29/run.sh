#!/bin/sh
# The command behind RESULTS.md's overhead table (2026-11-29, the 2-core development VM).
# /tmp/fleet-base: the tree before the change (git archive 139a92c vllm_doctor rules).
set -e
cd "$(dirname "$0")/../../.."
OUT=bench/fleet/overhead-2026-11-29
for bytecode in cached as-is; do
  python bench/fleet/overhead.py 3 8 --reps 8 --bytecode "$bytecode" \
    --baseline /tmp/fleet-base --raw "$OUT/raw-$bytecode.jsonl" | tee -a "$OUT/summary.txt"
done
# where the time goes inside one run each (the fleet check and the floor on one clock)
python bench/fleet/timeline.py 3 8 --reps 6 --bytecode cached \
  --raw "$OUT/timeline-cached.jsonl" | tee -a "$OUT/timeline.txt"
