#!/usr/bin/env bash
# A wrong job secret on one host is refused, and the job ends on every rank, without a hang:
# 2 emulated hosts x 2 ranks with "encrypt_inter_node_traffic", host 1's ranks given another
# STRATA_JOB_SECRET. Every rank must exit non-zero on its own (none killed at the launcher's
# deadline) within a bound derived from STRATA_TIMEOUT_MS; the ranks of host 1 must say that
# their secret was refused, and every rank must report an error.
#   wrong_secret.sh FAULT_WORKER
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_testbed --hosts 2 -- "$@"
BIN=$1
echo '{"security": {"encrypt_inter_node_traffic": true}}' >"$LOGS/secure.json"

rc=0
launch run --per-host 2 --timeout 120 --env STRATA_TIMEOUT_MS=$FAULT_TIMEOUT_MS --env STRATA_CONFIG="$LOGS/secure.json" \
  --env STRATA_JOB_SECRET=the-right-secret --host-env 1 STRATA_JOB_SECRET=a-wrong-secret -- \
  "$BIN" --mode loop --iters 20 >"$LOGS/launch.txt" || rc=$?
cat "$LOGS/launch.txt"
show_logs run
((rc != 0)) || fail "every rank exited 0 although host 1 had a wrong secret"
ended_in_time "$(field seconds "$(grep '^launch:' "$LOGS/launch.txt")")" "the job"
for r in 0 1 2 3; do
  code=$(field exit "$(grep "^rank=$r " "$LOGS/launch.txt")")
  [[ $code != 0 && $code != timeout ]] || fail "rank $r: exit '$code' (want a non-zero exit of its own)"
  grep -q '^error: ' "$LOGS/run/rank$r.log" || fail "rank $r reports no error"
done
for r in 2 3; do
  grep -qiE '^error: .*(secret|authenticat)' "$LOGS/run/rank$r.log" ||
    fail "rank $r (wrong secret) does not say its secret was refused"
done
echo PASS
