#!/usr/bin/env bash
# The rule engine's cost: (1) every bottleneck rule over a synthetic 24 h x 64 ranks run
# (bench/rules_bench.cpp: seconds and peak memory, one core), RUNS times; (2) the cost of
# `strata::should_stop()` per step (2000 calls on 2 ranks, gtest's timer, 3 repeats).
# Reproduces the "Rule engine" figures of bench/RESULTS.md and keeps the raw output:
#
#   bench/run_rules.sh [BUILD_DIR=build] [RUNS=3] [OUT=bench/results/rules]
#
# OUT/engine_run<i>.txt, OUT/should_stop.txt; the `# ...` lines summarise.
set -euo pipefail
BUILD=${1:-build}; RUNS=${2:-3}; OUT=${3:-bench/results/rules}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/quiet.sh"
bench_start "$OUT" "$BUILD/bench/rules_bench" "$BUILD/tests/rules_mpi/stop_mpi_test"
header() { echo "# commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg) at start"; }
for ((i = 1; i <= RUNS; i++)); do
  wait_quiet "$OUT/quiet.log"
  { header; echo "# $BUILD/bench/rules_bench 24 64"; "$BUILD/bench/rules_bench" 24 64; } | tee "$OUT/engine_run$i.txt"
done
wait_quiet "$OUT/quiet.log"
{
  header
  echo "# STRATA_CONFIG=tests/rules_mpi/stop_job.json mpirun -n 2 stop_mpi_test --gtest_filter='*NoRequest*' --gtest_repeat=3"
  # From the scratch folder: the job config's relative output_dir lands there.
  bin=$(cd "$BUILD" && pwd)/tests/rules_mpi/stop_mpi_test
  (cd "$SCRATCH" && STRATA_CONFIG="$ROOT/tests/rules_mpi/stop_job.json" mpirun -n 2 "$bin" \
    --gtest_filter='*NoRequest*' --gtest_repeat=3 2>&1)
} >"$OUT/should_stop.txt"
python3 - "$OUT" "$RUNS" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
metrics = {}
for i in range(1, runs + 1):
    for line in open(f"{out}/engine_run{i}.txt"):
        m = re.match(r"# (rules .*): ([0-9.]+)$", line.strip())
        if m:
            metrics.setdefault(m.group(1), []).append(float(m.group(2)))
for key, values in metrics.items():
    print(f"# {key}: {statistics.median(values):.2f} (median of {len(values)}, {min(values):.2f}..{max(values):.2f})")
ms = [int(x) for x in re.findall(r"NoRequestRunsToTheEnd \((\d+) ms\)", open(f"{out}/should_stop.txt").read())]
if ms:
    # 2000 calls per test (tests/rules_mpi/stop_mpi_test.cpp); the slowest rank's repeat.
    print(f"# should_stop us per call np2: {max(ms) * 1000 / 2000:.2f} (max of {len(ms)} rank-repeats, gtest ms timer)")
PY
