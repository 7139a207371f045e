#!/usr/bin/env bash
# Memory of model parallelism (issue 13): the transformer_lm example at >= 2 GB of parameters,
# gradients and AdamW state (d_model 1024, 10 blocks: 126 M parameters x 16 bytes) trained for
# 3 steps in one process and at p = 2 and p = 4 (one pipeline, 4 microbatches, optimize:
# memory, active_microbatches = p: classic 1F1B, stage s stashes at most p - s microbatches;
# the default cap p + 2 stashes more to hide link latency, docs/pipeline.md). Per rank: peak
# RSS (/usr/bin/time -f %M), the fixed footprint (the same binary and layout with a tiny
# model), and the bytes the plan predicted (the plan the library logs).
#
#   bench/run_pipeline_memory.sh [BUILD_DIR] [LAYERS] [D_MODEL]
#   STRATA_BENCH_OUT=/tmp/pm bench/run_pipeline_memory.sh build 2 64    # a smoke run elsewhere
#
# Memory numbers do not depend on the machine's load; the step times printed beside them do.
# Raw output: bench/results/pipeline_memory/ (or $STRATA_BENCH_OUT). Ends with "# <metric>: <value>" lines.
set -euo pipefail
BUILD="${1:-build}"; LAYERS="${2:-10}"; DMODEL="${3:-1024}"
HERE="$(cd "$(dirname "$0")" && pwd)"
EXAMPLE="$BUILD/examples/transformer_lm"
OUT="${STRATA_BENCH_OUT:-$HERE/results/pipeline_memory}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export STRATA_LOG_LEVEL=INFO STRATA_LOG_RANKS=0
[ -x "$EXAMPLE" ] || { echo "missing $EXAMPLE (build first)"; exit 2; }
[ -x /usr/bin/time ] || { echo "missing /usr/bin/time (apt-get install time)"; exit 2; }
rm -rf "$OUT"; mkdir -p "$OUT"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

BIG=(--layers "$LAYERS" --d-model "$DMODEL" --heads 16 --seq-len 64 --batch-size 8 --max-steps 3 --eval-batches 0
     --seed 5)
TINY=(--layers 1 --d-model 32 --heads 2 --seq-len 64 --batch-size 8 --max-steps 3 --eval-batches 0 --seed 5)

config() {  # config P -> a job config file for p pipeline stages
  local p="$1" f="$work/p$1.json"
  printf '{"output_dir": "%s/runs/p%s", "modelparallel": {"enabled": true, "partitions": %s, "microbatches": 4, "pipeline": "interleaved", "active_microbatches": %s, "optimize": "memory"}}\n' \
    "$work" "$p" "$p" "$p" >"$f"
  echo "$f"
}

# measure NAME P ARGS...: runs the example on P ranks, each under /usr/bin/time; the log in
# $OUT/NAME.txt, rank r's peak RSS (KiB) in $OUT/NAME.rss.r
measure() {
  local name="$1" p="$2"; shift 2
  local cfg; cfg=$(config "$p")
  echo "# command: mpirun -np $p /usr/bin/time -f %M $EXAMPLE --config p$p.json $*" >"$OUT/$name.txt"
  echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/$name.txt"
  mpirun -np "$p" bash -c 'exec /usr/bin/time -f %M -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' "$OUT/$name" \
    "$EXAMPLE" --config "$cfg" "$@" >>"$OUT/$name.txt" 2>&1
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/$name.txt"
}

rss_mb() { awk '{printf "%.1f", $1 / 1024}' "$OUT/$1.rss.$2"; }
final_loss() { sed -nE 's/^final: .*loss=([-0-9.e+]+).*/\1/p' "$OUT/$1.txt"; }
# Rank r's row of the table the library logs on rank 0 after step 1
#   pipeline memory after step 1 (parameters + gradients + optimizer state at 2 x gradients):
#   rank  predicted   holds       parameters  gradients   optimizer
#   0     1.21 GiB    1.21 GiB    ...
# as "<predicted MiB> <holds MiB>" ("- -" when there is no table).
memory_row() {
  awk -v r="$2" '
    function mib(v, u) { return v * (u == "B" ? 1 / 1048576 : u == "KiB" ? 1 / 1024 : u == "MiB" ? 1 : u == "GiB" ? 1024 : 1048576) }
    /pipeline memory after step 1/ { table = 1; next }
    table && $1 == r && $2 ~ /^[0-9.]+$/ { printf "%.1f %.1f\n", mib($2, $3), mib($4, $5); found = 1; exit }
    END { if (!found) print "- -" }' "$OUT/$1.txt"
}
predicted_mb() { memory_row "$1" "$2" | cut -d' ' -f1; }
holds_mb() { memory_row "$1" "$2" | cut -d' ' -f2; }
# Mean seconds per step from rank 0's last progress line (its rate: samples since the start
# over seconds since the start). Under mpirun's pty the bar redraws with carriage returns
# ("train [###...] 3/3      36 samples/s ..."); without one it prints "train step 3/3 36 samples/s".
step_seconds() {
  tr '\r' '\n' <"$OUT/$1.txt" | sed -nE 's/^train (step|\[[#.]*\]) 3\/3 +([0-9.]+) samples\/s.*/\2/p' | tail -1 |
    awk '{ if ($1 > 0) printf "%.1f", 8 / $1 }'
}

for p in 1 2 4; do
  measure "tiny_p$p" "$p" "${TINY[@]}"
  measure "big_p$p" "$p" "${BIG[@]}"
done

{
  echo "# $(date -u +%FT%TZ) $(git -C "$HERE" rev-parse --short HEAD) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(getconf _NPROCESSORS_ONLN) cores"
  echo "# model: ${BIG[*]}"
  grep -m1 '^transformer_lm:' "$OUT/big_p1.txt" | sed 's/^/# /'
  single=$(awk -v a="$(rss_mb big_p1 0)" -v b="$(rss_mb tiny_p1 0)" 'BEGIN { printf "%.1f", a - b }')
  printf "%-6s %-5s %12s %12s %14s %14s %10s %10s %12s\n" layout rank peak_MiB fixed_MiB above_fixed_MiB predicted_MiB holds_MiB ratio step_s
  worst2=0; worst4=0
  for p in 1 2 4; do
    for ((r = 0; r < p; r++)); do
      above=$(awk -v a="$(rss_mb "big_p$p" "$r")" -v b="$(rss_mb "tiny_p$p" "$r")" 'BEGIN { printf "%.1f", a - b }')
      ratio=$(awk -v a="$above" -v s="$single" 'BEGIN { printf "%.3f", a / s }')
      [ "$p" = 2 ] && worst2=$(awk -v a="$ratio" -v w="$worst2" 'BEGIN { print (a > w ? a : w) }')
      [ "$p" = 4 ] && worst4=$(awk -v a="$ratio" -v w="$worst4" 'BEGIN { print (a > w ? a : w) }')
      printf "%-6s %-5s %12s %12s %14s %14s %10s %10s %12s\n" "p=$p" "$r" "$(rss_mb "big_p$p" "$r")" \
        "$(rss_mb "tiny_p$p" "$r")" "$above" "$(predicted_mb "big_p$p" "$r")" "$(holds_mb "big_p$p" "$r")" "$ratio" \
        "$(step_seconds "big_p$p")"
    done
  done
  l1=$(final_loss big_p1); l4=$(final_loss big_p4); l2=$(final_loss big_p2)
  echo "# loss after 3 steps: one process $l1, p=2 $l2, p=4 $l4"
  echo "# step_s: mean seconds per step over the 3 steps (rank 0's progress line), load-sensitive"
  echo "# single_process_above_fixed_mib: $single"
  echo "# p2_worst_rank_ratio: $worst2"
  echo "# p4_worst_rank_ratio: $worst4 (target <= 0.35, ideal 0.25)"
  echo "# p4_loss_rel_diff: $(awk -v a="$l1" -v b="$l4" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.3g", d / a }') (target <= 1e-3)"
} | tee "$OUT/summary.txt"
