#!/usr/bin/env bash
# End to end: one epoch of the Fashion-MNIST example on 2 ranks reaches >= 85% test
# accuracy, and two runs with the same seed end with the same parameters.
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"
source "$(dirname "$0")/lib.sh"
run() { "$MPIEXEC" -n 2 "$EXAMPLE" --epochs 1 --seed 3 "$@" 2>&1 | tee /dev/stderr | grep '^final:'; }
first=$(run)
accuracy_at_least "$first" 0.85 "one epoch"
second=$(run --max-steps 100)
third=$(run --max-steps 100)
same_hash "a run" "$second" "a second run with the same seed" "$third"
echo "PASS"
