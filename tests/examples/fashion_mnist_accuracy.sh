#!/usr/bin/env bash
# End to end: one epoch of the Fashion-MNIST example on 2 ranks reaches >= 85% test
# accuracy, and two runs with the same seed end with the same parameters.
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"
run() { "$MPIEXEC" -n 2 "$EXAMPLE" --epochs 1 --seed 3 "$@" 2>&1 | tee /dev/stderr | grep '^final:'; }
first=$(run)
accuracy=$(sed -E 's/.*accuracy=([0-9.]+).*/\1/' <<<"$first")
echo "accuracy after one epoch: $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.85) }' || { echo "FAIL: accuracy $accuracy < 0.85"; exit 1; }
second=$(run --max-steps 100)
third=$(run --max-steps 100)
hash2=$(sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$second")
hash3=$(sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$third")
[ "$hash2" = "$hash3" ] || { echo "FAIL: same seed, different parameters: $hash2 vs $hash3"; exit 1; }
echo "PASS"
