# Shared by the example end-to-end scripts (sourced): a scratch folder, runs of the example
# under mpiexec (MPIEXEC and EXAMPLE set by the script, or by transformer_lm_start), and
# checks on its final line ("final: step=... loss=... accuracy=... params_sha256=...").

# Into a fresh folder, removed when the script exits (the example writes runs/ there).
in_scratch_dir() {
  workdir=$(mktemp -d)
  trap 'rm -rf "$workdir"' EXIT
  cd "$workdir"
}

# run_np NP CONFIG [ARGS...] -> the final line of the example on NP ranks with the job config
# CONFIG, the model flags in the array MODEL (when set) and ARGS; the whole output goes to
# stderr. A failed run or one without a final line fails the script.
run_np() {
  local np="$1" config="$2" out; shift 2
  out=$("$MPIEXEC" -n "$np" "$EXAMPLE" --config "$config" "${MODEL[@]}" "$@" 2>&1) || {
    echo "$out"; echo "FAIL: np $np $config $* exited non-zero"; exit 1; }
  echo "$out" >&2
  grep '^final:' <<<"$out" || { echo "FAIL: np $np $config $* printed no final line"; exit 1; }
}

hash_of() { sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$1"; }
loss_of() { sed -E 's/.*loss=([-0-9.e+]+).*/\1/' <<<"$1"; }

# same_hash NAME_A FINAL_A NAME_B FINAL_B: the two runs ended with bitwise equal parameters.
same_hash() {
  [ "$(hash_of "$2")" = "$(hash_of "$4")" ] || { echo "FAIL: $1 and $3 differ: $2 / $4"; exit 1; }
  echo "ok: $1 == $3 (bitwise): $(hash_of "$2")"
}

# accuracy_at_least FINAL MIN WHEN: the run's test accuracy (printed as after WHEN) is >= MIN.
accuracy_at_least() {
  local accuracy
  accuracy=$(sed -E 's/.*accuracy=([0-9.]+).*/\1/' <<<"$1")
  echo "accuracy after $3: $accuracy"
  awk -v a="$accuracy" -v min="$2" 'BEGIN { exit !(a >= min) }' || { echo "FAIL: accuracy $accuracy < $2"; exit 1; }
}

# The start of every transformer_lm script, run as `SCRIPT MPIEXEC EXAMPLE EXAMPLE_DIR`:
# MPIEXEC, EXAMPLE and CONFIGS (the example's folder of job configs) set, in a scratch folder
# that holds the pipeline-engine configs. One intra-op thread in every run
# (OMP_NUM_THREADS=1, inherited by the ranks): libtorch's CPU LayerNorm backward sums its
# weight gradient in per-thread parts, so runs with different thread counts (one process on
# 2 cores gets 2, 2 or 4 ranks get 1) round differently and could not be compared bitwise.
transformer_lm_start() {
  export OMP_NUM_THREADS=1
  MPIEXEC="$1"
  EXAMPLE="$2"
  CONFIGS="$3"
  in_scratch_dir
  write_pipeline_configs
}

# The pipeline-engine configs the transformer_lm scripts compare against: p1.json (one
# process, partitions 1) and p4.json (4 stages), 4 microbatches each, in this folder.
write_pipeline_configs() {
  local p
  for p in 1 4; do
    echo "{\"output_dir\": \"runs/p$p\", \"modelparallel\": {\"enabled\": true, \"partitions\": $p, \"microbatches\": 4}}" >"p$p.json"
  done
}
