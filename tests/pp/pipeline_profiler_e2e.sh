#!/usr/bin/env bash
# Runs tests/pp/pipeline_profiler_e2e.cpp on NP ranks (2: one pipeline of 2 stages; 4: two
# pipelines with data parallelism across them; 4 microbatches, manual partition) with the
# profiler on: system metrics every 100 ms, framework timeline for steps 1..3. PIPELINE picks
# the schedule (default interleaved).
set -euo pipefail
source "$(dirname "$0")/../testing/e2e_driver.sh"
e2e_start pp_prof "$@"
NP="${3:-2}"
ddp=false; [ "$NP" -gt 2 ] && ddp=true
cat >"$dir/job.json" <<JSON
{
  "output_dir": "$dir/run",
  "modelparallel": {
    "enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "${PIPELINE:-interleaved}", "ddp": $ddp,
    "auto_partition": false, "manual_partition": {"fc1": 0, "relu1": 0, "fc2": 1, "relu2": 1, "fc3": 1}
  },
  "profiler": {
    "system_monitor_interval_millis": 100,
    "framework_profile": {"start_step": 1, "num_steps": 3}
  }
}
JSON
"$MPIEXEC" -n "$NP" "$BINARY" --config "$dir/job.json"
