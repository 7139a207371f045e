#!/usr/bin/env bash
# Weak scaling of data-parallel training: Strata (scaling_bench under mpirun) and PyTorch
# DDP with Gloo (Debian's python3-torch) on the same models, per-rank batch and threads.
# Usage: bench/run_scaling.sh [BUILD_DIR] [STEPS]. Ends with the summary lines of issues 3 and 16:
#   # efficiency <model> <n>      Strata: n-rank throughput / (n x 1-rank throughput, same threads per rank)
#   # efficiency ddp <model> <n>  the same for PyTorch DDP, measured in this run
#   # exposed_comm_fraction       see bench/scaling_bench.cpp (in [0, 1])
# Everything printed is also stored in $OUT/scaling.txt (OUT: default bench/results).
# The DDP baseline runs under /usr/bin/python3 (Debian's python3-torch; a python3 first on
# PATH, e.g. pyenv's, does not see it). A missing measurement stops the script (exit 1).
set -euo pipefail
BUILD="${1:-build}"; STEPS="${2:-30}"
RESULTS_DIR="${OUT:-$(dirname "$0")/results}"
mkdir -p "$RESULTS_DIR"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -x "$BUILD/bench/scaling_bench" ] || { echo "missing $BUILD/bench/scaling_bench: cmake --build $BUILD --target scaling_bench" >&2; exit 1; }
/usr/bin/python3 -c "import torch.distributed" ||
  { echo "/usr/bin/python3 cannot import torch.distributed: run scripts/install-deps (python3-torch)" >&2; exit 1; }
CORES=$(nproc)
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

field() {
  local v
  v=$(grep -E "^$1 model=$2 ranks=$3 " "$OUT" | tail -1 | sed -nE "s/.* $4=([0-9.]+).*/\1/p")
  [ -n "$v" ] || { echo "run_scaling.sh: no $4 for '$1 model=$2 ranks=$3' in the output above" >&2; exit 1; }
  echo "$v"
}

main() {
echo "# scaling_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CORES cores, steps=$STEPS, per-rank batch 32"
echo "# $(date -u +%FT%TZ) git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# 4 ranks on $CORES cores are oversubscribed: each rank then gets half a core"
for model in cnn mlp25m; do
  for n in 1 2 4; do
    threads=$(( CORES / n > 0 ? CORES / n : 1 ))
    mpirun -np "$n" "$BUILD/bench/scaling_bench" --model "$model" --steps "$STEPS" --batch 32 | tee -a "$OUT"
    /usr/bin/python3 "$(dirname "$0")/ddp_baseline.py" --model "$model" --ranks "$n" --steps "$STEPS" --batch 32 \
      --threads "$threads" | tee -a "$OUT"
  done
done
# Weak-scaling efficiency needs a 1-rank baseline with the threads each of the n ranks has
# (cores / n): a 1-rank run with all cores measures intra-op threading, not communication.
for model in cnn mlp25m; do
  for n in 2 4; do
    threads=$(( CORES / n > 0 ? CORES / n : 1 ))
    mpirun -np 1 "$BUILD/bench/scaling_bench" --model "$model" --steps "$STEPS" --batch 32 --threads "$threads" |
      sed "s/^scaling /baseline_t$threads /" | tee -a "$OUT"
    /usr/bin/python3 "$(dirname "$0")/ddp_baseline.py" --model "$model" --ranks 1 --steps "$STEPS" --batch 32 \
      --threads "$threads" | sed "s/^ddp /ddp_baseline_t$threads /" | tee -a "$OUT"
  done
done
for model in cnn mlp25m; do
  s1=$(field scaling "$model" 1 samples_per_s)
  for n in 2 4; do
    threads=$(( CORES / n > 0 ? CORES / n : 1 ))
    sb=$(field "baseline_t$threads" "$model" 1 samples_per_s)
    sn=$(field scaling "$model" "$n" samples_per_s)
    awk -v a="$sn" -v b="$sb" -v n="$n" -v m="$model" 'BEGIN { printf "# efficiency %s %d: %.2f\n", m, n, a / (n * b) }'
    awk -v a="$sn" -v b="$s1" -v n="$n" -v m="$model" 'BEGIN { printf "# efficiency_vs_1rank_all_cores %s %d: %.2f\n", m, n, a / (n * b) }'
    db=$(field "ddp_baseline_t$threads" "$model" 1 samples_per_s)
    dn=$(field ddp "$model" "$n" samples_per_s)
    awk -v a="$dn" -v b="$db" -v n="$n" -v m="$model" 'BEGIN { printf "# efficiency ddp %s %d: %.2f\n", m, n, a / (n * b) }'
  done
done
for model in cnn mlp25m; do
  for n in 2 4; do
    f=$(field scaling "$model" "$n" exposed_comm_fraction)
    awk -v f="$f" -v n="$n" -v m="$model" 'BEGIN { printf "# exposed_comm_fraction %s %d: %.2f\n", m, n, f }'
    s=$(field scaling "$model" "$n" samples_per_s); d=$(field ddp "$model" "$n" samples_per_s)
    awk -v s="$s" -v d="$d" -v n="$n" -v m="$model" 'BEGIN { printf "# ratio strata/ddp %s %d: %.2f\n", m, n, s / d }'
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main 2>&1 | tee "$RESULTS_DIR/scaling.txt"
