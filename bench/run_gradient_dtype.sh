#!/usr/bin/env bash
# Accuracy cost of compressing gradients on the wire (`dataparallel.gradient_dtype`): the
# Fashion-MNIST example on 2 ranks, one epoch (937 steps), float32 vs bfloat16 vs float16,
# seeds 1..SEEDS; each run's test accuracy and loss. Reproduces the "Gradient compression"
# table of bench/RESULTS.md and keeps the raw output:
#
#   bench/run_gradient_dtype.sh [BUILD_DIR=build] [SEEDS=4] [OUT=bench/results/gradient_dtype]
#
# Accuracy does not depend on the machine's load (the run is deterministic for a seed and a
# dtype), so this needs no quiet machine. Per run OUT/<dtype>_seed<S>.txt (the example's
# output), OUT/summary.txt the table and one `# accuracy <dtype>: <mean>` line per dtype.
set -euo pipefail
BUILD=${1:-build}; SEEDS=${2:-4}; OUT=${3:-bench/results/gradient_dtype}
source "$(dirname "$0")/quiet.sh"
BIN="$BUILD/examples/fashion_mnist"
bench_start "$OUT" "$BIN"
configs=$SCRATCH
DTYPES=(float32 bfloat16 float16)
for dtype in "${DTYPES[@]}"; do
  echo "{\"dataparallel\": {\"gradient_dtype\": \"$dtype\"}, \"output_dir\": \"$configs/run-$dtype\"}" \
    >"$configs/$dtype.json"
done
for ((seed = 1; seed <= SEEDS; seed++)); do
  for dtype in "${DTYPES[@]}"; do
    {
      echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)," \
           "load $(cut -d' ' -f1-3 /proc/loadavg) at start"
      echo "# mpirun -np 2 $BIN --config {\"dataparallel\": {\"gradient_dtype\": \"$dtype\"}} --epochs 1 --seed $seed"
      mpirun -np 2 "$BIN" --config "$configs/$dtype.json" --epochs 1 --seed "$seed" 2>&1 | tr '\r' '\n' | grep -v '^epoch [0-9]* \['
    } >"$OUT/${dtype}_seed$seed.txt"
    grep '^final:' "$OUT/${dtype}_seed$seed.txt" | sed "s/^/$dtype seed $seed: /"
  done
done
python3 - "$OUT" "$SEEDS" "${DTYPES[@]}" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
out, seeds, dtypes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| gradient dtype | " + " | ".join(f"seed {s}" for s in range(1, seeds + 1)) + " | mean test accuracy |")
print("|---|" + "---|" * (seeds + 1))
means = {}
for d in dtypes:
    acc = []
    for s in range(1, seeds + 1):
        text = open(f"{out}/{d}_seed{s}.txt").read()
        acc.append(float(re.search(r"^final: .*accuracy=([0-9.]+)", text, re.M).group(1)))
    means[d] = statistics.mean(acc)
    print(f"| {d} | " + " | ".join(f"{a:.4f}" for a in acc) + f" | {means[d]:.4f} |")
for d in dtypes:
    print(f"# accuracy {d}: {means[d]:.4f}")
PY
