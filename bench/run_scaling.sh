#!/usr/bin/env bash
# Weak scaling of data-parallel training: Strata (scaling_bench under mpirun) and PyTorch
# DDP with Gloo (Debian's python3-torch) on the same models, per-rank batch and threads.
# Usage: [ROUNDS=3] [RANKS="2 4"] [OUT=dir] [CNN_STEPS=n] bench/run_scaling.sh [BUILD_DIR] [STEPS]
# STEPS: timed steps of mlp25m (an ~80 ms step here); the CNN (a ~3 ms step) runs CNN_STEPS,
# by default 20 x STEPS, so both measure about the same wall time. Measured: 15 CNN steps
# (45 ms) gave 1-rank and 2-rank throughputs whose ratio swung 0.74-1.16 across ten paired
# rounds, 300 steps 0.92-1.06 (bench/RESULTS.md, session 9).
# Ends with the summary lines of issues 3 and 16:
#   # efficiency <model> <n>      Strata: n-rank throughput / (n x 1-rank throughput, same threads per
#                                 rank), the 1-rank throughput measured on each core the n ranks run
#                                 on (mpirun puts rank i on core i) and averaged over those cores
#   # efficiency_core0_baseline <model> <n>  the same against 1-rank runs on core 0 only (where
#                                 mpirun -np 1 binds; this script's definition until session 17)
#   # baseline core_ratio <model>  the 1-rank baseline's slowest core over its fastest, this round
#   # efficiency host_shared <model> <n>  the same with dataparallel.shard_optimizer_state and
#                                 host_shared_parameters (one parameter copy per host; the
#                                 1-rank baseline is the same, where neither applies)
#   # efficiency sharded <model> <n>  the same with dataparallel.shard_optimizer_state alone
#                                 (whole tensors, parameters broadcast from their owners)
#   # efficiency ddp <model> <n>  the same for PyTorch DDP, measured in this run
#   # exposed_comm_fraction       see bench/scaling_bench.cpp (in [0, 1])
#   # efficiency independent <model> <n>  the machine's ceiling: n unconnected 1-rank runs at
#                                 once (no communication at all) over n x the 1-rank throughput
#   # efficiency/independent <model> <n>  Strata's n-rank throughput over theirs (1.00: the
#                                 communication costs nothing beyond what sharing the host does)
#   # efficiency sync_bound <model> <n>  the ceiling of any synchronous data parallelism on
#                                 these cores: the slowest of the n unconnected runs (every
#                                 step waits for the slowest rank) over the 1-rank throughput
#   # efficiency/sync_bound [host_shared] <model> <n>  Strata's n-rank throughput (default or
#                                 host-shared) over n x that slowest run
#   # efficiency lockstep_bound <model> <n>  tighter: every step (not only the whole run) waits
#                                 for the slowest rank. The unconnected runs' step i durations
#                                 paired by index, the mean of their maxima over the 1-rank
#                                 step (an estimate: it takes the two cores' hiccups as unrelated)
#   # efficiency/lockstep_bound [host_shared] <model> <n>  Strata over that pace: what is left
#                                 below 1.00 is the communication and what Strata adds to a step
#   # comm_cpu/step <model> <n>   CPU time in the AllReduces per step over the step time (the
#                                 communication thread's, and the training thread's for a last
#                                 bucket run in place): with a busy rank per core, what the
#                                 bucket reduced during backward takes from compute
# This VM's per-core speed drifts by tens of percent within minutes (bench/run_core_drift.sh
# measures how far its cores drift apart), so a baseline measured
# minutes after the n-rank run says more about the drift than about scaling. Every round runs
# each configuration once, back to back (1 rank, the 1-rank baselines on each core, n ranks,
# the 1-rank baselines again; Strata then DDP), an efficiency is taken within its round against
# the mean of the baselines before and after, and each summary line is the median over the
# rounds (the per-round values are printed as `round` lines).
# Strata applies its malloc policy (config memory.malloc, default "retain": freed memory stays in
# the process, docs/config.md); DDP runs with the same glibc setting through GLIBC_TUNABLES so the
# two are compared on equal allocators (DDP_MALLOC=system runs DDP with glibc's defaults).
# Everything printed is also stored in $OUT/scaling.txt (OUT: default a new folder
# bench/results/scaling_<date>_<time>, never over committed raw outputs).
# The DDP baseline runs under /usr/bin/python3 (Debian's python3-torch; a python3 first on
# PATH, e.g. pyenv's, does not see it). A missing measurement stops the script (exit 1).
set -euo pipefail
BUILD="${1:-build}"; STEPS="${2:-30}"; ROUNDS="${ROUNDS:-3}"; RANKS="${RANKS:-2 4}"
CNN_STEPS="${CNN_STEPS:-$((STEPS * 20))}"
RESULTS_DIR="${OUT:-$(dirname "$0")/results/scaling_$(date +%Y-%m-%d_%H%M%S)}"
mkdir -p "$RESULTS_DIR"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -x "$BUILD/bench/scaling_bench" ] || { echo "missing $BUILD/bench/scaling_bench: cmake --build $BUILD --target scaling_bench" >&2; exit 1; }
/usr/bin/python3 -c "import torch.distributed" ||
  { echo "/usr/bin/python3 cannot import torch.distributed: run scripts/install-deps (python3-torch)" >&2; exit 1; }
CORES=$(nproc)
DDP_MALLOC="${DDP_MALLOC:-retain}"
DDP_TUNABLES=""
# shellcheck source=quiet.sh
source "$(dirname "$0")/quiet.sh"
[ "$DDP_MALLOC" = retain ] && DDP_TUNABLES="$RETAIN_GLIBC_TUNABLES"
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

stepsFor() { if [ "$1" = cnn ]; then echo "$CNN_STEPS"; else echo "$STEPS"; fi; }

threadsFor() { local n=$1; echo $(( CORES / n > 0 ? CORES / n : 1 )); }

# The cores an n-rank job runs on: mpirun maps rank i to core i (ranks beyond the cores share
# them). A 1-rank baseline on core 0 alone measures that core, and this VM's cores drift
# apart by up to 20 % for minutes, either one the slower (bench/run_core_drift.sh), so each
# baseline is measured on every one of these cores and averaged: "n x the 1-rank throughput"
# of n unequal cores is the sum of their 1-rank throughputs.
coresOf() { seq 0 $(( ($1 < CORES ? $1 : CORES) - 1 )); }
MAX_RANKS=$(printf '%s\n' $RANKS | sort -n | tail -1)

# baseline RUNNER KIND ROUND THREADS MODEL: a 1-rank baseline (RUNNER strata or ddp) pinned to
# each core in turn.
baseline() {
  local c
  for c in $(coresOf "$MAX_RANKS"); do
    pinCore=$c; "$1" "$2_c$c" "$3" 1 "$4" "$5"; pinCore=""
  done
}
# coreBaseline KIND MODEL ROUND CORE: KIND's throughput on CORE, the runs before and after averaged.
coreBaseline() {
  mean "$(field "$1_c$4" "$2" 1 samples_per_s "$3")" "$(field "${1/baseline_/baseline_after_}_c$4" "$2" 1 samples_per_s "$3")"
}
# baselineMean KIND MODEL ROUND N: KIND's mean throughput over the cores of an N-rank job.
baselineMean() {
  local c
  for c in $(coresOf "$4"); do coreBaseline "$1" "$2" "$3" "$c"; done | awk '{ s += $1; k++ } END { print s / k }'
}
# coreRatio KIND MODEL ROUND: the slowest core's baseline over the fastest's.
coreRatio() {
  local c
  for c in $(coresOf "$MAX_RANKS"); do coreBaseline "$1" "$2" "$3" "$c"; done |
    awk 'NR == 1 || $1 < lo { lo = $1 } NR == 1 || $1 > hi { hi = $1 } END { print lo / hi }'
}

# field KIND MODEL RANKS KEY ROUND: the value of KEY in that round's line.
field() {
  local v
  v=$(grep -E "^$1 round=$5 model=$2 ranks=$3 " "$OUT" | tail -1 | sed -nE "s/.* $4=([0-9.]+).*/\1/p")
  [ -n "$v" ] || { echo "run_scaling.sh: no $4 for '$1 model=$2 ranks=$3' in round $5 (output above)" >&2; exit 1; }
  echo "$v"
}

# strata KIND ROUND N THREADS MODEL [ARGS] / ddp KIND ROUND N THREADS MODEL: one run, tagged.
# With pinCore set, the (1-rank) run is pinned to that core instead of mpirun's choice.
pinCore=""
strata() {
  local threadArg=() bind=()
  [ "$4" -gt 0 ] && threadArg=(--threads "$4")
  # One rank with every core: mpirun -np 1 binds its rank to one core (Strata then runs one
  # thread), so that run is unbound.
  [ "$3" = 1 ] && [ "$4" = 0 ] && bind=(--bind-to none)
  [ -n "$pinCore" ] && bind=(--bind-to none taskset -c "$pinCore")
  mpirun -np "$3" "${bind[@]}" "$BUILD/bench/scaling_bench" --model "$5" --steps "$(stepsFor "$5")" --batch 32 "${threadArg[@]}" "${@:6}" |
    sed "s/^scaling /$1 round=$2 /" | tee -a "$OUT"
}
ddp() {
  local pin=()
  [ -n "$pinCore" ] && pin=(taskset -c "$pinCore")
  GLIBC_TUNABLES="$DDP_TUNABLES" "${pin[@]}" /usr/bin/python3 "$(dirname "$0")/ddp_baseline.py" --model "$5" --ranks "$3" --steps "$(stepsFor "$5")" --batch 32 \
    --threads "$4" | sed "s/^ddp /$1 round=$2 /" | tee -a "$OUT"
}

# independent KIND ROUND N THREADS MODEL: N separate 1-rank runs at the same time (no
# mpirun, nothing shared but the host); one line with their summed throughput. Each run is
# pinned to a core as mpirun pins its ranks when they do not outnumber the cores.
independent() {
  local outs=() dirs=() i sum pin bench sumValue runs slowest
  bench=$(realpath "$BUILD/bench/scaling_bench")
  for i in $(seq 1 "$3"); do
    outs+=("$(mktemp)")
    pin=()
    [ "$3" -le "$CORES" ] && pin=(taskset -c $((i - 1)))
    # Each run in its own directory: two jobs of one rank each would share runs/ otherwise.
    dirs+=("$(mktemp -d)")
    (cd "${dirs[-1]}" && "${pin[@]}" "$bench" --model "$5" --steps "$(stepsFor "$5")" --batch 32 --threads "$4" \
      --step-times steps.txt) >"${outs[-1]}" 2>&1 &
  done
  wait
  # Lockstep: step i of a synchronous job ends when its slowest rank's step i does. Pairing the
  # unconnected runs' steps by index gives the pace lockstep alone would set on these cores.
  lockstep=$(paste "${dirs[@]/%//steps.txt}" | awk -v batch=32 -v n="$3" \
    'NF == n { m = $1; for (i = 2; i <= NF; i++) if ($i > m) m = $i; s += m; k++ } END { if (k) print batch * k / s }')
  rm -rf "${dirs[@]}"
  cat "${outs[@]}" | sed "s/^scaling /independent_run round=$2 /" >&2
  # "sum count slowest": a synchronous job of n ranks runs at its slowest core's pace.
  sum=$(cat "${outs[@]}" | sed -nE 's/^scaling .* samples_per_s=([0-9.]+).*/\1/p' |
    awk '{ s += $1; n++; if (n == 1 || $1 < m) m = $1 } END { if (n) print s, n, m }')
  rm -f "${outs[@]}"
  read -r sumValue runs slowest <<<"$sum"
  [ "${runs:-0}" = "$3" ] || { echo "run_scaling.sh: $3 independent runs of $5 printed ${runs:-0} results" >&2; exit 1; }
  [ -n "$lockstep" ] || { echo "run_scaling.sh: no step times from the independent runs of $5" >&2; exit 1; }
  echo "$1 round=$2 model=$5 ranks=$3 threads=$4 samples_per_s=$sumValue slowest_samples_per_s=$slowest lockstep_samples_per_s=$lockstep" | tee -a "$OUT"
}

# summary NAME: the median of the per-round values printed as "round <r> NAME: <v>".
summary() {
  local name=$1 v
  v=$(grep -F "] $name: " "$OUT" | sed -E 's/.*: //' | median)
  printf '# %s: %.2f\n' "$name" "$v"
}
roundLine() { printf '[round %s] %s: %.4f\n' "$1" "$2" "$3" | tee -a "$OUT"; }
mean() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + b) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" -v n="${3:-1}" 'BEGIN { print a / (n * b) }'; }

main() {
echo "# scaling_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CORES cores, steps=$STEPS (cnn $CNN_STEPS), per-rank batch 32, rounds=$ROUNDS, ranks: $RANKS, malloc strata=${STRATA_MALLOC:-retain} ddp=$DDP_MALLOC"
echo "# $(date -u +%FT%TZ) git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# more ranks than $CORES cores are oversubscribed: each rank then gets a share of a core"
for r in $(seq 1 "$ROUNDS"); do
  for model in cnn mlp25m; do
    strata scaling "$r" 1 0 "$model"
    ddp ddp "$r" 1 "$CORES" "$model"
    # Weak-scaling efficiency needs a 1-rank baseline with the threads each of the n ranks
    # has (cores / n): a 1-rank run with all cores measures intra-op threading.
    for n in $RANKS; do
      t=$(threadsFor "$n")
      if [ "$t" != "$CORES" ] && ! grep -qE "^baseline_t${t}_c0 round=$r model=$model " "$OUT"; then
        baseline strata "baseline_t$t" "$r" "$t" "$model"
        baseline ddp "ddp_baseline_t$t" "$r" "$t" "$model"
      fi
      independent independent "$r" "$n" "$t" "$model"
      strata scaling "$r" "$n" 0 "$model"
      # The same with the optimizer state sharded over one host-shared copy of the parameters.
      strata scaling_host "$r" "$n" 0 "$model" --sharding host
      # And sharded by whole tensors alone (shard_optimizer_state; the parameters broadcast
      # from their owners after each step): what that memory saving costs in speed.
      strata scaling_sharded "$r" "$n" 0 "$model" --sharding tensors
      ddp ddp "$r" "$n" "$t" "$model"
    done
    # The same 1-rank baselines again: each efficiency divides by the mean of the runs before
    # and after its n-rank runs, so a drift of the cores' speed during the round cancels to
    # first order (one baseline alone moved 331 -> 396 samples/s between rounds, session 10).
    for t in $(for n in $RANKS; do threadsFor "$n"; done | sort -u); do
      [ "$t" = "$CORES" ] && continue
      baseline strata "baseline_after_t$t" "$r" "$t" "$model"
      baseline ddp "ddp_baseline_after_t$t" "$r" "$t" "$model"
    done
  done
  for model in cnn mlp25m; do
    s1=$(field scaling "$model" 1 samples_per_s "$r"); d1=$(field ddp "$model" 1 samples_per_s "$r")
    for n in $RANKS; do
      t=$(threadsFor "$n"); sb=$s1; sb0=$s1; db=$d1
      if [ "$t" != "$CORES" ]; then
        sb=$(baselineMean "baseline_t$t" "$model" "$r" "$n")
        sb0=$(baselineMean "baseline_t$t" "$model" "$r" 1)
        roundLine "$r" "baseline core_ratio $model" "$(coreRatio "baseline_t$t" "$model" "$r")"
        db=$(baselineMean "ddp_baseline_t$t" "$model" "$r" "$n")
      fi
      sn=$(field scaling "$model" "$n" samples_per_s "$r"); dn=$(field ddp "$model" "$n" samples_per_s "$r")
      ind=$(field independent "$model" "$n" samples_per_s "$r")
      roundLine "$r" "efficiency $model $n" "$(ratio "$sn" "$sb" "$n")"
      roundLine "$r" "efficiency_core0_baseline $model $n" "$(ratio "$sn" "$sb0" "$n")"
      roundLine "$r" "efficiency host_shared $model $n" "$(ratio "$(field scaling_host "$model" "$n" samples_per_s "$r")" "$sb" "$n")"
      roundLine "$r" "efficiency sharded $model $n" "$(ratio "$(field scaling_sharded "$model" "$n" samples_per_s "$r")" "$sb" "$n")"
      roundLine "$r" "efficiency_vs_1rank_all_cores $model $n" "$(ratio "$sn" "$s1" "$n")"
      roundLine "$r" "efficiency ddp $model $n" "$(ratio "$dn" "$db" "$n")"
      roundLine "$r" "efficiency independent $model $n" "$(ratio "$ind" "$sb" "$n")"
      roundLine "$r" "efficiency/independent $model $n" "$(ratio "$sn" "$ind")"
      slow=$(field independent "$model" "$n" slowest_samples_per_s "$r")
      roundLine "$r" "efficiency sync_bound $model $n" "$(ratio "$slow" "$sb")"
      roundLine "$r" "efficiency/sync_bound $model $n" "$(ratio "$sn" "$slow" "$n")"
      roundLine "$r" "efficiency/sync_bound host_shared $model $n" \
        "$(ratio "$(field scaling_host "$model" "$n" samples_per_s "$r")" "$slow" "$n")"
      lock=$(field independent "$model" "$n" lockstep_samples_per_s "$r")
      roundLine "$r" "efficiency lockstep_bound $model $n" "$(ratio "$lock" "$sb")"
      roundLine "$r" "efficiency/lockstep_bound $model $n" "$(ratio "$sn" "$lock" "$n")"
      roundLine "$r" "efficiency/lockstep_bound host_shared $model $n" \
        "$(ratio "$(field scaling_host "$model" "$n" samples_per_s "$r")" "$lock" "$n")"
      roundLine "$r" "exposed_comm_fraction $model $n" "$(field scaling "$model" "$n" exposed_comm_fraction "$r")"
      roundLine "$r" "comm_cpu/step $model $n" "$(ratio "$(field scaling "$model" "$n" comm_cpu_ms "$r")" \
        "$(field scaling "$model" "$n" step_ms "$r")")"
      roundLine "$r" "ratio strata/ddp $model $n" "$(ratio "$sn" "$dn")"
    done
  done
done
echo "# medians over $ROUNDS rounds:"
for model in cnn mlp25m; do
  for n in $RANKS; do
    for name in "efficiency $model $n" "efficiency_core0_baseline $model $n" "efficiency host_shared $model $n" "efficiency sharded $model $n" \
      "efficiency_vs_1rank_all_cores $model $n" "efficiency ddp $model $n" \
      "efficiency independent $model $n" "efficiency/independent $model $n" \
      "efficiency sync_bound $model $n" "efficiency/sync_bound $model $n" "efficiency/sync_bound host_shared $model $n" \
      "efficiency lockstep_bound $model $n" "efficiency/lockstep_bound $model $n" \
      "efficiency/lockstep_bound host_shared $model $n"; do
      summary "$name"
    done
  done
done
for model in cnn mlp25m; do
  grep -qF "] baseline core_ratio $model: " "$OUT" && summary "baseline core_ratio $model"
  for n in $RANKS; do
    summary "exposed_comm_fraction $model $n"
    summary "comm_cpu/step $model $n"
    summary "ratio strata/ddp $model $n"
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main 2>&1 | tee "$RESULTS_DIR/scaling.txt"
