#!/usr/bin/env bash
# Pipeline parallelism on this machine: bench/pipeline_bench under mpirun -np 2 (one thread
# per rank), first with sleep layers (timing of the executor and schedules, valid on a loaded
# machine), then with real compute (only meaningful on a quiet machine: the load average is
# recorded before and after). Usage: bench/run_pipeline.sh [BUILD_DIR] [STEPS] [WIDTH] [BATCH]
# Stores the output in $OUT/pipeline.txt (OUT: default a new folder bench/results/pipeline_<date>_<time>,
# never over committed raw outputs); ends with the summary
# lines of issue 4 (and issue 14: "# bubble zero-bubble/1F1B p=2 m=8", idle time of zero_bubble
# over 1F1B's, both from the schedule rows above).
# The machine's speed drifts between rows (shared cores), so the bench steps its rows in
# rounds (one step of every row per round, medians per row) and times a fixed reference
# kernel on every rank beside each step: "c/ref" and "idle/ref" (and the "normalised" summary
# lines) divide by it and do not move with the machine's speed. Extra pipeline_bench
# arguments: PIPELINE_BENCH_ARGS (e.g. "--only interleaved,zero_bubble --table-only").
set -euo pipefail
BUILD="${1:-build}"; STEPS="${2:-5}"; WIDTH="${3:-1536}"; BATCH="${4:-128}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
[ -x "$BUILD/bench/pipeline_bench" ] || { echo "missing $BUILD/bench/pipeline_bench: cmake --build $BUILD --target pipeline_bench" >&2; exit 1; }
OUT="${OUT:-$(dirname "$0")/results/pipeline_$(date +%Y-%m-%d_%H%M%S)}/pipeline.txt"
mkdir -p "$(dirname "$OUT")"
# shellcheck source=quiet.sh
source "$(dirname "$0")/quiet.sh"
QUIET_LOG=$(mktemp); wait_quiet "$QUIET_LOG"
# The host's placement of the two vCPUs ("near": ~0.1 us, "far": ~0.4-0.5 us cache-line round
# trip; bench/RESULTS.md): real-compute pipeline figures differ between the two, so every run
# records it before and after (allreduce_bench's probe; "n/a" when that is not built).
hostProbe() {
  local v=""
  [ -x "$BUILD/bench/allreduce_bench" ] &&
    v=$(mpirun -np 2 "$BUILD/bench/allreduce_bench" -b 4K -e 4K --impl mpi --repeats 1 2>/dev/null |
        sed -n 's/^# probe .*(start): //p')
  echo "# host probe (shm ping-pong round trip, us; near ~0.1, far ~0.45) $1: ${v:-n/a}"
}
{
  hostProbe before
  echo "# $(cat "$QUIET_LOG")"
  echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(getconf _NPROCESSORS_ONLN) cores"
  echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# command: mpirun -np 2 $BUILD/bench/pipeline_bench --steps $STEPS --width 64 --batch $BATCH --sleep-ms 2"
  mpirun -np 2 "$BUILD/bench/pipeline_bench" --steps "$STEPS" --width 64 --batch "$BATCH" --sleep-ms 2 ${PIPELINE_BENCH_ARGS:-}
  echo "# load between: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# command: mpirun -np 2 $BUILD/bench/pipeline_bench --steps $STEPS --width $WIDTH --batch $BATCH"
  mpirun -np 2 "$BUILD/bench/pipeline_bench" --steps "$STEPS" --width "$WIDTH" --batch "$BATCH" ${PIPELINE_BENCH_ARGS:-}
  hostProbe after
} | tee "$OUT"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
