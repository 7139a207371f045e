#!/usr/bin/env bash
# Pipeline training across emulated hosts, against one process (tests/pp's fidelity tests:
# gradients bitwise equal to a single-process reference at every step, parameters within
# 1e-6 after the steps):
#   2 hosts x 1 rank:  one pipeline, its 2 stages on different hosts (activations and
#                      gradients cross the link);
#   2 hosts x 2 ranks: hybrid, 2 stages x 2 replicas, with the "cluster" placement (each
#                      pipeline on one host, the data-parallel AllReduce between hosts) and
#                      "spread" (each pipeline across the hosts, data parallel within one).
#   pipeline_fidelity.sh PP_MPI_TEST
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_testbed --hosts 2 -- "$@"
BIN=$1

# run NAME PER_HOST EXPECTED_TESTS FILTER: every rank exits 0 and rank 0's gtest ran (and
# passed) exactly the expected tests, so a filter that matches nothing cannot pass.
run() {
  local name=$1 per_host=$2 want=$3 filter=$4 rc=0
  launch "$name" --per-host "$per_host" --timeout 240 --env STRATA_TIMEOUT_MS=60000 --env STRATA_LOG_LEVEL=info -- \
    "$BIN" --gtest_filter="$filter" || rc=$?
  show_logs "$name"
  ((rc == 0)) || fail "$name: a rank failed"
  local log="$LOGS/$name/rank0.log" passed
  passed=$(grep -c '^\[       OK \] PipelineFidelity\.' "$log" || true)
  ((passed == want)) || fail "$name: $passed fidelity tests passed on rank 0, want $want"
  for ((r = 0; r < 2 * per_host; r++)); do
    grep -q "host=host$((r / per_host)) .*node=$((r / per_host))/2" "$LOGS/$name/rank$r.log" ||
      fail "$name: rank $r did not report running on host$((r / per_host)) of 2 hosts"
  done
}

run stages_on_two_hosts 1 2 'PipelineFidelity.SimpleSchedule*:PipelineFidelity.InterleavedSchedule*'
# Stages on different hosts talk over TCP: no group of that run has a shared-memory link
# (the communicator logs p2p_shm_links per group at info level).
for r in 0 1; do
  grep -q "p2p_shm_links=0" "$LOGS/stages_on_two_hosts/rank$r.log" ||
    fail "stages_on_two_hosts: rank $r logged no group with p2p_shm_links=0"
  if grep -q "p2p_shm_links=[1-9]" "$LOGS/stages_on_two_hosts/rank$r.log"; then
    fail "stages_on_two_hosts: rank $r has a shared-memory link to a rank of another host"
  fi
done
run hybrid_2x2 2 2 'PipelineFidelity.SimpleSchedule*:PipelineFidelity.SpreadPlacement*'
echo PASS
