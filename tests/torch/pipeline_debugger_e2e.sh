#!/usr/bin/env bash
# Runs tests/torch/pipeline_debugger_e2e.cpp on 2 ranks: a 2-stage pipeline (manual
# partition) with the debugger saving weights, gradients and losses every step on every worker.
set -euo pipefail
source "$(dirname "$0")/../testing/e2e_driver.sh"
e2e_start pp_dbg "$@"
cat >"$dir/job.json" <<JSON
{
  "output_dir": "$dir/run",
  "modelparallel": {"enabled": true, "partitions": 2, "microbatches": 2, "pipeline": "interleaved",
                    "auto_partition": false,
                    "manual_partition": {"fc1": 0, "relu": 0, "fc2": 1, "log_softmax": 1}},
  "debugger": {
    "include_workers": "all",
    "collections": [
      {"name": "weights", "save_interval": 1},
      {"name": "biases", "save_interval": 1},
      {"name": "gradients", "save_interval": 1},
      {"name": "losses", "save_interval": 1}
    ]
  }
}
JSON
"$MPIEXEC" -n 2 "$BINARY" --config "$dir/job.json"
