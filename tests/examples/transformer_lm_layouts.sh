#!/usr/bin/env bash
# End to end: the transformer_lm example (a tiny model, a few steps) in every layout.
#
# Bitwise equal params_sha256 where the arithmetic is the same:
#   one process (pipeline engine, partitions 1)  ==  p=2  ==  p=4        (4 microbatches each)
#   p=1 x dp=2 (ddp)                             ==  p=2 x dp=2 (hybrid)
# (gradients are accumulated over the same microbatches in the same order; a 2-rank
# AllReduce of a+b is exact in either order; dropout is seeded per step, microbatch and layer).
# Within a tolerance where it is not: data parallelism with and without the pipeline engine
# against the one process, on the loss after N steps, with --dropout 0 (same global batches;
# with dropout the replicas' masks differ from one process's, not only the rounding; without
# it only the summation order of the gradients differs): |Δloss| / loss <= 1e-4.
# One intra-op thread everywhere (see transformer_lm_pipeline.sh), so layouts are comparable.
#   transformer_lm_layouts.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; CONFIGS="$3"
export OMP_NUM_THREADS=1
workdir=$(mktemp -d); trap 'rm -rf "$workdir"' EXIT; cd "$workdir"
MODEL=(--layers 2 --d-model 32 --heads 2 --seq-len 16 --batch-size 8 --max-steps 4 --eval-batches 1 --seed 7)

cat >p1.json <<'EOF'
{"output_dir": "runs/p1", "modelparallel": {"enabled": true, "partitions": 1, "microbatches": 4}}
EOF
cat >p4.json <<'EOF'
{"output_dir": "runs/p4", "modelparallel": {"enabled": true, "partitions": 4, "microbatches": 4}}
EOF
cat >p1dp2.json <<'EOF'
{"output_dir": "runs/p1dp2", "modelparallel": {"enabled": true, "partitions": 1, "microbatches": 4, "ddp": true}}
EOF

# run NP CONFIG [ARGS...] -> the final line
run() {
  local np="$1" config="$2" out; shift 2
  out=$("$MPIEXEC" -x OMP_NUM_THREADS -n "$np" "$EXAMPLE" --config "$config" "${MODEL[@]}" "$@" 2>&1) || {
    echo "$out"; echo "FAIL: np $np $config exited non-zero"; exit 1; }
  echo "$out" >&2
  grep '^final:' <<<"$out" || { echo "FAIL: np $np $config printed no final line"; exit 1; }
}
hash_of() { sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$1"; }
loss_of() { sed -E 's/.*loss=([-0-9.e+]+).*/\1/' <<<"$1"; }
same_hash() {
  [ "$(hash_of "$2")" = "$(hash_of "$4")" ] || { echo "FAIL: $1 and $3 differ: $2 / $4"; exit 1; }
  echo "ok: $1 == $3 (bitwise): $(hash_of "$2")"
}
close_loss() {
  local a b
  a=$(loss_of "$2"); b=$(loss_of "$4")
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * a) }' ||
    { echo "FAIL: $1 loss $a vs $3 loss $b differ by more than 1e-4 relative"; exit 1; }
  [ "$(hash_of "$2")" != "$(hash_of "$4")" ] || echo "note: $1 and $3 are even bitwise equal"
  echo "ok: $1 loss $a ~ $3 loss $b (1e-4 relative)"
}

single=$(run 1 p1.json)
pipe2=$(run 2 "$CONFIGS/job_pipeline.json")
pipe4=$(run 4 p4.json)
dp2=$(run 2 p1dp2.json)
hybrid=$(run 4 "$CONFIGS/job_hybrid.json")
single0=$(run 1 p1.json --dropout 0)
dp0=$(run 2 p1dp2.json --dropout 0)
plain_dp0=$(run 2 "$CONFIGS/job_dp.json" --dropout 0)

grep -q 'final: step=4 ' <<<"$single" || { echo "FAIL: expected step=4: $single"; exit 1; }
same_hash "one process" "$single" "p=2" "$pipe2"
same_hash "one process" "$single" "p=4" "$pipe4"
same_hash "p=1 x dp=2" "$dp2" "p=2 x dp=2" "$hybrid"
close_loss "one process" "$single0" "p=1 x dp=2" "$dp0"
close_loss "one process" "$single0" "plain data parallel (dp=2)" "$plain_dp0"
echo "PASS"
