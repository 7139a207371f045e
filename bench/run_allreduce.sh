#!/usr/bin/env bash
# Runs the standard allreduce_bench set (builds nothing) and stores the outputs in
# bench/results/:
#   np2_run{1..R}.txt/.json  2 ranks, default transport, R quiet runs (RUNS, default 3; a run
#                            during which other processes used >= MAX_FOREIGN cores, default
#                            0.15, is kept as np2_rejected<k> and repeated)
#   np2_median.txt           per-column medians of those runs (ratios: median of per-run ratios)
#   np4.txt                  4 ranks on this machine (oversubscribed when nproc < 4)
#   np2_tcp.txt              2 ranks with STRATA_TRANSPORT=tcp (the inter-host path; gloo is TCP too)
#   machine.txt              nproc, CPU, kernel, git SHA, load before every run
# Extra arguments go to every run, e.g.  bench/run_allreduce.sh -e 64M --repeats 7
# Environment: BIN (default build/bench/allreduce_bench), RUNS, OUT (default bench/results),
#              QUIET_WAIT_S (default 60: wait up to this long for < 0.15 foreign cores).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/allreduce_bench}"
OUT="${OUT:-$ROOT/bench/results}"
RUNS="${RUNS:-3}"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
[[ -x "$BIN" ]] || { echo "missing $BIN: ninja -C build -j2 allreduce_bench" >&2; exit 1; }
mkdir -p "$OUT"

# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"

{
  echo "date: $(date -Is)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "kernel: $(uname -r)"
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo uncommitted)"
  echo "mpi: $(mpirun --version 2>/dev/null | head -1)"
  echo "args: $*"
} >"$OUT/machine.txt"

run() {  # run NAME NP [mpirun args...] -- [bench args...]
  local name=$1 np=$2; shift 2
  local margs=()
  while [[ $# -gt 0 && $1 != -- ]]; do margs+=("$1"); shift; done
  shift || true
  wait_quiet "$OUT/machine.txt"
  echo "== $name (np $np)"
  "${MPIRUN[@]}" -np "$np" "${margs[@]}" "$BIN" -J "$OUT/$name.json" "$@" 2>&1 | tee "$OUT/$name.txt"
}

foreign_of() { sed -n 's/^# foreign cpu.*: \([0-9.]*\)$/\1/p' "$OUT/$1.txt"; }

# The 2-rank run is repeated until RUNS runs saw < MAX_FOREIGN cores of other load
# (runs with more are kept as np2_rejected*.txt), at most 2*RUNS+2 attempts.
MAX_FOREIGN="${MAX_FOREIGN:-0.15}"
accepted=0 attempt=0
while (( accepted < RUNS && attempt < 2 * RUNS + 2 )); do
  attempt=$((attempt + 1))
  run "np2_run$((accepted + 1))" 2 -- "$@"
  f=$(foreign_of "np2_run$((accepted + 1))")
  if awk -v f="${f:-9}" -v m="$MAX_FOREIGN" 'BEGIN{exit !(f < m)}'; then
    accepted=$((accepted + 1))
  else
    echo "rejected: foreign cpu $f >= $MAX_FOREIGN" | tee -a "$OUT/machine.txt"
    for ext in txt json; do mv "$OUT/np2_run$((accepted + 1)).$ext" "$OUT/np2_rejected$attempt.$ext"; done
  fi
done
RUNS=$(( accepted > 0 ? accepted : RUNS ))
(( accepted > 0 )) || { echo "no quiet 2-rank run" >&2; exit 1; }
run np4 4 -- "$@"
run np2_tcp 2 -x STRATA_TRANSPORT=tcp -- "$@"

# Medians of the 2-rank runs, printed in the benchmark's table shape.
/usr/bin/env python3 - "$OUT" "$RUNS" <<'PY' | tee "$OUT/np2_median.txt"
import json, re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
data = [json.load(open(f"{out}/np2_run{i}.json")) for i in range(1, runs + 1)]
impls = list(dict.fromkeys(r["impl"] for r in data[0]))
sizes = sorted({r["bytes"] for r in data[0]})
refs = [i for i in impls if i == "memcpy"]
coll = [i for i in impls if i not in refs]
def cell(run, b, impl): return next(r for r in run if r["bytes"] == b and r["impl"] == impl)
med = lambda xs: statistics.median(xs)
label = lambda b: next((f"{b >> s}{u}" for s, u in ((30, "GiB"), (20, "MiB"), (10, "KiB")) if b >= 1 << s and b % (1 << s) == 0), f"{b}B")
print(f"# median of {runs} runs ({out}/np2_run*.txt); each run: median of its trials, time=max-over-ranks")
print("#" + " " * 39 + "".join(f"  {(' ' + i + ' ').center(24, '-')}" for i in coll))
print("#       size        count    type  redop" + "       time   busbw #wrong" * len(coll) + "  strata-algo  " + "".join(f" {i:>8}" for i in refs))
for b in sizes:
    line = f"{b:12d} {b // 4:12d} {'float':>7} {'sum':>6}"
    for i in coll:
        c = [cell(r, b, i) for r in data]
        line += f"  {med([x['time_us'] for x in c]):9.2f} {med([x['busbw_gbs'] for x in c]):7.2f} {max(x['wrong'] for x in c):6d}"
    algos = [cell(r, b, coll[0])["note"] for r in data]
    line += f"  {max(set(algos), key=algos.count) or '-':<13}"
    for i in refs: line += f" {med([cell(r, b, i)['busbw_gbs'] for r in data]):8.2f}"
    print(line)
foreign = [re.search(r"foreign cpu.*: ([0-9.]+)", open(f"{out}/np2_run{i}.txt").read()) for i in range(1, runs + 1)]
print("# foreign cpu cores per run: " + " ".join(m.group(1) if m else "?" for m in foreign))
lines = []
for b in (64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20):
    if b not in sizes: continue
    for i in impls[1:]:
        ratios = [cell(r, b, impls[0])["busbw_gbs"] / cell(r, b, i)["busbw_gbs"] for r in data]
        print(f"# per-run ratios {impls[0]}/{i} {label(b)}: {' '.join(f'{x:.2f}' for x in ratios)}")
        lines.append(f"# ratio {impls[0]}/{i} {label(b)}: {med(ratios):.2f}")
if 4096 in sizes:
    for i in coll:
        lines.append(f"# latency {i} 4KiB us: {med([cell(r, 4096, i)['time_us'] for r in data]):.2f}")
print("\n".join(lines))
PY
