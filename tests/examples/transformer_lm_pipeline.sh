#!/usr/bin/env bash
# The transformer_lm example as a pipeline of 2 and of 4 stages (the tied embedding on stage
# 0, the head on the last) against one process running the same microbatches (the pipeline
# engine with partitions 1): after 2 AdamW steps, params_sha256 must be bitwise equal. The
# hash covers every parameter and fails when the tied copies on two ranks differ, so it
# checks that the tied gradients were summed exactly as one process sums them.
#
# Every run uses one intra-op thread (OMP_NUM_THREADS=1): libtorch's CPU LayerNorm backward
# sums its weight gradient in per-thread parts, so a run with 2 threads (one process on 2
# cores) rounds differently from runs with 1 (2 or 4 ranks on 2 cores). Lean: seconds.
#   transformer_lm_pipeline.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; CONFIGS="$3"
export OMP_NUM_THREADS=1
workdir=$(mktemp -d); trap 'rm -rf "$workdir"' EXIT; cd "$workdir"
MODEL=(--layers 2 --d-model 32 --heads 2 --seq-len 16 --batch-size 8 --max-steps 2 --eval-batches 1 --seed 7)
cat >p1.json <<'JSON'
{"output_dir": "runs/p1", "modelparallel": {"enabled": true, "partitions": 1, "microbatches": 4}}
JSON
cat >p4.json <<'JSON'
{"output_dir": "runs/p4", "modelparallel": {"enabled": true, "partitions": 4, "microbatches": 4}}
JSON
run() {  # run NP CONFIG -> the final line
  local out
  out=$("$MPIEXEC" -x OMP_NUM_THREADS -n "$1" "$EXAMPLE" --config "$2" "${MODEL[@]}" 2>&1) || {
    echo "$out"; echo "FAIL: np $1 $2 exited non-zero"; exit 1; }
  echo "$out" >&2
  grep '^final:' <<<"$out" || { echo "FAIL: np $1 $2 printed no final line"; exit 1; }
}
hash_of() { sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$1"; }
single=$(run 1 p1.json)
pipe2=$(run 2 "$CONFIGS/job_pipeline.json")
pipe4=$(run 4 p4.json)
grep -q '^final: step=2 ' <<<"$single" || { echo "FAIL: expected step=2: $single"; exit 1; }
for layout in "p=2:$pipe2" "p=4:$pipe4"; do
  name=${layout%%:*}; line=${layout#*:}
  [ "$(hash_of "$single")" = "$(hash_of "$line")" ] || {
    echo "FAIL: one process and $name differ: $single / $line"; exit 1; }
  echo "ok: one process == $name (bitwise): $(hash_of "$single")"
done
echo "PASS"
