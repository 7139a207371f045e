#!/usr/bin/env bash
# The transformer_lm example as a 2-stage pipeline (embedding on stage 0, the head tied to it
# on stage 1) against one process running the same microbatches (the pipeline engine with
# partitions 1): after 2 AdamW steps, params_sha256 must be bitwise equal. The hash covers
# every parameter and fails when the tied copies on the two ranks differ, so it checks the
# tied gradients were summed exactly as one process sums them. Lean: seconds.
#   transformer_lm_pipeline.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
transformer_lm_start "$@"
MODEL=(--layers 2 --d-model 32 --heads 2 --seq-len 16 --batch-size 8 --max-steps 2 --eval-batches 1 --seed 7)
single=$(run_np 1 p1.json)
pipe=$(run_np 2 "$CONFIGS/job_pipeline.json")
grep -q '^final: step=2 ' <<<"$single" || { echo "FAIL: expected step=2: $single"; exit 1; }
same_hash "one process" "$single" "p=2" "$pipe"
echo "PASS"
