#!/usr/bin/env bash
# How far apart this machine's cores drift: a 1-rank scaling_bench run (no mpirun, one
# intra-op thread) pinned to core 0, then the same on core 1, ..., PAIRS times, the other
# cores idle. Why it matters: a synchronous n-rank job goes at its slowest core's pace, and
# run_scaling.sh divides by 1-rank baselines on core 0 (mpirun -np 1 binds rank 0 there), so
# while one core runs slower than the others the weak-scaling efficiency is capped near
# slowest/fastest whatever the runtime does. On a VM (vCPUs are host threads) that ratio moves
# by tens of percent within minutes; this script says how often.
# Usage: [PAIRS=20] [MODEL=cnn] [STEPS=600] [OUT=dir] bench/run_core_drift.sh [BUILD_DIR]
# Prints one line per run, "drift pair=<k> core=<c> samples_per_s=<x>", one per pair,
# "drift pair=<k> slowest/fastest=<r>", then
#   # core_ratio slowest/fastest median: <r>       over the pairs
#   # core_ratio slowest/fastest min: <r>
#   # pairs below 0.90: <k> of <n>                 pairs in which a synchronous job could not
#                                                  reach 0.90 of the fastest core's pace
# Everything printed is also stored in $OUT/core_drift.txt (OUT: default bench/results).
set -euo pipefail
BUILD="${1:-build}"; PAIRS="${PAIRS:-20}"; MODEL="${MODEL:-cnn}"; STEPS="${STEPS:-600}"
RESULTS_DIR="${OUT:-$(dirname "$0")/results}"
for var in PAIRS STEPS; do
  [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || { echo "run_core_drift.sh: $var must be a positive integer, got '${!var}'" >&2; exit 2; }
done
BENCH=$(realpath "$BUILD/bench/scaling_bench" 2>/dev/null) ||
  { echo "missing $BUILD/bench/scaling_bench: cmake --build $BUILD --target scaling_bench" >&2; exit 1; }
mkdir -p "$RESULTS_DIR"
# shellcheck source=quiet.sh
source "$(dirname "$0")/quiet.sh"
CORES=$(nproc)
LOG=$(mktemp); WORK=$(mktemp -d)
trap 'rm -rf "$LOG" "$WORK"' EXIT

# probe CORE: samples/s of one pinned run (its runs/ directory kept out of the caller's).
probe() {
  local v
  v=$(cd "$WORK" && taskset -c "$1" "$BENCH" --model "$MODEL" --steps "$STEPS" --batch 32 --threads 1 |
    sed -nE 's/^scaling .* samples_per_s=([0-9.]+).*/\1/p')
  [ -n "$v" ] || { echo "run_core_drift.sh: no samples_per_s from the run on core $1" >&2; exit 1; }
  echo "$v"
}

{
echo "# core drift: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CORES cores, model=$MODEL steps=$STEPS pairs=$PAIRS"
echo "# $(date -u +%FT%TZ) git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for k in $(seq 1 "$PAIRS"); do
  speeds=()
  for c in $(seq 0 $((CORES - 1))); do
    speeds+=("$(probe "$c")")
    echo "drift pair=$k core=$c samples_per_s=${speeds[-1]}"
  done
  printf '%s\n' "${speeds[@]}" | awk -v k="$k" 'NR == 1 || $1 < lo { lo = $1 } NR == 1 || $1 > hi { hi = $1 }
    END { printf "drift pair=%d slowest/fastest=%.4f\n", k, lo / hi }'
done | tee "$LOG"
ratios=$(sed -nE 's/^drift pair=[0-9]+ slowest\/fastest=([0-9.]+)$/\1/p' "$LOG")
printf '# core_ratio slowest/fastest median: %.2f\n' "$(median <<<"$ratios")"
awk '{ if (NR == 1 || $1 < lo) lo = $1; if ($1 < 0.90) below++ }
  END { printf "# core_ratio slowest/fastest min: %.2f\n# pairs below 0.90: %d of %d\n", lo, below, NR }' <<<"$ratios"
} | tee "$RESULTS_DIR/core_drift.txt"
