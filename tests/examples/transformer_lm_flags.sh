#!/usr/bin/env bash
# The transformer_lm example refuses bad flags with a clear message and exit code 2 (or
# CLI11's 105/106 for malformed options), before training anything.
#   transformer_lm_flags.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; CONFIGS="$3"
workdir=$(mktemp -d); trap 'rm -rf "$workdir"' EXIT; cd "$workdir"
TINY=(--layers 1 --d-model 16 --heads 2 --seq-len 8 --batch-size 4 --max-steps 1 --eval-batches 0)

# refuse EXPECTED_TEXT COMMAND...: the command must fail, print EXPECTED_TEXT and no final line.
refuse() {
  local expected="$1"; shift
  local out status=0
  out=$("$@" 2>&1) || status=$?
  if [ "$status" -eq 0 ]; then echo "$out"; echo "FAIL: accepted: $*"; exit 1; fi
  if ! grep -qF -- "$expected" <<<"$out"; then
    echo "$out"; echo "FAIL: '$*' did not say: $expected"; exit 1
  fi
  if grep -q '^final:' <<<"$out"; then echo "FAIL: '$*' trained anyway"; exit 1; fi
  echo "ok (exit $status): $expected"
}

refuse "--d-model 30 is not a multiple of --heads 4" "$EXAMPLE" "${TINY[@]}" --d-model 30 --heads 4
refuse "--layers: Value 0 not in range" "$EXAMPLE" "${TINY[@]}" --layers 0
refuse "--batch-size: Value -3 not in range" "$EXAMPLE" "${TINY[@]}" --batch-size -3
refuse "--seq-len: Value abc not in range" "$EXAMPLE" "${TINY[@]}" --seq-len abc
refuse "The following argument was not expected: --layer" "$EXAMPLE" "${TINY[@]}" --layer 3
refuse "--dropout: Value 1.5 not in range" "$EXAMPLE" "${TINY[@]}" --dropout 1.5
refuse "no text files in $workdir/empty" bash -c "mkdir -p empty && '$EXAMPLE' ${TINY[*]} --data-dir empty"
refuse "lower --seq-len" "$EXAMPLE" "${TINY[@]}" --seq-len 3000000
refuse "--batch-size 3 must be a multiple of the 2 data-parallel replicas" \
  "$MPIEXEC" -n 2 "$EXAMPLE" --config "$CONFIGS/job_dp.json" "${TINY[@]}" --batch-size 3
refuse "microbatches do not divide the batch of 2 samples" \
  "$MPIEXEC" -n 2 "$EXAMPLE" --config "$CONFIGS/job_pipeline.json" "${TINY[@]}" --batch-size 2
refuse "unknown key \"partition\"" bash -c \
  "echo '{\"modelparallel\": {\"enabled\": true, \"partition\": 2}}' > bad.json && '$EXAMPLE' ${TINY[*]} --config bad.json"
echo "PASS"
