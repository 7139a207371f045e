#!/usr/bin/env bash
# Flight recorder overhead (issue 15): flight_bench on 2 ranks, recorder off and on side by
# side (interleaved trials) at 4-64 KiB, RUNS times (default 3), outputs in
# bench/results/flight/:
#   np2_run{1..R}.txt/.json   each run's table and its "# flight recorder ..." lines
#   machine.txt               nproc, CPU, kernel, git SHA, load before every run
# Every run first waits for a quiet machine (quiet.sh, QUIET_WAIT_S). Extra arguments go to
# every run (e.g. --repeats 41). Environment: BIN (default build/bench/flight_bench), RUNS, OUT;
# STRATA_FLIGHT_CLOCK and STRATA_FLIGHT_TICK_MS reach the ranks (the clock of the recorder-on
# runs and the ticker's period, whose CPU cost the "ticker thread" line reports).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/flight_bench}"
OUT="${OUT:-$ROOT/bench/results/flight}"
RUNS="${RUNS:-3}"
# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"
bench_start "$OUT" "$BIN"
{
  machine_info "$BIN" "$@"
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
} >"$OUT/machine.txt"
for i in $(seq 1 "$RUNS"); do
  wait_quiet "$OUT/machine.txt"
  echo "== run $i"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN" -b 4K -e 64K -f 4 --repeats 21 \
    -J "$OUT/np2_run$i.json" "$@" 2>&1 | tee "$OUT/np2_run$i.txt"
done
grep -h "^# flight recorder" "$OUT"/np2_run*.txt
