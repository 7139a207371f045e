#!/usr/bin/env bash
# Checkpoints of ~1 GB of training state (bench/checkpoint_bench.cpp): write and read
# throughput against the raw disk, and the training stall per save, synchronous vs
# asynchronous (issue 17: async stall <= 10% of sync). Reproduces the "Checkpoints" figures
# of bench/RESULTS.md and keeps the raw output:
#
#   bench/run_checkpoint.sh [BUILD_DIR=build] [RUNS=3] [OUT=bench/results/checkpoint]
#
# Each run is one process (--mb 512: 8 x Linear(4096, 4096) + SGD momentum = 1.07 GB, three
# repeats of every measurement, medians), written to OUT/run<i>.txt after a line with the
# commit, the machine and its load; the scratch directory sits next to OUT (the disk to
# measure) and is removed. The last lines summarise the `# ...` metrics over the runs
# (median, min..max), also in OUT/summary.txt.
set -euo pipefail
BUILD=${1:-build}; RUNS=${2:-3}; OUT=${3:-bench/results/checkpoint}
BIN="$BUILD/bench/checkpoint_bench"
[ -x "$BIN" ] || { echo "build it first: cmake --build $BUILD --target checkpoint_bench" >&2; exit 1; }
mkdir -p "$OUT"
scratch="$OUT/.scratch"
trap 'rm -rf "$scratch"' EXIT
for ((i = 1; i <= RUNS; i++)); do
  {
    echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)," \
         "$(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
         "disk $(df --output=source "$OUT" | tail -1), load $(cut -d' ' -f1-3 /proc/loadavg) at start"
    echo "# $BIN --dir $scratch --mb 512 --repeats 3"
    "$BIN" --dir "$scratch" --mb 512 --repeats 3
  } | tee "$OUT/run$i.txt"
done
python3 - "$OUT" "$RUNS" <<'PY' | tee "$OUT/summary.txt"
import statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
metrics = {}
for i in range(1, runs + 1):
    for line in open(f"{out}/run{i}.txt"):
        if line.startswith("# ") and ": " in line and not line.startswith("# commit"):
            key, value = line[2:].rsplit(": ", 1)
            try:
                metrics.setdefault(key, []).append(float(value))
            except ValueError:
                pass
print(f"# summary over {runs} run(s): median (min..max)")
for key, values in metrics.items():
    print(f"# {key}: {statistics.median(values):.3f} ({min(values):.3f}..{max(values):.3f})")
PY
