#!/usr/bin/env bash
# The transformer_lm example refuses bad flags (and bad job configs) with a clear message and
# exit code 78 (strata::kExitConfigError: `strata run` does not restart it), before training
# anything.
#   transformer_lm_flags.sh MPIEXEC EXAMPLE EXAMPLE_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
transformer_lm_start "$@"
# tiny FLAG VALUE ...: a tiny model's flags with the given ones replacing the defaults (CLI11
# refuses an option given twice).
tiny() {
  local -A v=([--layers]=1 [--d-model]=16 [--heads]=2 [--seq-len]=8 [--batch-size]=4 [--max-steps]=1 [--eval-batches]=0)
  while [ $# -gt 0 ]; do v[$1]=$2; shift 2; done
  for k in "${!v[@]}"; do printf '%s\n%s\n' "$k" "${v[$k]}"; done
}

# refuse EXPECTED_TEXT COMMAND...: the command must exit 78, print EXPECTED_TEXT and no final line.
refuse() {
  local expected="$1"; shift
  local out status=0
  out=$("$@" 2>&1) || status=$?
  if [ "$status" -ne 78 ]; then echo "$out"; echo "FAIL: exit $status, not 78: $*"; exit 1; fi
  if ! grep -qF -- "$expected" <<<"$out"; then
    echo "$out"; echo "FAIL: '$*' did not say: $expected"; exit 1
  fi
  if grep -q '^final:' <<<"$out"; then echo "FAIL: '$*' trained anyway"; exit 1; fi
  echo "ok (exit 78): $expected"
}

mapfile -t args < <(tiny --d-model 30 --heads 4); refuse "--d-model 30 is not a multiple of --heads 4" "$EXAMPLE" "${args[@]}"
mapfile -t args < <(tiny --layers 0); refuse "--layers: Value 0 not in range" "$EXAMPLE" "${args[@]}"
mapfile -t args < <(tiny --batch-size -3); refuse "--batch-size: Value -3 not in range" "$EXAMPLE" "${args[@]}"
mapfile -t args < <(tiny --seq-len abc); refuse "--seq-len: Value abc not in range" "$EXAMPLE" "${args[@]}"
mapfile -t args < <(tiny); refuse "were not expected: 3 --layer" "$EXAMPLE" "${args[@]}" --layer 3
refuse "--dropout: Value 1.5 not in range" "$EXAMPLE" "${args[@]}" --dropout 1.5
mkdir -p empty; refuse "no text files in empty" "$EXAMPLE" "${args[@]}" --data-dir empty
mapfile -t args < <(tiny --seq-len 3000000); refuse "lower --seq-len" "$EXAMPLE" "${args[@]}"
mapfile -t args < <(tiny --batch-size 3)
refuse "--batch-size 3 must be a multiple of the 2 data-parallel replicas" \
  "$MPIEXEC" -n 2 "$EXAMPLE" --config "$CONFIGS/job_dp.json" "${args[@]}"
mapfile -t args < <(tiny --batch-size 2)
refuse "microbatches do not divide the example batch of 2 samples" "$EXAMPLE" --config "$CONFIGS/job.json" "${args[@]}"
echo '{"modelparallel": {"enabled": true, "partition": 2}}' >bad.json
mapfile -t args < <(tiny); refuse "unknown key \"partition\"" "$EXAMPLE" "${args[@]}" --config bad.json
echo "PASS"
