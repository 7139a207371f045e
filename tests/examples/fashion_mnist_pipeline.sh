#!/usr/bin/env bash
# End to end, model parallel: the Fashion-MNIST example with a pipeline config on NP ranks
# reaches >= 70% test accuracy after 200 steps, and two runs with the same seed end with the
# same parameters.
#   fashion_mnist_pipeline.sh MPIEXEC EXAMPLE CONFIG NP
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; CONFIG="$3"; NP="$4"
source "$(dirname "$0")/lib.sh"
in_scratch_dir
run() { "$MPIEXEC" -n "$NP" "$EXAMPLE" --config "$CONFIG" --seed 3 "$@" 2>&1 | tee /dev/stderr | grep '^final:'; }
first=$(run --max-steps 200)
accuracy_at_least "$first" 0.70 "200 steps"
second=$(run --max-steps 30)
third=$(run --max-steps 30)
same_hash "a run" "$second" "a second run with the same seed" "$third"
echo "PASS"
