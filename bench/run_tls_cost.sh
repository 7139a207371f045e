#!/usr/bin/env bash
# What encrypting traffic between hosts costs (docs/security.md): allreduce_bench with 2 ranks
# on two pretend hosts of this machine (STRATA_HOSTS=2, so the ranks talk TCP to each other,
# as between real hosts), plain and with TLS (STRATA_TLS=1), alternating ROUNDS times so the
# machine's noise hits both alike. Loopback TCP is only a memory copy, so the cipher is the
# whole difference: an upper bound of the cost between real hosts.
#
#   bench/run_tls_cost.sh [BUILD_DIR] [ROUNDS]       (defaults: build 3)
#
# Raw outputs: $OUT/{plain,tls}_<round>.txt (OUT: default bench/results/tls_cost/between_hosts), the load
# seen before each run in $OUT/machine.txt; ends with "# tls/plain tcp busbw <size>: <ratio>"
# lines (the median over rounds of the per-round ratio).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-build}"; ROUNDS="${2:-3}"
BIN="$BUILD/bench/allreduce_bench"
OUT="${OUT:-$ROOT/bench/results/tls_cost/between_hosts}"
ARGS=(-b 64K -e 64M -f 4 --impl strata --repeats 5)
[ -x "$BIN" ] || { echo "missing $BIN: cmake --build $BUILD --target allreduce_bench" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$OUT"
# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"
{
  echo "date: $(date -Is)"
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  echo "command: STRATA_HOSTS=2 STRATA_TLS={0,1} mpirun -np 2 $BIN ${ARGS[*]}"
} >"$OUT/machine.txt"
for round in $(seq 1 "$ROUNDS"); do
  for mode in plain tls; do
    tls=0; [ "$mode" = tls ] && tls=1
    wait_quiet "$OUT/machine.txt"
    echo "== round $round $mode"
    # No secret given: mpirun launches draw one on rank 0 (docs/security.md).
    STRATA_HOSTS=2 STRATA_TLS=$tls STRATA_LOG_LEVEL=WARN mpirun -np 2 "$BIN" "${ARGS[@]}" 2>&1 |
      tee "$OUT/${mode}_$round.txt"
  done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def busbw(path):
    rows = {}
    for line in open(path):
        m = re.match(r"\s+(\d+)\s+\d+\s+\S+\s+\S+\s+[\d.]+\s+([\d.]+)\s+(\d+)", line)
        if m:
            if int(m.group(3)) != 0:
                sys.exit(f"{path}: wrong results at {m.group(1)} bytes")
            rows[int(m.group(1))] = float(m.group(2))
    if not rows:
        sys.exit(f"{path}: no result rows")
    return rows
plain = [busbw(f"{out}/plain_{r}.txt") for r in range(1, rounds + 1)]
tls = [busbw(f"{out}/tls_{r}.txt") for r in range(1, rounds + 1)]
print(f"{'size':>10} {'plain GB/s (rounds)':>28} {'tls GB/s (rounds)':>28} {'tls/plain':>9}")
for size in sorted(plain[0]):
    p = [run[size] for run in plain]
    t = [run[size] for run in tls]
    ratio = statistics.median(b / a for a, b in zip(p, t))
    label = f"{size >> 20}MiB" if size >= 1 << 20 else f"{size >> 10}KiB"
    print(f"{label:>10} {' / '.join(f'{x:.2f}' for x in p):>28} {' / '.join(f'{x:.2f}' for x in t):>28} {ratio:9.2f}")
for size in sorted(plain[0]):
    label = f"{size >> 20}MiB" if size >= 1 << 20 else f"{size >> 10}KiB"
    ratio = statistics.median(run_t[size] / run_p[size] for run_p, run_t in zip(plain, tls))
    print(f"# tls/plain tcp busbw {label}: {ratio:.2f}")
PY
