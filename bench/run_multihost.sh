#!/usr/bin/env bash
# AllReduce between two emulated hosts on this machine (tests/multihost/testbed.sh: each host
# its own network, UTS and mount namespace, joined by veth links to a bridge), Strata beside
# Gloo (c10d::ProcessGroupGloo over the same links) and Open MPI in one mpirun job per layout.
# Needs root. Outputs in OUT (default bench/results/multihost/):
#   hosts2_np2.txt/.json  1 rank per host: every byte crosses the link (Strata: TCP ring/direct)
#   hosts2_np4.txt/.json  2 ranks per host: Strata's hierarchical AllReduce (shared memory
#                         within a host, TCP between), Gloo and MPI over the same links
#   machine.txt           nproc, CPU, kernel, git SHA, load before every run, the link shaping
# RATE=1gbit shapes every host's link (tc tbf) as a 1 Gb/s network; default: unshaped veth
# (memory-speed TCP, the CPU is the limit). Extra arguments go to allreduce_bench, e.g.
#   bench/run_multihost.sh -e 64M --repeats 3
# Environment: BIN (default build/bench/allreduce_bench), OUT, RATE, QUIET_WAIT_S (see quiet.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/allreduce_bench}"
OUT="${OUT:-$ROOT/bench/results/multihost}"
TESTBED="$ROOT/tests/multihost/testbed.sh"
[[ -x "$BIN" ]] || { echo "missing $BIN: cmake --build build -j2 --target allreduce_bench" >&2; exit 1; }

if [[ -z ${TESTBED_ID:-} ]]; then
  mkdir -p "$OUT"
  exec "$TESTBED" with --hosts 2 ${RATE:+--rate "$RATE"} -- "${BASH_SOURCE[0]}" "$@"
fi

# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"
{
  machine_info "$BIN" "$@"
  echo "hosts: 2 emulated (tests/multihost/testbed.sh), link: veth + bridge, shaping: ${RATE:-none}"
} >"$OUT/machine.txt"

run() {  # run NAME NP PER_HOST [bench args...]
  local name=$1 np=$2 per_host=$3; shift 3
  wait_quiet "$OUT/machine.txt"
  echo "== $name ($np ranks, $per_host per host)"
  "$TESTBED" mpirun "$TESTBED_ID" -np "$np" --map-by "ppr:$per_host:node" \
    "$BIN" --impl strata,gloo,mpi -J "$OUT/$name.json" "$@" 2>&1 | tee "$OUT/$name.txt"
}

run hosts2_np2 2 1 "$@"
run hosts2_np4 4 2 "$@"
