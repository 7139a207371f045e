#!/usr/bin/env bash
# Two builds of scaling_bench side by side, in alternating pairs: a code change measured
# against the commit before it on this VM, whose per-core speed drifts by tens of percent
# within minutes (bench/RESULTS.md): each pair runs every kind with both builds back to back,
# the build that goes first alternating between pairs, so a drift hits both about equally.
# Usage: [PAIRS=6] [MODEL=mlp25m] [STEPS=30] [KINDS="1rank 2rank_host 2rank_default"]
#        bench/run_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR OUT_FILE
# (a build dir as scripts/build makes it, e.g. a `git worktree` of the old commit built with
# STRATA_BUILD_DIR). Kinds, per-rank batch 32 and one thread per rank as run_scaling.sh:
#   1rank           mpirun -np 1 scaling_bench --model M --steps S --threads 1
#   2rank_host      mpirun -np 2 ... --sharding host   (shard_optimizer_state + host_shared_parameters)
#   2rank_default   mpirun -np 2 ...                   (the bucket AllReduce)
# Every line of OUT_FILE is "pair=<p> build=<old|new> <kind> <scaling_bench's fields>"; the
# summary (ab_summary.py: medians per build and kind, each 2-rank kind's efficiency against
# the same build's 1-rank median, new/old) is printed at the end and appended to OUT_FILE.
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
OLD="$1"; NEW="$2"; FILE="$3"
PAIRS="${PAIRS:-6}"; MODEL="${MODEL:-mlp25m}"; STEPS="${STEPS:-30}"
KINDS="${KINDS:-1rank 2rank_host 2rank_default}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=quiet.sh
source "$HERE/quiet.sh"
bench_start "$(dirname "$FILE")" "$OLD/bench/scaling_bench" "$NEW/bench/scaling_bench"
{
  echo "# run_ab.sh $(date -u +%FT%TZ) pairs=$PAIRS model=$MODEL steps=$STEPS kinds=$KINDS"
  echo "# old: $(realpath "$OLD")  new: $(realpath "$NEW")  (git $(git -C "$ROOT" rev-parse --short HEAD))"
} | tee -a "$FILE"

run() {  # run BUILD_NAME BUILD_DIR KIND PAIR
  local args=(--model "$MODEL" --steps "$STEPS" --batch 32 --threads 1) np=1
  case "$3" in
    1rank) ;;
    2rank_host) np=2; args+=(--sharding host) ;;
    2rank_default) np=2 ;;
    *) echo "run_ab.sh: unknown kind $3" >&2; exit 2 ;;
  esac
  wait_quiet "$SCRATCH/quiet.log"
  local line
  line=$(cd "$SCRATCH" && mpirun -np "$np" "$2/bench/scaling_bench" "${args[@]}" | grep '^scaling ' | tail -1)
  [ -n "$line" ] || { echo "run_ab.sh: no result from $1 $3 (pair $4)" >&2; exit 1; }
  echo "pair=$4 build=$1 $3 ${line#scaling }" | tee -a "$FILE"
}

OLD_ABS=$(realpath "$OLD"); NEW_ABS=$(realpath "$NEW")
for p in $(seq 1 "$PAIRS"); do
  for kind in $KINDS; do
    if (( p % 2 )); then
      run old "$OLD_ABS" "$kind" "$p"; run new "$NEW_ABS" "$kind" "$p"
    else
      run new "$NEW_ABS" "$kind" "$p"; run old "$OLD_ABS" "$kind" "$p"
    fi
  done
done
/usr/bin/python3 "$HERE/ab_summary.py" "$FILE" | tee -a "$FILE"
