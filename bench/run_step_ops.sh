#!/usr/bin/env bash
# Which operations of an mlp25m step slow down when both cores train: step_ops_bench (one
# thread, the 4096x4096 layer at batch 32) pinned alone to each core, then on both cores at
# the same time, ROUNDS times. The unconnected bound of bench/run_scaling.sh
# (`efficiency sync_bound`) is this slowdown over a whole step.
# Usage: [ROUNDS=3] [OUT=dir] bench/run_step_ops.sh [BUILD_DIR]
# Prints every run's lines, then per operation (medians over rounds and cores):
#   # alone <op> ms: <x>          # together <op> ms: <x> (the slower core's)
#   # alone/together <op>: <x>    (1: no slowdown; a synchronous step goes at the slower core)
#   # copy/(zero+add): <x>        (the reducer's first-gradient copy against zeroing the bucket
#                                  and adding the gradient into it)
set -euo pipefail
BUILD="${1:-build}"; ROUNDS="${ROUNDS:-3}"
RESULTS_DIR="${OUT:-$(dirname "$0")/results}"
BIN="$BUILD/bench/step_ops_bench"
[ -x "$BIN" ] || { echo "missing $BIN: cmake --build $BUILD --target step_ops_bench" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores" >&2; exit 1; }
mkdir -p "$RESULTS_DIR"
# The malloc setting strata::init applies ("retain", docs/config.md), so a new 64 MiB tensor
# reuses freed memory as it does in training (glibc's defaults would map and fault it in on
# every call: bwd_weight_new then costs over three times bwd_weight_into here).
# shellcheck source=quiet.sh
source "$(dirname "$0")/quiet.sh"
export GLIBC_TUNABLES="$RETAIN_GLIBC_TUNABLES"
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT

# run LABEL CORE...: one step_ops_bench per core, all at once; lines tagged "LABEL core=C".
run() {
  local label=$1 core pids=() files=(); shift
  for core in "$@"; do
    local f; f=$(mktemp); files+=("$f")
    taskset -c "$core" "$BIN" >"$f" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  local i=0
  for core in "$@"; do sed "s/^op /$label core=$core /" "${files[$i]}"; rm -f "${files[$i]}"; i=$((i + 1)); done
}

main() {
  echo "# step_ops_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, rounds=$ROUNDS, $GLIBC_TUNABLES"
  echo "# $(date -u +%FT%TZ) git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown), load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((r = 1; r <= ROUNDS; r++)); do
    run "round=$r alone" 0
    run "round=$r alone" 1
    run "round=$r together" 0 1
  done | tee "$RAW"
  /usr/bin/python3 - "$RAW" <<'PYEOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round=(\d+) (alone|together) core=(\d+) (\S+) ms=([\d.]+)", line)
    if m:
        rows.setdefault((m[2], m[4], int(m[1])), []).append(float(m[5]))
ops = list(dict.fromkeys(op for _, op, _ in rows))
def median(mode, op):
    # alone: every run on either core; together: the slower core of each round (a synchronous
    # step waits for it)
    runs = []
    for (m, o, _), values in rows.items():
        if m == mode and o == op:
            runs.extend(values if mode == "alone" else [max(values)])
    if not runs:
        sys.exit(f"no {mode} runs of {op}")
    return statistics.median(runs)
for op in ops:
    a, t = median("alone", op), median("together", op)
    print(f"# alone {op} ms: {a:.3f}")
    print(f"# together {op} ms: {t:.3f}")
    print(f"# alone/together {op}: {a / t:.2f}")
print(f"# copy/(zero+add): {median('alone', 'copy') / (median('alone', 'zero') + median('alone', 'add')):.2f}")
PYEOF
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main 2>&1 | tee "$RESULTS_DIR/step_ops.txt"
