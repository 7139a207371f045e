#!/usr/bin/env bash
# Checkpoints of a hybrid run (2 pipeline stages x 2 data-parallel replicas on 4 ranks, the
# example's job_hybrid.json), end to end with the transformer_lm example (tiny model):
#   * 3 hybrid steps (per-rank checkpoint) then 3 more resumed as hybrid, or as p=1 x dp=2,
#     give bitwise the params_sha256 of 6 hybrid steps (hybrid == p=1 x dp=2 bitwise: the same
#     microbatches in the same order, see transformer_lm_layouts.sh);
#   * the same from a full checkpoint of the hybrid run (--full-checkpoint: one file);
#   * resumed at p=2 x dp=1 (other arithmetic: whole microbatches of the global batch, so no
#     uninterrupted run to compare with), it continues exactly like the checkpoint of its
#     arithmetic twin, 3 steps of p=1 x dp=2, resumed the same way (bitwise); the full
#     checkpoint resumed in one process gives that hash too (one process == p=2 bitwise).
# One intra-op thread everywhere (see transformer_lm_start in lib.sh), so layouts compare.
#   transformer_lm_checkpoint_hybrid.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
transformer_lm_start "$@"
MODEL=(--layers 3 --heads 2 --seq-len 16 --batch-size 8 --eval-batches 0 --seed 11 --d-model 32)
HYBRID="$CONFIGS/job_hybrid.json"
cat >p1dp2.json <<'JSON'
{"output_dir": "runs/p1dp2", "modelparallel": {"enabled": true, "partitions": 1, "microbatches": 4, "ddp": true}}
JSON

manifest_of() { cat "$1"/step-000000000003/manifest.json; }
expect_kind() {  # expect_kind DIR KIND SHARDS
  local kind shards
  kind=$(manifest_of "$1" | sed -nE 's/.*"kind": *"([a-z]+)".*/\1/p')
  shards=$(manifest_of "$1" | grep -c '"file"')
  [ "$kind" = "$2" ] && [ "$shards" = "$3" ] ||
    { echo "FAIL: $1 is a $kind checkpoint of $shards file(s), expected $2 of $3"; exit 1; }
}

reference=$(run_np 4 "$HYBRID" --max-steps 6)
run_np 4 "$HYBRID" --max-steps 3 --checkpoint-dir ckh --checkpoint-every 3 >/dev/null
expect_kind ckh partial 4
run_np 4 "$HYBRID" --max-steps 3 --checkpoint-dir ckf --checkpoint-every 3 --full-checkpoint >/dev/null
expect_kind ckf full 1
run_np 2 p1dp2.json --max-steps 3 --checkpoint-dir ckd --checkpoint-every 3 >/dev/null
for layout in hybrid p2; do cp -r ckh "ckh-$layout"; done
cp -r ckf ckf-p1

resumed=$(run_np 4 "$HYBRID" --max-steps 6 --checkpoint-dir ckh-hybrid --resume)
same_hash "hybrid (3 steps) -> hybrid (3 steps)" "$resumed" "hybrid (6 steps)" "$reference"
resumed=$(run_np 2 p1dp2.json --max-steps 6 --checkpoint-dir ckh --resume)
same_hash "hybrid (3 steps) -> p=1 x dp=2 (3 steps)" "$resumed" "hybrid (6 steps)" "$reference"
resumed=$(run_np 2 p1dp2.json --max-steps 6 --checkpoint-dir ckf --resume)
same_hash "hybrid full checkpoint (3 steps) -> p=1 x dp=2 (3 steps)" "$resumed" "hybrid (6 steps)" "$reference"

twin=$(run_np 2 "$CONFIGS/job_pipeline.json" --max-steps 6 --checkpoint-dir ckd --resume)
resumed=$(run_np 2 "$CONFIGS/job_pipeline.json" --max-steps 6 --checkpoint-dir ckh-p2 --resume)
same_hash "hybrid (3 steps) -> p=2 x dp=1 (3 steps)" "$resumed" "p=1 x dp=2 (3 steps) -> p=2 x dp=1 (3 steps)" "$twin"
resumed=$(run_np 1 p1.json --max-steps 6 --checkpoint-dir ckf-p1 --resume)
same_hash "hybrid full checkpoint (3 steps) -> one process (3 steps)" "$resumed" \
  "p=1 x dp=2 (3 steps) -> p=2 x dp=1 (3 steps)" "$twin"
echo "PASS"
