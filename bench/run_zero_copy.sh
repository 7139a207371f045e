#!/usr/bin/env bash
# The zero-copy AllReduce (issue 16) side by side in one 2-rank run: Strata on a
# Group::allocateShared buffer ("strata", shm_direct), Strata on ordinary memory in the same
# run ("strata_private", the staged algorithms), Open MPI, Gloo and a concurrent memcpy.
# Ends with the `# ratio strata/mpi <size>:`, `# ratio strata/gloo <size>:` and
# `# ratio strata/memcpy <size>:` lines. Raw output: $OUT/np2.txt and .json, with the commit,
# the machine and its load before and after (a loaded machine makes the numbers rough).
#
#   bench/run_zero_copy.sh [extra allreduce_bench args, e.g. --repeats 3]
# allreduce_bench's default --malloc keep makes Open MPI's and Gloo's per-call temporaries
# stay resident (on this VM a fresh page fault costs ~15 us: Open MPI lost 10-40x to them);
# pass --malloc default to see the baselines as glibc leaves them.
# Environment: BIN (default build/bench/allreduce_bench), OUT (default bench/results/zero_copy).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/allreduce_bench}"
OUT="${OUT:-$ROOT/bench/results/zero_copy}"
[[ -x "$BIN" ]] || { echo "missing $BIN: cmake --build build --target allreduce_bench" >&2; exit 1; }
mkdir -p "$OUT"
{
  echo "# $(date -u +%FT%TZ) git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cpu," \
       "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# mpirun -np 2 $BIN --buffer shared --impl strata,strata_private,mpi,gloo,memcpy $*"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN" --buffer shared \
    --impl strata,strata_private,mpi,gloo,memcpy -J "$OUT/np2.json" "$@" 2>&1
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/np2.txt"
