#!/usr/bin/env bash
# Emulated hosts on one machine, for multi-host tests and benchmarks (needs root).
#
# Each host has its own network namespace (one interface, eth0, address 10.213.0.<h+1>/24,
# and its own loopback), its own UTS namespace (hostname host<h>) and its own mount namespace
# (a private tmpfs on /dev/shm, so shared memory cannot cross hosts, and an /etc/hosts naming
# every host). The hosts' eth0 are cabled to a bridge in a "switch" network namespace (at
# 10.213.0.254, where mpirun runs as the head node), so nothing is added to the machine's own
# network: every test bed can use the same addresses and interface names. Namespaces are
# named strata-tb-<id>-{sw,h<h>}; state lives in /run/strata-testbed/<id>/.
#
#   testbed.sh up [--hosts N] [--rate RATE] [--id ID]  create; prints the id (RATE: tc tbf rate
#                                                     on every host's eth0, e.g. 1gbit)
#   testbed.sh with [up options] -- CMD...            up, CMD with TESTBED_ID (and TESTBED=this
#                                                     script) exported, then down whatever happens
#   testbed.sh exec ID H CMD...                       CMD on host H (H=sw: in the switch's
#                                                     network namespace, where br0 sees all)
#   testbed.sh launch ID [options] -- CMD...          CMD as the ranks of one job (below)
#   testbed.sh cut ID H                               unplug host H's cable (its switch port down)
#   testbed.sh stats ID H                             "eth0_tx=B eth0_rx=B lo_tx=B" (bytes)
#   testbed.sh mpirun ID [mpirun args...]             mpirun on the switch, ranks on the hosts
#   testbed.sh down ID                                kill what runs there, remove everything
#   testbed.sh gc                                     remove test beds whose creator is gone
#
# launch starts PER_HOST ranks on every host with the torchrun variables (RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR=host0, MASTER_PORT) and a job
# secret, each rank's output in LOGS/rank<R>.log, waits at most TIMEOUT seconds (then
# SIGTERM, 2 s later SIGKILL), and prints one line per rank, "rank=R host=H exit=C
# seconds=T" (exit=timeout when killed), then "launch: ranks=N failed=F seconds=T logs=DIR".
# Exit status 0 when every rank exited 0.
#   --per-host L (2)  --timeout S (60)  --logs DIR (a new temporary directory)  --port P (29500)
#   --env K=V (every rank)  --host-env H K=V (ranks of host H; after --env, so it wins)
#   --no-secret (by default every rank gets STRATA_JOB_SECRET=<fresh per launch>, as a
#   scheduler would give a job reachable over the network; --env STRATA_JOB_SECRET=... wins)
set -eEuo pipefail
shopt -s inherit_errexit

readonly STATE_ROOT=/run/strata-testbed
readonly SUBNET=10.213.0
readonly SWITCH_ADDR=$SUBNET.254
SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

die() { echo "testbed: $*" >&2; exit 2; }
netns_of() { echo "strata-tb-$1-$2"; }            # netns_of ID sw|h<H>
state_of() { echo "$STATE_ROOT/$1"; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
seconds_since() { local ms=$(($(now_ms) - $1)); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }
host_addr() { echo "$SUBNET.$(($1 + 1))"; }

need_tools() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network and mount namespaces)"
  local t
  for t in ip nsenter unshare mount umount; do
    command -v "$t" >/dev/null || die "missing $t (scripts/install-deps installs iproute2, util-linux, mount)"
  done
}

num_hosts() {
  local d; d=$(state_of "$1")
  [[ -f $d/hosts ]] || die "no test bed $1 (testbed.sh up creates one)"
  cat "$d/hosts"
}

check_host() {  # check_host ID H
  [[ $2 =~ ^[0-9]+$ ]] && (($2 < $(num_hosts "$1"))) || die "test bed $1 has no host $2"
}

# Runs CMD inside host H's namespaces (network, hostname, mount), replacing this process.
enter() {  # enter ID H CMD...
  local id=$1 h=$2 d; shift 2
  d=$(state_of "$id")
  exec nsenter --net="/run/netns/$(netns_of "$id" "h$h")" --uts="$d/h$h.uts" --mount="$d/h$h.mnt" -- "$@"
}

cmd_up() {
  local hosts=2 rate="" id="" h
  while [[ $# -gt 0 ]]; do
    case $1 in
      --hosts) hosts=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      --id) id=$2; shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  [[ $hosts =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 200)) || die "up: --hosts $hosts is not 1..200"
  need_tools
  cmd_gc >/dev/null 2>&1 || true
  # Unique per run (pid + random + time), short enough for every name built from it.
  [[ -n $id ]] || id=$(printf '%x%04x%x' $$ $RANDOM "$(date +%s)" | tail -c 10)
  [[ $id =~ ^[A-Za-z0-9]+$ ]] || die "up: --id $id must be letters and digits"
  local d sw; d=$(state_of "$id"); sw=$(netns_of "$id" sw)
  [[ ! -e $d ]] || die "up: test bed $id exists already"
  # The owner file exists before the directory appears, so a concurrent gc never sees a
  # test bed without its creator.
  mkdir -p "$STATE_ROOT"
  local tmp; tmp=$(mktemp -d "$STATE_ROOT/.new.XXXXXX")
  echo "${TESTBED_OWNER:-$PPID}" >"$tmp/owner"
  mv -T "$tmp" "$d"
  # From here on a failure removes what was made.
  trap 'cmd_down "$id" >/dev/null 2>&1 || true' ERR
  # A private mount point: the namespace files bound below must not propagate anywhere.
  mount --bind "$d" "$d"
  mount --make-private "$d"
  echo "$hosts" >"$d/hosts"
  {
    echo "127.0.0.1 localhost"
    for ((h = 0; h < hosts; h++)); do echo "$(host_addr "$h") host$h"; done
    echo "$SWITCH_ADDR switch"
  } >"$d/etc-hosts"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" addr add "$SWITCH_ADDR/24" dev br0
  ip -n "$sw" link set br0 up
  for ((h = 0; h < hosts; h++)); do
    local ns; ns=$(netns_of "$id" "h$h")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$sw" link add "h$h" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "h$h" master br0 up
    ip -n "$ns" addr add "$(host_addr "$h")/24" dev eth0
    ip -n "$ns" link set eth0 up
    [[ -z $rate ]] || ip -n "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
    touch "$d/h$h.uts" "$d/h$h.mnt"
    # The new mount namespace drops its copy of the state directory (which holds the other
    # hosts' namespace files), so no host keeps another's namespaces alive.
    unshare --uts="$d/h$h.uts" --mount="$d/h$h.mnt" --propagation private -- sh -ec "
      hostname host$h
      mount -t tmpfs -o mode=1777,size=50% strata-shm-host$h /dev/shm
      mount --bind '$d/etc-hosts' /etc/hosts
      umount -l '$d'"
  done
  trap - ERR
  echo "$id"
}

cmd_down() {
  local id=$1 d h pids
  d=$(state_of "$id")
  [[ -d $d ]] || return 0
  local hosts; hosts=$(cat "$d/hosts" 2>/dev/null || echo 0)
  # Whatever still runs on a host or on the switch (ranks, orted, mpirun) goes first.
  for ns in $(ip netns list 2>/dev/null | awk -v p="strata-tb-$id-" 'index($1, p) == 1 {print $1}'); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  done
  for ((h = 0; h < hosts; h++)); do
    umount "$d/h$h.mnt" 2>/dev/null || true
    umount "$d/h$h.uts" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk -v p="strata-tb-$id-" 'index($1, p) == 1 {print $1}'); do
    ip netns delete "$ns" 2>/dev/null || true
  done
  umount "$d" 2>/dev/null || true
  rm -rf "$d"
}

# Test beds whose creator (the process that ran `up`, or TESTBED_OWNER) no longer exists:
# left behind by a test killed on a timeout. Also orphaned namespaces without a state dir.
cmd_gc() {
  need_tools
  local d id owner
  for d in "$STATE_ROOT"/*/; do
    [[ -d $d ]] || continue
    id=$(basename "$d")
    owner=$(cat "$d/owner" 2>/dev/null || echo "")
    if [[ -z $owner ]] || ! kill -0 "$owner" 2>/dev/null; then
      echo "testbed: removing $id (creator ${owner:-unknown} is gone)"
      cmd_down "$id"
    fi
  done
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^strata-tb-/ {print $1}'); do
    id=${ns#strata-tb-}; id=${id%-*}
    [[ -d $(state_of "$id") ]] || { echo "testbed: removing orphan $ns"; ip netns delete "$ns" || true; }
  done
}

cmd_with() {
  local up_args=()
  while [[ $# -gt 0 && $1 != -- ]]; do up_args+=("$1"); shift; done
  [[ $# -gt 1 ]] || die "with: usage: testbed.sh with [up options] -- CMD..."
  shift
  local rc=0
  WITH_ID=$(TESTBED_OWNER=$$ cmd_up "${up_args[@]}")
  trap 'cmd_down "$WITH_ID"' EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  TESTBED_ID=$WITH_ID TESTBED=$SELF "$@" || rc=$?
  return "$rc"
}

cmd_launch() {
  local id=$1; shift
  local per_host=2 timeout=60 logs="" port=29500 envs=() host_envs=() no_secret=0
  while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
      --per-host) per_host=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --logs) logs=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --env) envs+=("$2"); shift 2 ;;
      --host-env) host_envs+=("$2" "$3"); shift 3 ;;
      --no-secret) no_secret=1; shift ;;
      *) die "launch: unknown option $1" ;;
    esac
  done
  [[ $# -gt 1 ]] || die "launch: usage: testbed.sh launch ID [options] -- CMD..."
  shift
  local hosts; hosts=$(num_hosts "$id")
  [[ -n $logs ]] || logs=$(mktemp -d /tmp/strata-testbed-logs.XXXXXX)
  mkdir -p "$logs"
  local world=$((hosts * per_host)) h l r i
  # A job reachable over the network needs a secret (docs/security.md), as a scheduler would
  # give one: a fresh one per launch unless the caller passes its own or none.
  local secret=("STRATA_JOB_SECRET=testbed-$id-$RANDOM$RANDOM$RANDOM")
  ((no_secret == 0)) || secret=()
  local -a pids hostof started
  for ((h = 0; h < hosts; h++)); do
    for ((l = 0; l < per_host; l++)); do
      r=$((h * per_host + l))
      local rank_env=(RANK=$r WORLD_SIZE=$world LOCAL_RANK=$l LOCAL_WORLD_SIZE=$per_host GROUP_RANK=$h
                      MASTER_ADDR=host0 MASTER_PORT=$port "${secret[@]}" "${envs[@]}")
      for ((i = 0; i < ${#host_envs[@]}; i += 2)); do
        [[ ${host_envs[i]} != "$h" ]] || rank_env+=("${host_envs[i + 1]}")
      done
      (enter "$id" "$h" env "${rank_env[@]}" "$@") >"$logs/rank$r.log" 2>&1 &
      pids[r]=$!
      hostof[r]=$h
      started[r]=$(now_ms)
    done
  done
  # Reap ranks as they end; past the deadline the rest are killed.
  local -a rc took
  local left=$world deadline=$((SECONDS + timeout)) failed=0 start; start=$(now_ms)
  while ((left > 0)); do
    for ((r = 0; r < world; r++)); do
      [[ -z ${rc[r]:-} ]] || continue
      if ! kill -0 "${pids[r]}" 2>/dev/null; then
        rc[r]=0; wait "${pids[r]}" || rc[r]=$?
        took[r]=$(seconds_since "${started[r]}"); left=$((left - 1))
      fi
    done
    if ((left > 0 && SECONDS >= deadline)); then
      for ((r = 0; r < world; r++)); do [[ -n ${rc[r]:-} ]] || kill -TERM "${pids[r]}" 2>/dev/null || true; done
      sleep 2
      for ((r = 0; r < world; r++)); do
        [[ -n ${rc[r]:-} ]] && continue
        kill -KILL "${pids[r]}" 2>/dev/null || true
        wait "${pids[r]}" 2>/dev/null || true
        rc[r]=timeout; took[r]=$(seconds_since "${started[r]}"); left=$((left - 1))
      done
    fi
    ((left == 0)) || sleep 0.1
  done
  for ((r = 0; r < world; r++)); do
    echo "rank=$r host=${hostof[r]} exit=${rc[r]} seconds=${took[r]}"
    [[ ${rc[r]} == 0 ]] || failed=$((failed + 1))
  done >"$logs/summary"
  cat "$logs/summary"
  echo "launch: ranks=$world failed=$failed seconds=$(seconds_since "$start") logs=$logs" | tee -a "$logs/summary"
  ((failed == 0))
}

# Open MPI across the hosts: mpirun runs in the switch namespace (the head node), starts one
# orted per host through this script as its rsh agent, and Open MPI sees N distinct nodes
# (vader within a host, TCP between hosts).
cmd_mpirun() {
  local id=$1; shift
  local hosts d; hosts=$(num_hosts "$id"); d=$(state_of "$id")
  local hostfile=$d/mpi-hostfile h
  for ((h = 0; h < hosts; h++)); do echo "host$h slots=64"; done >"$hostfile"
  exec nsenter --net="/run/netns/$(netns_of "$id" sw)" -- \
    mpirun --allow-run-as-root --hostfile "$hostfile" --mca plm_rsh_agent "$SELF rsh $id" \
    --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_tcp_if_include "$SUBNET.0/24" \
    --mca btl vader,tcp,self --bind-to none --mca mpi_yield_when_idle 1 "$@"
}

# rsh agent for mpirun: `rsh ID host<H> CMD...` runs the (shell) command line on host H.
cmd_rsh() {
  local id=$1 host=$2; shift 2
  [[ $host =~ ^host([0-9]+)$ ]] || die "rsh: unknown host $host"
  local h=${BASH_REMATCH[1]}
  check_host "$id" "$h"
  enter "$id" "$h" sh -c "$*"
}

cmd_stats() {
  local id=$1 h=$2; check_host "$id" "$h"
  local ns; ns=$(netns_of "$id" "h$h")
  local tx rx lo
  tx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)
  rx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)
  lo=$(ip netns exec "$ns" cat /sys/class/net/lo/statistics/tx_bytes)
  echo "eth0_tx=$tx eth0_rx=$rx lo_tx=$lo"
}

main() {
  [[ $# -ge 1 ]] || { sed -n '2,/^set -euo/p' "$SELF" | sed '$d'; exit 2; }
  local cmd=$1; shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) [[ $# -eq 1 ]] || die "usage: down ID"; need_tools; cmd_down "$1" ;;
    gc) cmd_gc ;;
    with) cmd_with "$@" ;;
    exec) [[ $# -ge 3 ]] || die "usage: exec ID H|sw CMD..."
          if [[ $2 == sw ]]; then num_hosts "$1" >/dev/null; exec nsenter --net="/run/netns/$(netns_of "$1" sw)" -- "${@:3}"; fi
          check_host "$1" "$2"; enter "$@" ;;
    launch) [[ $# -ge 1 ]] || die "usage: launch ID [options] -- CMD..."; cmd_launch "$@" ;;
    cut) [[ $# -eq 2 ]] || die "usage: cut ID H"; check_host "$1" "$2"
         ip -n "$(netns_of "$1" sw)" link set "h$2" down ;;
    stats) [[ $# -eq 2 ]] || die "usage: stats ID H"; cmd_stats "$@" ;;
    mpirun) [[ $# -ge 1 ]] || die "usage: mpirun ID [args...]"; cmd_mpirun "$@" ;;
    rsh) [[ $# -ge 3 ]] || die "usage: rsh ID host<H> CMD..."; cmd_rsh "$@" ;;
    *) die "unknown command $cmd (up, with, exec, launch, cut, stats, mpirun, down, gc)" ;;
  esac
}

main "$@"
