# Sourced by the run scripts: wait_quiet LOGFILE waits until the whole machine was
# (almost) idle for one second (< QUIET_CORES busy cores, default 0.15), at most
# QUIET_WAIT_S seconds (default 60), and appends what it saw to LOGFILE; machine_info (at
# the end) prints what every run's machine.txt records; bench_start (below) the common start.
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

wait_quiet() {
  local log=$1 waited=0 b0 b1 cores
  while :; do
    b0=$(busy_jiffies); sleep 1; b1=$(busy_jiffies)
    cores=$(awk -v d=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", d/hz}')
    if awk -v c="$cores" -v q="${QUIET_CORES:-0.15}" 'BEGIN{exit !(c < q)}' || (( waited >= ${QUIET_WAIT_S:-60} )); then
      echo "$(date +%T) busy cores before run: $cores (waited ${waited}s) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$log"
      return
    fi
    waited=$((waited + 1))
  done
}

# machine_info BIN ARGS...: what a run's machine.txt records (date, CPU, kernel, git SHA,
# binary, STRATA_* variables, MPI version, arguments). Needs ROOT (the repository).
machine_info() {
  local bin=$1; shift
  echo "date: $(date -Is)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "kernel: $(uname -r)"
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo uncommitted)" \
       "($(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l) modified tracked files)"
  echo "binary: $bin ($(date -r "$bin" -Is))"
  echo "strata env: $(env | grep '^STRATA_' | tr '\n' ' ')"
  echo "mpi: $(mpirun --version 2>/dev/null | head -1)"
  echo "args: $*"
}

# bench_start OUT BIN...: every BIN built (else a hint and exit 1), Open MPI allowed to run as
# root, OUT created, and SCRATCH a temporary folder removed when the script exits.
bench_start() {
  local out=$1 bin; shift
  for bin in "$@"; do
    [ -x "$bin" ] || { echo "build it first: $bin is missing (scripts/build, or cmake --build build --target benches)" >&2; exit 1; }
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mkdir -p "$out"
  SCRATCH=$(mktemp -d)
  trap 'rm -rf "$SCRATCH"' EXIT
}

# glibc tunables equal to the malloc policy strata::init applies by default ("retain":
# src/core/malloc_policy.cpp, docs/config.md): for runs that must allocate as Strata does
# without calling strata::init (PyTorch DDP, step_ops_bench).
RETAIN_GLIBC_TUNABLES="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"

# median: the median of the numbers on stdin, one per line (run_scaling, run_core_drift).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
