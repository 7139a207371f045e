#!/usr/bin/env bash
# End to end, model parallel: the Fashion-MNIST example with a pipeline config on NP ranks
# reaches >= 70% test accuracy after 200 steps, and two runs with the same seed end with the
# same parameters.
#   fashion_mnist_pipeline.sh MPIEXEC EXAMPLE CONFIG NP
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; CONFIG="$3"; NP="$4"
workdir=$(mktemp -d); trap 'rm -rf "$workdir"' EXIT; cd "$workdir"
run() { "$MPIEXEC" -n "$NP" "$EXAMPLE" --config "$CONFIG" --seed 3 "$@" 2>&1 | tee /dev/stderr | grep '^final:'; }
first=$(run --max-steps 200)
accuracy=$(sed -E 's/.*accuracy=([0-9.]+).*/\1/' <<<"$first")
echo "accuracy after 200 steps: $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.70) }' || { echo "FAIL: accuracy $accuracy < 0.70"; exit 1; }
second=$(run --max-steps 30)
third=$(run --max-steps 30)
hash2=$(sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$second")
hash3=$(sed -E 's/.*params_sha256=([0-9a-f]+).*/\1/' <<<"$third")
[ "$hash2" = "$hash3" ] || { echo "FAIL: same seed, different parameters: $hash2 vs $hash3"; exit 1; }
echo "PASS"
