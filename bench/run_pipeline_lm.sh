#!/usr/bin/env bash
# The pipeline on the transformer_lm example (issue 14: "also run the pipeline on
# examples/transformer_lm and report its bubble measured/predicted"): 2 stages, 8
# microbatches, the interleaved (1F1B) schedule, optimize: speed, a reduced GPT (--layers,
# --d-model below) so a run takes a few minutes on a 2-core machine. The example's
# --pipeline-stats prints the measured bubble (idle / (ranks x step) from the executor's
# per-step compute and step times, as bench/pipeline_bench.cpp measures it) and the plan's
# prediction (the simulator on the measured layer costs), medians over the steps after the
# first. Every rank runs one intra-op thread.
#
#   bench/run_pipeline_lm.sh [BUILD_DIR] [LAYERS] [D_MODEL] [STEPS]
#
# Raw output: bench/results/pipeline_lm/ (or $STRATA_BENCH_OUT). Ends with "# <metric>: <value>" lines.
set -euo pipefail
BUILD="${1:-build}"; LAYERS="${2:-4}"; DMODEL="${3:-256}"; STEPS="${4:-24}"
HERE="$(cd "$(dirname "$0")" && pwd)"
EXAMPLE="$BUILD/examples/transformer_lm"
OUT="${STRATA_BENCH_OUT:-$HERE/results/pipeline_lm}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export STRATA_LOG_LEVEL=INFO STRATA_LOG_RANKS=0
[ -x "$EXAMPLE" ] || { echo "missing $EXAMPLE (build first)"; exit 2; }
mkdir -p "$OUT"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

P=2; M=8
cfg="$work/p$P.json"
printf '{"output_dir": "%s/runs", "modelparallel": {"enabled": true, "partitions": %s, "microbatches": %s, "pipeline": "interleaved", "optimize": "speed"}}\n' \
  "$work" "$P" "$M" >"$cfg"
ARGS=(--layers "$LAYERS" --d-model "$DMODEL" --heads 8 --seq-len 64 --batch-size 32 --max-steps "$STEPS"
      --eval-batches 0 --seed 3 --pipeline-stats)
log="$OUT/interleaved_p${P}_m${M}.txt"
{
  echo "# command: mpirun -np $P $EXAMPLE --config <$(cat "$cfg")> ${ARGS[*]}"
  echo "# date: $(date -u +%FT%TZ)  commit: $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# load before: $(cat /proc/loadavg)"
} >"$log"
start=$(date +%s)
mpirun -np "$P" "$EXAMPLE" --config "$cfg" "${ARGS[@]}" >>"$log" 2>&1
echo "# load after: $(cat /proc/loadavg)  wall: $(( $(date +%s) - start )) s" >>"$log"

line=$(grep -E '^pipeline: steps=' "$log" | tail -1)
[ -n "$line" ] || { echo "no 'pipeline:' line in $log"; exit 1; }
field() { sed -nE "s/.* $1=([-0-9.e+]+).*/\1/p" <<<"$line"; }
measured=$(field bubble_measured); predicted=$(field bubble_predicted)
step=$(field step_ms); pstep=$(field predicted_step_ms)
{
  echo "# transformer_lm layers=$LAYERS d_model=$DMODEL steps=$STEPS: bubble measured $measured predicted $predicted, step $step ms predicted $pstep ms"
  awk -v m="$measured" -v p="$predicted" \
    'BEGIN { printf "# bubble measured/predicted transformer_lm interleaved p=2 m=8: %s\n", (p > 0) ? sprintf("%.2f", m / p) : "n/a" }'
  awk -v m="$step" -v p="$pstep" \
    'BEGIN { printf "# step measured/predicted transformer_lm interleaved p=2 m=8: %s\n", (p > 0) ? sprintf("%.2f", m / p) : "n/a" }'
} | tee "$OUT/summary.txt"
