#!/usr/bin/env bash
# The main example ends a job that cannot work with exit code 78 (strata::kExitConfigError,
# docs/exit_status.md), which mpirun passes on and `strata run` does not restart:
#   a bad job config     (an unknown key) on both ranks;
#   a wrong job secret   rank 1's secret differs from rank 0's: the store refuses it.
# Neither run trains (no "final:" line). A few seconds each.
#   fashion_mnist_exit_codes.sh MPIEXEC EXAMPLE
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"
source "$(dirname "$0")/lib.sh"
in_scratch_dir
export STRATA_TIMEOUT_MS=20000

# expect_78 NAME EXPECTED_TEXT COMMAND...: the command exits 78, says EXPECTED_TEXT, trains nothing.
expect_78() {
  local name="$1" expected="$2" out status=0; shift 2
  out=$("$@" 2>&1) || status=$?
  echo "$out" >&2
  [ "$status" -eq 78 ] || { echo "FAIL: $name: exit $status, not 78"; exit 1; }
  grep -qF -- "$expected" <<<"$out" || { echo "FAIL: $name: no '$expected' in the output"; exit 1; }
  if grep -q '^final:' <<<"$out"; then echo "FAIL: $name: trained anyway"; exit 1; fi
  echo "ok: $name: exit 78, '$expected'"
}

echo '{"dataparallel": {"bucket_cap": 25}}' >bad.json
expect_78 "bad config" 'unknown key "bucket_cap"' \
  "$MPIEXEC" -n 2 "$EXAMPLE" --config bad.json --max-steps 2
expect_78 "wrong secret" "wrong job secret" \
  "$MPIEXEC" -n 1 -x STRATA_JOB_SECRET=alpha-secret-of-this-test "$EXAMPLE" --max-steps 2 : \
             -n 1 -x STRATA_JOB_SECRET=another-secret-entirely "$EXAMPLE" --max-steps 2
echo "PASS"
