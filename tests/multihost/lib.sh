# Shared by the multi-host scenario scripts (sourced). A scenario starts with
#   source lib.sh; in_testbed --hosts 2 -- "$@"
# which re-runs it inside a fresh test bed (testbed.sh with: removed afterwards whatever
# happens) with TESTBED_ID set; then it launches ranks with `launch` and checks their logs.
# LOGS (default ./<scenario>-logs, replaced on every run) keeps each rank's output.

MULTIHOST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TESTBED="$MULTIHOST_DIR/testbed.sh"

in_testbed() {  # in_testbed [testbed.sh up options] -- "$@"
  local up=()
  while [[ $# -gt 0 && $1 != -- ]]; do up+=("$1"); shift; done
  shift
  if [[ -z ${TESTBED_ID:-} ]]; then exec "$TESTBED" with "${up[@]}" -- "$0" "$@"; fi
  LOGS="${LOGS:-$PWD/$(basename "$0" .sh)-logs}"
  rm -rf "$LOGS"
  mkdir -p "$LOGS"
}

# How long after a fault every rank may take to end, from STRATA_TIMEOUT_MS: one timeout to
# notice, one for the failure record on a store that may be unreachable, one spare, and
# scheduling slack for 4 ranks on a loaded 2-core machine.
end_bound_s() { echo $((3 * $1 / 1000 + 15)); }   # end_bound_s TIMEOUT_MS

# The fault scenarios (a cut link, a wrong secret) run with a short collective timeout, so a
# fault is noticed within seconds; ended_in_time TOOK_S WHAT fails the scenario unless every
# rank was gone within end_bound_s of it.
FAULT_TIMEOUT_MS=8000
ended_in_time() {
  local bound; bound=$(end_bound_s $FAULT_TIMEOUT_MS)
  echo "$2 ended ${1}s after the fault (bound ${bound}s, STRATA_TIMEOUT_MS=$FAULT_TIMEOUT_MS)"
  awk -v t="$1" -v b="$bound" 'BEGIN { exit !(t <= b) }' || fail "$2 took ${1}s to end, over ${bound}s"
}

fail() { echo "FAIL: $*"; exit 1; }

launch() { "$TESTBED" launch "$TESTBED_ID" --logs "$LOGS/$1" "${@:2}"; }   # launch NAME [options] -- CMD
stats() { "$TESTBED" stats "$TESTBED_ID" "$1"; }                             # stats H
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2" | head -1; }          # field NAME "k=v ..."

# Prints every rank's log, prefixed with its rank (CTest shows it on failure).
show_logs() {  # show_logs NAME
  local f
  for f in "$LOGS/$1"/rank*.log; do sed "s/^/[$(basename "$f" .log)] /" "$f"; done
}

# The processes of a test bed cannot see each other's shared memory: a file made in host 0's
# /dev/shm must not appear on host 1 (so a passing test cannot be shared memory in disguise).
check_shm_isolation() {
  local marker; marker="strata-testbed-isolation-$$"
  "$TESTBED" exec "$TESTBED_ID" 0 touch "/dev/shm/$marker"
  if "$TESTBED" exec "$TESTBED_ID" 1 test -e "/dev/shm/$marker" || [[ -e /dev/shm/$marker ]]; then
    fail "test bed: host 0's /dev/shm is visible outside host 0"
  fi
  "$TESTBED" exec "$TESTBED_ID" 0 rm -f "/dev/shm/$marker"
}
