#!/usr/bin/env bash
# The transformer_lm example as a 2-stage pipeline (embedding on stage 0, the head tied to it
# on stage 1) against one process running the same microbatches (the pipeline engine with
# partitions 1): after 2 AdamW steps, params_sha256 must be bitwise equal. The hash covers
# every parameter and fails when the tied copies on the two ranks differ, so it checks the
# tied gradients were summed exactly as one process sums them. Lean: seconds.
#   transformer_lm_pipeline.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; CONFIGS="$3"
workdir=$(mktemp -d); trap 'rm -rf "$workdir"' EXIT; cd "$workdir"
MODEL=(--layers 2 --d-model 32 --heads 2 --seq-len 16 --batch-size 8 --max-steps 2 --eval-batches 1 --seed 7)
cat >p1.json <<'JSON'
{"output_dir": "runs/p1", "modelparallel": {"enabled": true, "partitions": 1, "microbatches": 4}}
JSON
run() {  # run NP CONFIG -> the final line
  local out
  out=$("$MPIEXEC" -n "$1" "$EXAMPLE" --config "$2" "${MODEL[@]}" 2>&1) || {
    echo "$out"; echo "FAIL: np $1 $2 exited non-zero"; exit 1; }
  echo "$out" >&2
  grep '^final:' <<<"$out" || { echo "FAIL: np $1 $2 printed no final line"; exit 1; }
}
hash_of() { sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$1"; }
single=$(run 1 p1.json)
pipe=$(run 2 "$CONFIGS/job_pipeline.json")
grep -q '^final: step=2 ' <<<"$single" || { echo "FAIL: expected step=2: $single"; exit 1; }
[ "$(hash_of "$single")" = "$(hash_of "$pipe")" ] || { echo "FAIL: one process and p=2 differ: $single / $pipe"; exit 1; }
echo "ok: one process == p=2 (bitwise): $(hash_of "$single")"
echo "PASS"
