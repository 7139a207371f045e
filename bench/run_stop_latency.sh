#!/usr/bin/env bash
# StopTraining latency of the in-process rule engine (issue 15): the Fashion-MNIST example on
# 2 ranks with a learning rate of 1000, LossNotDecreasing + StopTraining on the loss saved at
# every step, data parallel and as a 2-stage pipeline (the loss lives on the last stage,
# rank 1). Per run:
#   k      the step whose data showed the issue (rank 0's log line
#          "StopTraining: LossNotDecreasing found an issue at step k")
#   S      the steps every rank completed before stopping ("rank R stopped at step S"; the
#          step counter counts model.step() calls, so the last executed step is S - 1)
#   latency steps = (S - 1) - k; latency ms = from the end of step k to the end of the last
#          step on the slowest rank (the profiler's step timer)
#   engine cost = the in-process engine's CPU per evaluated step (rule-output/online/*.json)
#                 over the median step time; and the training thread's tap time per step.
# Prints a table and
#   # stop latency steps LossNotDecreasing: <worst over the runs>
#   # stop latency steps LossNotDecreasing dp: <n>      # ... pipeline: <n>
#   # stop latency ms LossNotDecreasing dp: <ms>        # ... pipeline: <ms>
#   # online engine cost per step pct dp: <x>           # ... pipeline: <x>
#
#   bench/run_stop_latency.sh [BUILD_DIR=build] [REPEATS=3]
set -euo pipefail
BUILD=${1:-build}; REPEATS=${2:-3}
BIN="$BUILD/examples/fashion_mnist"
[ -x "$BIN" ] || { echo "build it first: cmake --build $BUILD --target fashion_mnist" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 CI=1
work=$(mktemp -d "${TMPDIR:-/tmp}/strata_stop_latency_XXXXXX")
trap 'rm -rf "$work"' EXIT

config() {  # layout output_dir
  local mp=''
  [ "$1" = pipeline ] && mp='"modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "interleaved"},'
  cat <<JSON
{"output_dir": "$2", $mp
 "debugger": {"include_workers": "all", "collections": [{"name": "losses", "save_interval": 1}]},
 "rules": [{"name": "LossNotDecreasing", "parameters": {"num_steps": 10}, "actions": ["StopTraining"]}]}
JSON
}

echo "# machine: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg) at start; git $(git rev-parse --short HEAD 2>/dev/null)"
printf "%-9s %3s %6s %6s %9s %10s %11s %14s %12s\n" layout run k S latency latency_ms step_ms engine_us/step tap_us/step
for ((r = 0; r < REPEATS; r++)); do
  for layout in dp pipeline; do
    dir="$work/$layout-$r"
    config "$layout" "$dir" >"$work/$layout.json"
    mpirun -n 2 "$BIN" --config "$work/$layout.json" --seed 3 --lr 1000 --max-steps 2000 >"$dir.log" 2>&1 ||
      { cat "$dir.log" >&2; exit 1; }
    python3 - "$dir" "$dir.log" "$layout" "$r" <<'PY'
import glob, json, re, statistics, sys
run, log, layout, rep = sys.argv[1:5]
text = open(log).read()
m = re.search(r"StopTraining: LossNotDecreasing found an issue at step (\d+)", text)
stops = {int(a): int(b) for a, b in re.findall(r"^rank (\d+) stopped at step (\d+):", text, re.M)}
if not m or len(stops) != 2 or len(set(stops.values())) != 1:
    sys.exit(f"{layout}: no agreed LossNotDecreasing stop in {log}")
k, S = int(m.group(1)), next(iter(stops.values()))
steps = {}
for f in glob.glob(f"{run}/profiler-output/steps/*_steps.jsonl"):
    for line in open(f):
        try:
            s = json.loads(line)
        except ValueError:
            continue
        steps.setdefault(s["rank"], {})[s["step"]] = (s["start_us"], s["dur_us"])
end = lambda r, i: steps[r][i][0] + steps[r][i][1]
latency_ms = (max(end(r, S - 1) for r in steps) - min(end(r, k) for r in steps)) / 1000
step_ms = statistics.median(d for r in steps for (_, d) in steps[r].values()) / 1000
online = [json.load(open(f)) for f in glob.glob(f"{run}/rule-output/online/*.json")]
engine_us = max(o["engine_cpu_per_step_us"] for o in online)
tap_us = max(o["tap_training_thread_us"] / max(1, o["tap_steps"]) for o in online)
print(f"{layout:<9} {rep:>3} {k:>6} {S:>6} {S - 1 - k:>9} {latency_ms:>10.1f} {step_ms:>11.2f} {engine_us:>14.1f} {tap_us:>12.2f}")
PY
  done
done | tee "$work/rows.txt"
python3 - "$work/rows.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0] in ("dp", "pipeline")]
worst = 0
for layout in ("dp", "pipeline"):
    rs = [r for r in rows if r[0] == layout]
    lat = max(int(r[4]) for r in rs)
    worst = max(worst, lat)
    ms = max(float(r[5]) for r in rs)
    cost = statistics.median(float(r[7]) / (float(r[6]) * 1000) * 100 for r in rs)
    print(f"# stop latency steps LossNotDecreasing {layout}: {lat}")
    print(f"# stop latency ms LossNotDecreasing {layout}: {ms:.1f}")
    print(f"# online engine cost per step pct {layout}: {cost:.3f}")
print(f"# stop latency steps LossNotDecreasing: {worst}")
PY
