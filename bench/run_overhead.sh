#!/usr/bin/env bash
# Debugger and profiler overhead on the Fashion-MNIST training loop, 2 ranks
# (bench/overhead_bench.cpp). Five cases, run REPEATS times each, interleaved in rotating
# order so the machine's noise hits every case alike:
#   off           no debugger collections, profiler disabled (the baseline)
#   dbg_default   weights, gradients, losses at smdebug's default save_interval (500)
#   dbg_all       weights, biases, gradients saved at every step
#   prof_default  profiler at SageMaker's defaults: system metrics every 500 ms, step timer,
#                 no framework timeline
#   prof_every    framework timeline for every step (per-layer forward/backward, AllReduce,
#                 data loading)
# Prints a table (per run the median step time; overhead = the median over rounds of the
# case/baseline ratio of the same round; spread = min..max over rounds; the same by mean step
# times) and the summary lines
#   # overhead debugger default: X%      # overhead debugger all-every-step: X%
#   # debugger all-every-step MB/s: X   # overhead profiler default: X%
#   # overhead profiler every-step: X%
#
#   bench/run_overhead.sh [BUILD_DIR=build] [REPEATS=4] [STEPS=300]
set -euo pipefail
BUILD=${1:-build}; REPEATS=${2:-4}; STEPS=${3:-300}; WARMUP=${WARMUP:-30}
BIN="$BUILD/bench/overhead_bench"
[ -x "$BIN" ] || { echo "build it first: cmake --build $BUILD --target overhead_bench" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d "${TMPDIR:-/tmp}/strata_overhead_XXXXXX")
trap 'rm -rf "$work"' EXIT
cases=(off dbg_default dbg_all prof_default prof_every)
config() {  # case output_dir
  local off='"profiler": {"disable_profiler": true}'
  case "$1" in
    off) echo "{\"output_dir\": \"$2\", $off}" ;;
    dbg_default) echo "{\"output_dir\": \"$2\", $off, \"debugger\": {\"collections\": [
        {\"name\": \"weights\"}, {\"name\": \"gradients\"}, {\"name\": \"losses\"}]}}" ;;
    dbg_all) echo "{\"output_dir\": \"$2\", $off, \"debugger\": {\"collections\": [
        {\"name\": \"weights\", \"save_interval\": 1}, {\"name\": \"biases\", \"save_interval\": 1},
        {\"name\": \"gradients\", \"save_interval\": 1}]}}" ;;
    prof_default) echo "{\"output_dir\": \"$2\"}" ;;
    prof_every) echo "{\"output_dir\": \"$2\", \"profiler\": {\"framework_profile\":
        {\"start_step\": 0, \"num_steps\": 1000000}}}" ;;
  esac
}
results="${RESULTS:-$work/results.txt}"   # RESULTS=file keeps the raw rows
echo "# machine: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg) at start; steps $STEPS warmup $WARMUP" >&2
for ((r = 0; r < REPEATS; r++)); do
  for ((k = 0; k < ${#cases[@]}; k++)); do
    c=${cases[$(((k + r) % ${#cases[@]}))]}
    dir="$work/$c-$r"
    config "$c" "$dir/run" >"$work/$c.json"
    out=$(mpirun -n 2 "$BIN" --config "$work/$c.json" --steps "$STEPS" --warmup "$WARMUP" 2>"$work/$c-$r.err") ||
      { cat "$work/$c-$r.err" >&2; exit 1; }
    mean=$(sed -n 's/^# step_ms_mean: //p' <<<"$out"); median=$(sed -n 's/^# step_ms_median: //p' <<<"$out")
    mbps=$(sed -n 's/^# debugger_mb_per_s: //p' <<<"$out"); cpu=$(sed -n 's/^# cpu_ms_per_step: //p' <<<"$out")
    echo "$c $r $mean $median $mbps $cpu $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$results" >&2
    rm -rf "$dir"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
by = {}
for c, r, mean, median, mbps, cpu, load in rows:
    by.setdefault(c, {})[int(r)] = (float(mean), float(median), float(mbps), float(cpu))
base = by["off"]
# Per run: the median step time (robust to the load spikes of a shared machine) and the
# mean (what a user's wall clock sees). Overhead: the median over rounds of each round's
# case/baseline ratio (interleaved runs share the round's machine state); spread: min..max.
print(f"{'case':13} {'step ms median':>15} {'runs min..max':>15} {'overhead':>9} {'rounds min..max':>18} {'by means':>9}"
      f" {'cpu ms/step':>12} {'cpu overhead':>13} {'rounds min..max':>18}")
cpu_summary = {}
summary = {}
for c in ["off", "dbg_default", "dbg_all", "prof_default", "prof_every"]:
    rounds = sorted(r for r in by[c] if r in base)
    med = [by[c][r][1] for r in rounds]
    paired = [(by[c][r][1] / base[r][1] - 1) * 100 for r in rounds]
    paired_mean = [(by[c][r][0] / base[r][0] - 1) * 100 for r in rounds]
    paired_cpu = [(by[c][r][3] / base[r][3] - 1) * 100 for r in rounds]
    summary[c] = statistics.median(paired)
    cpu_summary[c] = statistics.median(paired_cpu)
    print(f"{c:13} {statistics.median(med):15.3f} {min(med):6.3f}..{max(med):6.3f} {summary[c]:8.1f}%"
          f" {min(paired):7.1f}%..{max(paired):6.1f}% {statistics.median(paired_mean):8.1f}%"
          f" {statistics.median([by[c][r][3] for r in rounds]):12.3f} {cpu_summary[c]:12.1f}%"
          f" {min(paired_cpu):7.1f}%..{max(paired_cpu):6.1f}%")
mb = statistics.median([by["dbg_all"][r][2] for r in by["dbg_all"]])
print(f"# overhead debugger default: {summary['dbg_default']:.1f}%")
print(f"# overhead debugger all-every-step: {summary['dbg_all']:.1f}%")
print(f"# debugger all-every-step MB/s: {mb:.2f}")
print(f"# overhead profiler default: {summary['prof_default']:.1f}%")
print(f"# overhead profiler every-step: {summary['prof_every']:.1f}%")
for c, label in [("dbg_default", "debugger default"), ("dbg_all", "debugger all-every-step"),
                 ("prof_default", "profiler default"), ("prof_every", "profiler every-step")]:
    print(f"# cpu overhead {label}: {cpu_summary[c]:.1f}%")
PY
