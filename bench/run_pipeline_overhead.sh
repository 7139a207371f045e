#!/usr/bin/env bash
# Cost of the pipeline's framework timeline: the Fashion-MNIST example, 2 stages x 4
# microbatches (interleaved, auto partition), 400 steps, with the profiler's framework window
# off (system monitor only) and on for every step, ROUNDS interleaved rounds. Metric: per
# rank the median step time of the always-on step timer (steps 10..399); overhead = mean of
# the "on" medians / mean of the "off" medians - 1. Reproduces the "Pipeline timeline
# overhead" figure of bench/RESULTS.md and keeps the raw output:
#
#   bench/run_pipeline_overhead.sh [BUILD_DIR=build] [ROUNDS=4] [OUT=bench/results/pipeline_overhead]
#
# OUT/<mode>_round<i>.txt (the example's output and the medians), OUT/summary.txt.
set -euo pipefail
BUILD=${1:-build}; ROUNDS=${2:-4}; OUT=${3:-bench/results/pipeline_overhead}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/quiet.sh"
BIN="$BUILD/examples/fashion_mnist"
bench_start "$OUT" "$BIN"
work=$SCRATCH
pipeline='"modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "interleaved"}'
profiler_off='"profiler": {"system_monitor_interval_millis": 500}'
profiler_on='"profiler": {"framework_profile": {"start_step": 0, "num_steps": 100000}}'
medians() {  # run dir -> "rank0_us rank1_us": median step time of steps 10..399 per rank
  python3 - "$1" <<'PY'
import glob, json, statistics, sys
per_rank = {}
for path in glob.glob(f"{sys.argv[1]}/**/*_steps.jsonl", recursive=True):
    for line in open(path):
        try:
            s = json.loads(line)
        except ValueError:
            continue
        if s.get("mode", "TRAIN") == "TRAIN" and 10 <= s["step"] < 400:
            per_rank.setdefault(s["rank"], []).append(s["dur_us"])
print(" ".join(f"{statistics.median(per_rank[r]):.0f}" for r in sorted(per_rank)))
PY
}
for ((i = 1; i <= ROUNDS; i++)); do
  for mode in off on; do
    profiler=$profiler_off; [ "$mode" = on ] && profiler=$profiler_on
    run="$work/$mode$i"
    echo "{$pipeline, $profiler, \"output_dir\": \"$run\"}" >"$work/$mode.json"
    wait_quiet "$OUT/quiet.log"
    {
      echo "# commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg) at start"
      echo "# mpirun -n 2 $BIN --config $(cat "$work/$mode.json") --seed 3 --max-steps 400"
      mpirun -n 2 "$BIN" --config "$work/$mode.json" --seed 3 --max-steps 400 2>&1 | tr '\r' '\n' | grep -v '^epoch [0-9]* \['
      echo "median step us per rank: $(medians "$run")"
    } >"$OUT/${mode}_round$i.txt"
    echo "round $i $mode: $(tail -1 "$OUT/${mode}_round$i.txt")"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.txt"
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def medians(mode, i):
    last = open(f"{out}/{mode}_round{i}.txt").read().strip().splitlines()[-1]
    return [float(x) for x in last.split(":")[1].split()]
print("| round | off rank 0 / 1 (us) | on rank 0 / 1 (us) |")
print("|---|---|---|")
off, on = [], []
for i in range(1, rounds + 1):
    a, b = medians("off", i), medians("on", i)
    off += a; on += b
    print(f"| {i} | {' / '.join(f'{x:.0f}' for x in a)} | {' / '.join(f'{x:.0f}' for x in b)} |")
print(f"# pipeline_timeline_overhead_pct: {100 * (statistics.mean(on) / statistics.mean(off) - 1):.1f}")
PY
