#!/usr/bin/env bash
# The transformer_lm example as a pipeline of 2 and of 4 stages (the tied embedding on stage
# 0, the head on the last) against one process running the same microbatches (the pipeline
# engine with partitions 1): after 2 AdamW steps, params_sha256 must be bitwise equal. The
# hash covers every parameter and fails when the tied copies on two ranks differ, so it
# checks that the tied gradients were summed exactly as one process sums them. Every run uses
# one intra-op thread (see transformer_lm_start in lib.sh). Lean: seconds.
#   transformer_lm_pipeline.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
transformer_lm_start "$@"
MODEL=(--layers 2 --d-model 32 --heads 2 --seq-len 16 --batch-size 8 --max-steps 2 --eval-batches 1 --seed 7)
single=$(run_np 1 p1.json)
pipe2=$(run_np 2 "$CONFIGS/job_pipeline.json")
pipe4=$(run_np 4 p4.json)
grep -q '^final: step=2 ' <<<"$single" || { echo "FAIL: expected step=2: $single"; exit 1; }
same_hash "one process" "$single" "p=2" "$pipe2"
same_hash "one process" "$single" "p=4" "$pipe4"
echo "PASS"
