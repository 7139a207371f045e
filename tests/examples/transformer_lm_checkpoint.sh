#!/usr/bin/env bash
# Checkpoints across layouts, end to end with the transformer_lm example (tiny model):
#   * 3 steps at p=4 (per-rank checkpoint), then 3 more resumed at p=2, give bitwise the same
#     params_sha256 as 6 steps at p=2 (AdamW's moments and step counts restored by path);
#   * the same checkpoint resumed by one process gives that hash too;
#   * resumed as plain data parallelism (other arithmetic: whole local batches) the loss after
#     6 steps is within 1e-4 relative of the pipeline's;
#   * a full checkpoint of the p=4 pipeline (--full-checkpoint: one file, model.pt, written by
#     rank 0 stage by stage) resumes at p=2 and in one process with that hash too;
#   * a checkpoint of a different model is refused on every rank, naming the parameter;
#   * no checkpoint file is readable by other users.
# One intra-op thread everywhere (see transformer_lm_start in lib.sh), so layouts compare.
#   transformer_lm_checkpoint.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
transformer_lm_start "$@"
SHAPE=(--layers 3 --heads 2 --seq-len 16 --batch-size 8 --eval-batches 0 --seed 11)
MODEL=("${SHAPE[@]}" --d-model 32)

kind_of() { sed -nE 's/.*"kind": *"([a-z]+)".*/\1/p' "$1"/step-000000000003/manifest.json; }
files_of() { (cd "$1"/step-000000000003 && ls | tr '\n' ' '); }

reference=$(run_np 2 "$CONFIGS/job_pipeline.json" --max-steps 6)

run_np 4 p4.json --max-steps 3 --checkpoint-dir ck4 --checkpoint-every 3 >/dev/null
[ "$(kind_of ck4)" = partial ] || { echo "FAIL: p=4 did not write a partial checkpoint"; exit 1; }
for layout in p2 p1 dp; do cp -r ck4 "ck4-$layout"; done
p2=$(run_np 2 "$CONFIGS/job_pipeline.json" --max-steps 6 --checkpoint-dir ck4-p2 --resume)
same_hash "p=4 (3 steps) -> p=2 (3 steps)" "$p2" "p=2 (6 steps)" "$reference"
p1=$(run_np 1 p1.json --max-steps 6 --checkpoint-dir ck4-p1 --resume)
same_hash "p=4 (3 steps) -> one process (3 steps)" "$p1" "p=2 (6 steps)" "$reference"
dp=$(run_np 2 "$CONFIGS/job_dp.json" --max-steps 6 --checkpoint-dir ck4-dp --resume)
awk -v a="$(loss_of "$dp")" -v b="$(loss_of "$reference")" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }' ||
  { echo "FAIL: p=4 -> data parallel: loss $(loss_of "$dp") vs $(loss_of "$reference")"; exit 1; }
echo "ok: p=4 (3 steps) -> data parallel (3 steps): loss $(loss_of "$dp") ~ $(loss_of "$reference")"

# A full checkpoint of the pipeline: one file, no per-rank shards; it resumes in any layout.
run_np 4 p4.json --max-steps 3 --checkpoint-dir full4 --checkpoint-every 3 --full-checkpoint >/dev/null
[ "$(kind_of full4)" = full ] || { echo "FAIL: --full-checkpoint at p=4 did not write a full checkpoint"; exit 1; }
[ "$(files_of full4)" = "manifest.json model.pt " ] || { echo "FAIL: full checkpoint holds $(files_of full4)"; exit 1; }
# Checkpoints are created 0640 (docs/security.md, "Files a job writes"): none readable by others.
open=$(find ck4 full4 -type f -perm /o=r)
[ -z "$open" ] || { echo "FAIL: checkpoint files readable by others: $open"; exit 1; }
echo "ok: $(find ck4 full4 -type f | wc -l) checkpoint files, none readable by others"
cp -r full4 full4-p1
p2=$(run_np 2 "$CONFIGS/job_pipeline.json" --max-steps 6 --checkpoint-dir full4 --resume)
same_hash "p=4 full checkpoint (3 steps) -> p=2 (3 steps)" "$p2" "p=2 (6 steps)" "$reference"
p1=$(run_np 1 p1.json --max-steps 6 --checkpoint-dir full4-p1 --resume)
same_hash "p=4 full checkpoint (3 steps) -> one process (3 steps)" "$p1" "p=2 (6 steps)" "$reference"

# A different model: wider blocks. Every rank refuses, naming the first differing parameter.
status=0
out=$("$MPIEXEC" -n 2 "$EXAMPLE" --config "$CONFIGS/job_pipeline.json" "${SHAPE[@]}" --d-model 48 --max-steps 6 \
  --checkpoint-dir ck4 --resume 2>&1) || status=$?
echo "$out" >&2
[ "$status" -ne 0 ] || { echo "FAIL: a checkpoint of another model was accepted"; exit 1; }
refusals=$(grep -c 'different model.*"blocks.0.attn.proj.bias" has shape \[32\] in the checkpoint, \[48\] in the model' <<<"$out" || true)
[ "$refusals" -eq 2 ] || { echo "FAIL: expected the refusal naming blocks.0.attn.proj.bias on both ranks, got $refusals"; exit 1; }
echo "ok: another model's checkpoint refused on both ranks"
echo "PASS"
