#!/usr/bin/env bash
# Runs tests/torch/instrumented_training_e2e.cpp on 2 ranks with a job config that turns on
# the debugger (layer outputs, a ".*relu_output" collection, losses; every worker) and the
# profiler (system metrics every 100 ms, framework timeline for steps 1..3).
set -euo pipefail
source "$(dirname "$0")/../testing/e2e_driver.sh"
e2e_start e2e "$@"
cat >"$dir/job.json" <<JSON
{
  "output_dir": "$dir/run",
  "debugger": {
    "include_workers": "all",
    "collections": [
      {"name": "outputs", "save_interval": 2},
      {"name": "custom", "include_regex": ".*relu_output", "save_interval": 1},
      {"name": "losses", "save_interval": 1}
    ]
  },
  "profiler": {
    "system_monitor_interval_millis": 100,
    "framework_profile": {"start_step": 1, "num_steps": 3}
  }
}
JSON
"$MPIEXEC" -n 2 "$BINARY" --config "$dir/job.json"
