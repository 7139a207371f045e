#!/usr/bin/env bash
# Reads a Strata run with smdebug's own readers (issue 15: "files stay readable by smdebug's
# create_trial and its profiler analysis"). smdebug is not packaged for Debian and is not
# copied into this repository: give the path of a checkout of awslabs/sagemaker-debugger.
#
#   scripts/check_smdebug.sh SMDEBUG_CHECKOUT [BUILD_DIR=build] [RUN_DIR]
#
# Without RUN_DIR it runs examples/fashion_mnist on 2 ranks (120 steps, losses every 10 steps,
# weights and gradients as reductions, the biases raw, the framework timeline for steps
# 5-14, then the example's EVAL pass) into a temporary folder. Then, with /usr/bin/python3
# and smdebug on PYTHONPATH:
#   tensors   smdebug.trials.create_trial(RUN_DIR): workers, modes, steps per mode, tensor
#             names; every tensor's value (or its reductions) at every step of every mode,
#             and the losses and biases equal to what `strata trial --tensor` prints;
#   profiler  LocalAlgorithmMetricsReader / LocalSystemMetricsReader event counts, Step
#             events at every TRAIN step of every rank, and PandasFrameAnalysis's job and step
#             statistics (they need step 0's Step event).
# Needs python3-protobuf, python3-numpy, python3-pandas, python3-boto3, python3-packaging and
# protoc (Debian packages). The checkout is copied to a temporary folder to compile its .proto
# files there, so it is left as it was. Exit status 0 when every check holds.
set -euo pipefail
SMDEBUG="${1:?usage: scripts/check_smdebug.sh SMDEBUG_CHECKOUT [BUILD_DIR] [RUN_DIR]}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${2:-$ROOT/build}"
RUN="${3:-}"
WORK="$(mktemp -d /tmp/strata_check_smdebug.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

[ -f "$SMDEBUG/smdebug/trials/__init__.py" ] || { echo "$SMDEBUG is not a sagemaker-debugger checkout" >&2; exit 2; }
cp -r "$SMDEBUG/smdebug" "$WORK/smdebug"
(cd "$WORK" && protoc --python_out=. smdebug/core/tfevent/proto/*.proto)

if [ -z "$RUN" ]; then
  RUN="$WORK/run"
  cat > "$WORK/job.json" <<JSON
{"output_dir": "$RUN",
 "dataparallel": {"enabled": true},
 "debugger": {"include_workers": "all", "collections": [
   {"name": "losses", "save_interval": 10},
   {"name": "biases", "save_interval": 40},
   {"name": "weights", "save_interval": 40, "reductions": ["l2", "mean"]},
   {"name": "gradients", "save_interval": 40, "reductions": ["abs_mean", "l2"]}]},
 "profiler": {"system_monitor_interval_millis": 500, "framework_profile": {"start_step": 5, "num_steps": 10}}}
JSON
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 CI=1
  echo "== mpirun -n 2 $BUILD/examples/fashion_mnist --config $WORK/job.json --max-steps 120"
  mpirun -n 2 "$BUILD/examples/fashion_mnist" --config "$WORK/job.json" --seed 3 --max-steps 120 > "$WORK/run.log" 2>&1 \
    || { cat "$WORK/run.log"; exit 1; }
  tail -n 2 "$WORK/run.log"
fi

# What Strata's own reader says: name -> (mode, mode step) -> values, for the checks' reference.
for name in $("$BUILD/strata" trial "$RUN" | sed -nE 's/^  ((Loss|.*loss|.*bias)[^ ]*) .*/\1/p'); do
  echo "## $name"
  "$BUILD/strata" trial "$RUN" --tensor "$name" --worker worker_0 --max-values 1000000
done > "$WORK/strata_values.txt"

PYTHONPATH="$WORK" SMDEBUG_LOG_LEVEL=error /usr/bin/python3 - "$RUN" "$WORK/strata_values.txt" <<'PY'
import re, sys
import numpy as np
from smdebug.core.modes import ModeKeys
from smdebug.trials import create_trial

run, strata_values = sys.argv[1:3]
problems = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        problems.append(what)

# Strata's reading: lines "  step S (MODE M) worker_0: dtype [shape] [v, v, ...]".
ours = {}
name = None
for line in open(strata_values):
    if line.startswith("## "):
        name = line[3:].strip()
        continue
    m = re.match(r"\s+step \d+ \((\w+) (\d+)\) worker_0: \S+ \[[^\]]*\] \[([^\]]*)\]", line)
    if m and name:
        ours[(name, m.group(1), int(m.group(2)))] = [float(v) for v in m.group(3).replace(",", " ").split()]

t = create_trial(run)
workers = t.workers()
print(f"workers {workers}, num_workers {t.num_workers}")
check(len(workers) == t.num_workers == 2, "create_trial: both workers, num_workers 2")
modes = {ModeKeys.TRAIN: "TRAIN", ModeKeys.EVAL: "EVAL", ModeKeys.PREDICT: "PREDICT"}
for mode, label in modes.items():
    s = t.steps(mode=mode)
    print(f"{label} steps: {len(s)} {s[:4]}...{s[-2:]}")
check(len(t.steps(mode=ModeKeys.TRAIN)) >= 12, "TRAIN steps 0..119 every 10 (and the due ones)")
check(len(t.steps(mode=ModeKeys.EVAL)) >= 1, "EVAL steps of the evaluation pass")
names = t.tensor_names()
print(f"{len(names)} tensors: {names}")
check(any("loss" in n.lower() for n in names), "a loss tensor")
check(any(n.startswith("gradient/") for n in names), "gradient tensors")
check(set(t.collections()) >= {"losses", "weights", "gradients", "biases"}, "collections")

read = compared = 0
for n in names:
    tensor = t.tensor(n)
    for mode, label in modes.items():
        for step in tensor.steps(mode=mode):
            for w in workers:
                try:
                    v = tensor.value(step, mode=mode, worker=w)
                except Exception:
                    v = None
                if v is None:
                    reds = tensor.reduction_values(step, mode=mode, worker=w)
                    check(bool(reds), f"{n} {label} {step} {w}: a value or reductions")
                    read += 1
                    continue
                read += 1
                if w == "worker_0" and (n, label, step) in ours:
                    mine = np.asarray(ours[(n, label, step)], dtype=np.float64)
                    flat = np.asarray(v, dtype=np.float64).flatten()
                    same = flat.size == mine.size and np.allclose(flat, mine, rtol=1e-5, atol=1e-7)
                    check(same, f"{n} {label} step {step}: smdebug reads what strata trial reads ({flat[:3]})")
                    compared += 1
check(read > 0 and compared > 0, f"read {read} (tensor, step, mode, worker) values, {compared} compared with strata trial")
for n in names:
    if n.startswith("gradient/") or "weight" in n:
        reds = t.tensor(n).reduction_values(t.tensor(n).steps()[0])
        print(f"{n} step {t.tensor(n).steps()[0]} reductions {reds}")
        break

# Profiler output.
from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, StatsBy
path = run + "/profiler-output"
events = LocalAlgorithmMetricsReader(path).get_events(0, 2**62)
system = LocalSystemMetricsReader(path).get_events(0, 2**62)
print(f"framework events {len(events)}, system events {len(system)}")
check(len(events) > 0 and len(system) > 0, "framework and system events")
train_steps = {}
for e in events:
    if e.event_name == "Step:ModeKeys.TRAIN":
        train_steps.setdefault(e.node_id, set()).add(int(e.event_args["step_num"]))
print({node: (len(s), min(s), max(s)) for node, s in train_steps.items()})
check(len(train_steps) == 2 and all(s == set(range(len(s))) and len(s) >= 100 for s in train_steps.values()),
      "a Step:ModeKeys.TRAIN event at every step of both ranks, from step 0")
frame = PandasFrame(path)
fw, sy = frame.get_all_framework_metrics(), frame.get_all_system_metrics()
analysis = PandasFrameAnalysis(sy, fw)
job = analysis.get_job_statistics().__dict__
print("job statistics:", {k: (float(v) if not hasattr(v, "iloc") else float(v.iloc[0])) for k, v in job.items()
                          if k.endswith("%") or k.endswith("duration")})
check(float(job["training_loop_%"].iloc[0] if hasattr(job["training_loop_%"], "iloc") else job["training_loop_%"]) > 0,
      "job statistics: a training loop (step 0 found)")
stats = analysis.get_step_statistics(StatsBy.TRAINING_PHASE)
print(stats.to_string())
check(set(stats.iloc[:, 0]) >= {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL"}, "step statistics for TRAIN and EVAL")
print(f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY
