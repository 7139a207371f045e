#!/usr/bin/env bash
# Tuning sweep for Strata's shared-memory allreduce (builds nothing): runs allreduce_bench
# (strata + memcpy reference, 2 ranks) once per configuration, ROUNDS times with the
# configurations interleaved, and prints Strata's median busbw per size and configuration
# plus the best configuration per size, separately for the two host modes (summarize.py). Outputs: $OUT/<config>_r<k>.json, $OUT/summary.txt.
#   bench/sweep_allreduce.sh                  # the default configuration list below
#   CONFIGS="default slot256K" ROUNDS=5 bench/sweep_allreduce.sh -e 64M
# A configuration is a name from the table in this script; extra arguments go to every run.
# Each run waits for a quiet machine first (quiet.sh: QUIET_WAIT_S, QUIET_CORES).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build/bench/allreduce_bench}"
OUT="${OUT:-$ROOT/bench/results/sweep}"
ROUNDS="${ROUNDS:-3}"
IMPLS="${IMPLS:-strata,memcpy}"
NP="${NP:-2}"
mkdir -p "$OUT"
# shellcheck source=quiet.sh
source "$ROOT/bench/quiet.sh"

# name -> "mpirun options | environment"
declare -A CFG=(
  [default]="|"
  [bindnone]="--bind-to none|"
  [chunk128K]="|STRATA_CHUNK_BYTES=131072"
  [chunk256K]="|STRATA_CHUNK_BYTES=262144"
  [chunk512K]="|STRATA_CHUNK_BYTES=524288"
  [slot256K]="|STRATA_SHM_SLOT_BYTES=262144"
  [slot512K]="|STRATA_SHM_SLOT_BYTES=524288"
  [slot2M]="|STRATA_SHM_SLOT_BYTES=2097152"
  [slot4M]="|STRATA_SHM_SLOT_BYTES=4194304"
  [slot4M_chunk256K]="|STRATA_SHM_SLOT_BYTES=4194304 STRATA_CHUNK_BYTES=262144"
  [oneshot_slot4M]="|STRATA_SHM_SLOT_BYTES=4194304 STRATA_ALLREDUCE_ALGO=shm_oneshot"
  [chunked]="|STRATA_ALLREDUCE_ALGO=shm_chunked"
  [bindnone_chunk256K]="--bind-to none|STRATA_CHUNK_BYTES=262144"
  [tcp]="|STRATA_TRANSPORT=tcp"
  [tcp_ring]="|STRATA_TRANSPORT=tcp STRATA_ALLREDUCE_ALGO=tcp_ring"
  [tcp_direct]="|STRATA_TRANSPORT=tcp STRATA_ALLREDUCE_ALGO=tcp_direct"
)
CONFIGS="${CONFIGS:-default bindnone chunk256K chunk512K slot256K slot512K slot2M slot4M slot4M_chunk256K oneshot_slot4M chunked bindnone_chunk256K}"

for k in $(seq 1 "$ROUNDS"); do
  for c in $CONFIGS; do
    spec="${CFG[$c]}"
    read -r -a mopts <<<"${spec%%|*}"
    xs=()
    for kv in ${spec#*|}; do xs+=(-x "$kv"); done
    wait_quiet "$OUT/load.txt"
    echo "== round $k $c: ${mopts[*]} ${xs[*]}" >&2
    # ONESHOT beyond the slot falls back to auto with a warning; keep stderr with the output.
    mpirun --allow-run-as-root --oversubscribe -np "$NP" "${mopts[@]}" "${xs[@]}" "$BIN" --impl "$IMPLS" \
      -J "$OUT/${c}_r$k.json" "$@" >"$OUT/${c}_r$k.txt" 2>&1
  done
done

/usr/bin/python3 "$ROOT/bench/summarize.py" sweep "$OUT" "$ROUNDS" $CONFIGS | tee "$OUT/summary.txt"
