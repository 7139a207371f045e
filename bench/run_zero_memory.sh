#!/usr/bin/env bash
# Sharded optimizer state (issue 16, item 3): peak RSS per rank of examples/transformer_lm
# trained data-parallel at 2 ranks, with and without "shard_optimizer_state", beside the
# saving predicted from the optimizer state each rank keeps (the example prints
# "rank <r>: optimizer_state_bytes=<n>"; the predicted saving of rank r is the unsharded
# bytes minus rank r's sharded bytes). Target: RSS drops by >= 80% of the predicted saving,
# and the loss after the same steps is equal within 1e-5 relative.
#
#   bench/run_zero_memory.sh [BUILD_DIR=build] [LAYERS=8] [D_MODEL=768] [STEPS=3]
#   STRATA_BENCH_OUT=/tmp/zm bench/run_zero_memory.sh build 1 64 2     # a smoke run elsewhere
#
# Memory does not depend on the machine's load (measure it on a busy machine if need be); the
# runs' times do, and are not reported. Raw output: bench/results/zero_memory/ (or
# $STRATA_BENCH_OUT), ending with "# <metric>: <value>" lines (also in summary.txt).
set -euo pipefail
BUILD="${1:-build}"; LAYERS="${2:-8}"; DMODEL="${3:-768}"; STEPS="${4:-3}"
HEADS=$(( DMODEL % 64 == 0 ? DMODEL / 64 : 1 ))  # 64-wide heads
HERE="$(cd "$(dirname "$0")" && pwd)"; ROOT="$(dirname "$HERE")"
EXAMPLE="$BUILD/examples/transformer_lm"
OUT="${STRATA_BENCH_OUT:-$HERE/results/zero_memory}"
source "$HERE/quiet.sh"
bench_start "$OUT" "$EXAMPLE" /usr/bin/time
export OMPI_MCA_rmaps_base_oversubscribe=1
rm -f "$OUT"/*.txt "$OUT"/*.rss.*

ARGS=(--layers "$LAYERS" --d-model "$DMODEL" --heads "$HEADS" --seq-len 64 --batch-size 8 --max-steps "$STEPS"
      --eval-batches 0 --seed 5)

# measure NAME SHARD: 2 ranks, each under /usr/bin/time; log in OUT/NAME.txt, rank r's peak
# RSS (KiB) in OUT/NAME.rss.r
measure() {
  local name=$1 shard=$2 cfg="$SCRATCH/$1.json"
  printf '{"output_dir": "%s/runs/%s", "dataparallel": {"shard_optimizer_state": %s}}\n' "$SCRATCH" "$name" "$shard" >"$cfg"
  {
    echo "# command: OMP_NUM_THREADS=1 mpirun -np 2 /usr/bin/time -f %M $EXAMPLE --config <{\"dataparallel\": {\"shard_optimizer_state\": $shard}}> ${ARGS[*]}"
    echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  } >"$OUT/$name.txt"
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -np 2 bash -c 'exec /usr/bin/time -f %M -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' "$OUT/$name" \
    "$EXAMPLE" --config "$cfg" "${ARGS[@]}" >>"$OUT/$name.txt" 2>&1
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/$name.txt"
}

rss_mib() { awk '{printf "%.1f", $1 / 1024}' "$OUT/$1.rss.$2"; }
state_mib() { sed -nE "s/.*rank $2: optimizer_state_bytes=([0-9]+).*/\1/p" "$OUT/$1.txt" | awk '{printf "%.1f", $1 / 1048576}'; }
# Rank r's resident set at the end of training (after the last step; the example reads VmRSS).
end_rss_mib() { sed -nE "s/.*rank $2: optimizer_state_bytes=.* rss_mib=([0-9.]+).*/\1/p" "$OUT/$1.txt"; }
ratio() { awk -v d="$1" -v p="$2" 'BEGIN { printf "%.3f", (p > 0 ? d / p : 0) }'; }
minimum() { awk -v r="$1" -v w="$2" 'BEGIN { print (w == "" || r < w) ? r : w }'; }
final_loss() { sed -nE 's/^final: .*loss=([-0-9.e+]+).*/\1/p' "$OUT/$1.txt"; }

machine_info "$EXAMPLE" "${ARGS[@]}" >"$OUT/machine.txt"
measure unsharded false
measure sharded true

{
  echo "# $(date -u +%FT%TZ) $(git -C "$ROOT" rev-parse --short HEAD) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(getconf _NPROCESSORS_ONLN) cores"
  echo "# model: ${ARGS[*]}"
  grep -m1 '^transformer_lm:' "$OUT/unsharded.txt" | sed 's/^/# /'
  printf "%-5s %14s %14s %14s %14s %14s %12s %12s %12s %12s %10s %10s\n" rank state_MiB shard_state_MiB predicted_MiB \
    peak_MiB shard_peak_MiB peak_drop end_MiB shard_end_MiB end_drop peak_ratio end_ratio
  worst=""; worst_end=""
  for r in 0 1; do
    a=$(rss_mib unsharded $r); b=$(rss_mib sharded $r); sa=$(state_mib unsharded $r); sb=$(state_mib sharded $r)
    ea=$(end_rss_mib unsharded $r); eb=$(end_rss_mib sharded $r)
    predicted=$(awk -v a="$sa" -v b="$sb" 'BEGIN { printf "%.1f", a - b }')
    drop=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a - b }')
    end_drop=$(awk -v a="$ea" -v b="$eb" 'BEGIN { printf "%.1f", a - b }')
    worst=$(minimum "$(ratio "$drop" "$predicted")" "$worst")
    worst_end=$(minimum "$(ratio "$end_drop" "$predicted")" "$worst_end")
    printf "%-5s %14s %14s %14s %14s %14s %12s %12s %12s %12s %10s %10s\n" "$r" "$sa" "$sb" "$predicted" "$a" "$b" "$drop" \
      "$ea" "$eb" "$end_drop" "$(ratio "$drop" "$predicted")" "$(ratio "$end_drop" "$predicted")"
  done
  echo "# peak: /usr/bin/time -f %M (VmHWM); end: VmRSS after the last step; predicted: unsharded - sharded optimizer state bytes"
  l0=$(final_loss unsharded); l1=$(final_loss sharded)
  echo "# loss after $STEPS steps: unsharded $l0, sharded $l1"
  echo "# worst_rank_peak_drop_over_predicted: $worst (target >= 0.80)"
  echo "# worst_rank_end_drop_over_predicted: $worst_end"
  echo "# loss_rel_diff: $(awk -v a="$l0" -v b="$l1" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.3g", d / a }') (target <= 1e-5)"
  echo "# params_sha256 equal: $([ "$(grep -o 'params_sha256=[0-9a-f]*' "$OUT/unsharded.txt")" = "$(grep -o 'params_sha256=[0-9a-f]*' "$OUT/sharded.txt")" ] && echo yes || echo no)"
} | tee "$OUT/summary.txt"
