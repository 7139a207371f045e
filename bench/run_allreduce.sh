#!/usr/bin/env bash
# Runs the standard allreduce_bench set (builds nothing) and stores the outputs in OUT (default
# a new folder bench/results/allreduce_<date>_<time>, never over committed raw outputs):
#   np2_run{1..R}.txt/.json  2 ranks, default transport, R runs (RUNS, default 3)
#   np2_median.txt           per-column medians of those runs (ratios: median of per-run ratios)
#   np4.txt                  4 ranks on this machine (oversubscribed when nproc < 4)
#   np2_tcp.txt              2 ranks with STRATA_TRANSPORT=tcp (the inter-host path; gloo is TCP too)
#   machine.txt              nproc, CPU, kernel, git SHA, load before every run
# Every run first waits for a quiet machine (quiet.sh) and is repeated (at most 3 times) when
# other processes used >= MAX_FOREIGN cores (default 0.15) during it; STRATA_* variables in
# the environment apply to every run (e.g. STRATA_CHUNK_BYTES=524288 OUT=bench/results/c512).
# Extra arguments go to every run, e.g.  bench/run_allreduce.sh -e 64M --repeats 7
# Environment: BIN (default build/bench/allreduce_bench), RUNS, OUT (default: a new dated folder),
#              QUIET_WAIT_S (default 60: wait up to this long for < 0.15 foreign cores).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/allreduce_bench}"
OUT="${OUT:-$ROOT/bench/results/allreduce_$(date +%Y-%m-%d_%H%M%S)}"
RUNS="${RUNS:-3}"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
[[ -x "$BIN" ]] || { echo "missing $BIN: ninja -C build -j2 allreduce_bench" >&2; exit 1; }
mkdir -p "$OUT"

# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"

machine_info "$BIN" "$@" >"$OUT/machine.txt"

run() {  # run NAME NP [mpirun args...] -- [bench args...]
  local name=$1 np=$2; shift 2
  local margs=()
  while [[ $# -gt 0 && $1 != -- ]]; do margs+=("$1"); shift; done
  shift || true
  wait_quiet "$OUT/machine.txt"
  echo "== $name (np $np)"
  "${MPIRUN[@]}" -np "$np" "${margs[@]}" "$BIN" -J "$OUT/$name.json" "$@" 2>&1 | tee "$OUT/$name.txt"
}

foreign_of() { sed -n 's/^# foreign cpu.*: \([0-9.]*\)$/\1/p' "$OUT/$1.txt"; }

# run_quiet NAME NP ...: like run, repeated (at most 3 times) while other processes used
# >= MAX_FOREIGN cores during the run; rejected outputs are kept as NAME.rejected<k>.*.
MAX_FOREIGN="${MAX_FOREIGN:-0.15}"
run_quiet() {
  local name=$1 k f
  for k in 1 2 3; do
    run "$@"
    f=$(foreign_of "$name")
    if awk -v f="${f:-9}" -v m="$MAX_FOREIGN" 'BEGIN{exit !(f < m)}' || (( k == 3 )); then
      (( k < 3 )) || echo "$name: kept although foreign cpu $f >= $MAX_FOREIGN" | tee -a "$OUT/machine.txt"
      return 0
    fi
    echo "$name: rejected, foreign cpu $f >= $MAX_FOREIGN" | tee -a "$OUT/machine.txt"
    for ext in txt json; do mv "$OUT/$name.$ext" "$OUT/$name.rejected$k.$ext"; done
  done
}

for i in $(seq 1 "$RUNS"); do run_quiet "np2_run$i" 2 -- "$@"; done
run_quiet np4 4 -- "$@"
run_quiet np2_tcp 2 -x STRATA_TRANSPORT=tcp -- "$@"

# Medians of the 2-rank runs (overall and per host mode), in the benchmark's table shape.
names=()
for i in $(seq 1 "$RUNS"); do names+=("$OUT/np2_run$i"); done
/usr/bin/python3 "$ROOT/bench/summarize.py" runs "${names[@]}" | tee "$OUT/np2_median.txt"
