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
#                 A diverging run stops after ~11 steps, so its figure is mostly the first
#                 evaluation's one-time cost (regexes compiled, rule state allocated); the
#                 cost lines come from healthy runs of COST_STEPS steps (default 300, the
#                 learning rate's default, the rule as the example's job.json sets it: a
#                 smoothed loss over 200 steps; no stop),
#                 whole run (first evaluation included) and after the first evaluation.
# Prints a table and
#   # stop latency steps LossNotDecreasing: <worst over the runs>
#   # stop latency steps LossNotDecreasing dp: <n>      # ... pipeline: <n>
#   # stop latency ms LossNotDecreasing dp: <ms>        # ... pipeline: <ms>
#   # online engine cost per step pct dp: <x>           # ... pipeline: <x>   (healthy runs, whole run)
#   # online engine cost per step after first pct dp: <x>  # ... pipeline: <x>
#
#   bench/run_stop_latency.sh [BUILD_DIR=build] [REPEATS=3]
set -euo pipefail
BUILD=${1:-build}; REPEATS=${2:-3}; COST_STEPS=${COST_STEPS:-300}
BIN="$BUILD/examples/fashion_mnist"
[ -x "$BIN" ] || { echo "build it first: cmake --build $BUILD --target fashion_mnist" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 CI=1
work=$(mktemp -d "${TMPDIR:-/tmp}/strata_stop_latency_XXXXXX")
trap 'rm -rf "$work"' EXIT

config() {  # layout output_dir [LossNotDecreasing parameters]
  local mp='' params='"num_steps": 10'
  [ $# -ge 3 ] && params=$3
  [ "$1" = pipeline ] && mp='"modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "interleaved"},'
  cat <<JSON
{"output_dir": "$2", $mp
 "debugger": {"include_workers": "all", "collections": [{"name": "losses", "save_interval": 1}]},
 "rules": [{"name": "LossNotDecreasing", "parameters": {$params}, "actions": ["StopTraining"]}]}
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

# The engine's cost over a healthy run: no issue, no stop, COST_STEPS steps.
printf "%-9s %6s %11s %14s %20s %21s\n" layout steps step_ms engine_us/step first_evaluation_us after_first_us/step
for layout in dp pipeline; do
  dir="$work/$layout-healthy"
  config "$layout" "$dir" '"num_steps": 200, "smoothing": "mean", "smoothing_window": 20, "diff_percent": 10' \
    >"$work/$layout-healthy.json"  # the rule as examples/fashion_mnist/job.json sets it
  mpirun -n 2 "$BIN" --config "$work/$layout-healthy.json" --seed 3 --max-steps "$COST_STEPS" >"$dir.log" 2>&1 ||
    { cat "$dir.log" >&2; exit 1; }
  if grep -q "StopTraining:" "$dir.log"; then echo "$layout: the healthy run was stopped (see $dir.log)" >&2; exit 1; fi
  python3 - "$dir" "$layout" <<'PY'
import glob, json, statistics, sys
run, layout = sys.argv[1:3]
durs = []
for f in glob.glob(f"{run}/profiler-output/steps/*_steps.jsonl"):
    for line in open(f):
        try:
            durs.append(json.loads(line)["dur_us"])
        except (ValueError, KeyError):
            continue
online = [json.load(open(f)) for f in glob.glob(f"{run}/rule-output/online/*.json")]
worst = max(online, key=lambda o: o["engine_cpu_per_step_us"])
steps = max(o["steps_evaluated"] for o in online)
print(f"{layout + '-cost':<9} {steps:>6} {statistics.median(durs) / 1000:>11.2f} {worst['engine_cpu_per_step_us']:>14.1f}"
      f" {worst['engine_cpu_first_evaluation_us']:>20.1f} {max(o['engine_cpu_per_step_after_first_us'] for o in online):>21.1f}")
PY
done | tee -a "$work/rows.txt"
python3 - "$work/rows.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0] in ("dp", "pipeline")]
rows_cost = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].endswith("-cost")]
worst = 0
for layout in ("dp", "pipeline"):
    rs = [r for r in rows if r[0] == layout]
    lat = max(int(r[4]) for r in rs)
    worst = max(worst, lat)
    ms = max(float(r[5]) for r in rs)
    print(f"# stop latency steps LossNotDecreasing {layout}: {lat}")
    print(f"# stop latency ms LossNotDecreasing {layout}: {ms:.1f}")
for layout in ("dp", "pipeline"):
    c = next(r for r in rows_cost if r[0] == layout + "-cost")
    step_us = float(c[2]) * 1000
    print(f"# online engine cost per step pct {layout}: {float(c[3]) / step_us * 100:.3f}")
    print(f"# online engine cost per step after first pct {layout}: {float(c[5]) / step_us * 100:.3f}")
print(f"# stop latency steps LossNotDecreasing: {worst}")
PY
