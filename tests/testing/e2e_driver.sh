# Sourced by the end-to-end drivers (tests/torch/*_e2e.sh, tests/pp/*_e2e.sh), which CTest
# runs as `NAME.sh MPIEXEC BINARY [NP]`. e2e_start NAME "$@" sets MPIEXEC and BINARY and makes
# the run folder $dir under $TMPDIR (strata_NAME_XXXXXX), removed at exit unless KEEP is set.
e2e_start() {
  local name="$1"
  shift
  MPIEXEC="$1"
  BINARY="$2"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/strata_${name}_XXXXXX")
  trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
  echo "run dir: $dir"
}
