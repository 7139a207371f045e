#!/usr/bin/env bash
# Point-to-point stage link (issue 14): p2p_bench on 2 ranks of one host, shared memory and
# TCP side by side (alternating trials) from 8 B and 4 KiB to 64 MiB, RUNS times (default 2),
# outputs in bench/results/p2p_<date>/:
#   np2_run{1..R}.txt   each run's table and its "# p2p ..." lines
#   machine.txt         nproc, CPU, kernel, git SHA, uptime and load before every run
# Every run first waits for a quiet machine (quiet.sh, QUIET_WAIT_S). Extra arguments go to
# every run (e.g. --repeats 11). Environment: BIN (default build/bench/p2p_bench), RUNS, OUT.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/p2p_bench}"
OUT="${OUT:-$ROOT/bench/results/p2p_$(date +%F)}"
RUNS="${RUNS:-2}"
# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"
bench_start "$OUT" "$BIN"
machine_info "$BIN" "$@" >"$OUT/machine.txt"
for i in $(seq 1 "$RUNS"); do
  wait_quiet "$OUT/machine.txt"
  echo "run $i uptime: $(uptime)" >>"$OUT/machine.txt"
  echo "== run $i"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN" --min 4K --max 64M "$@" 2>&1 | tee "$OUT/np2_run$i.txt"
done
grep -h "^# p2p " "$OUT"/np2_run*.txt
