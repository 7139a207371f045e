# Sourced by the run scripts: wait_quiet LOGFILE waits until the whole machine was
# (almost) idle for one second (< QUIET_CORES busy cores, default 0.15), at most
# QUIET_WAIT_S seconds (default 60), and appends what it saw to LOGFILE.
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
