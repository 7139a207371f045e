#!/usr/bin/env bash
# 2 emulated hosts x 2 ranks (torchrun-style launch): every collective checked against the
# exact result (strata_hosts_collectives), and the evidence that the hierarchical AllReduce
# really ran as designed, from the runtime and from the kernel rather than from the config:
#   - each rank sees its own host (hostname host<h>), 2 hosts, 2 local ranks;
#   - the bulk AllReduce used "hierarchical"; a group within a host used shared memory, a
#     group of one rank per host TCP;
#   - bytes: each host's link (eth0) carried about one buffer per AllReduce (2 local ranks
#     x a half-buffer shard, the algorithm's S/L per rank), and its loopback almost nothing
#     (ranks of one host exchanged the data through shared memory, not TCP).
#   hierarchical_allreduce.sh BINARY
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_testbed --hosts 2 -- "$@"
BIN=$1
BULK=$((16 << 20)) REPEATS=8

check_shm_isolation
before0=$(stats 0); before1=$(stats 1)
rc=0
launch run --per-host 2 --timeout 120 --env STRATA_TIMEOUT_MS=60000 -- \
  "$BIN" --bulk-bytes "$BULK" --repeats "$REPEATS" || rc=$?
after0=$(stats 0); after1=$(stats 1)
show_logs run
((rc == 0)) || fail "a rank failed (see the logs above)"

for r in 0 1 2 3; do
  log="$LOGS/run/rank$r.log"
  h=$((r / 2)) l=$((r % 2))
  grep -q "^result: ok " "$log" || fail "rank $r: no 'result: ok'"
  topo=$(grep '^topology ' "$log")
  [[ $(field host "$topo") == "host$h" ]] || fail "rank $r runs on $(field host "$topo"), not host$h"
  [[ $(field node "$topo") == "$h/2" ]] || fail "rank $r: node $(field node "$topo"), want $h/2"
  [[ $(field local "$topo") == "$l/2" ]] || fail "rank $r: local rank $(field local "$topo"), want $l/2"
  grep -q "group=ranks=4 hosts=2 " <<<"$topo" || fail "rank $r: world is not 4 ranks on 2 hosts: $topo"
  bulk=$(grep '^bulk ' "$log")
  [[ $(field algo "$bulk") == hierarchical ]] || fail "rank $r: bulk AllReduce ran $(field algo "$bulk")"
  sub=$(grep '^subgroup kind=host ' "$log")
  [[ $(field algo "$sub") == shm_* ]] || fail "rank $r: the group of its host ran $(field algo "$sub")"
  sub=$(grep '^subgroup kind=cross_host ' "$log")
  [[ $(field algo "$sub") == tcp_* ]] || fail "rank $r: the group across hosts ran $(field algo "$sub")"
done

# Bytes on the wire, per host, against the bulk phase's REPEATS x BULK (the other checks
# add a few MiB at most; TCP/IP headers ~1%).
expect=$((REPEATS * BULK))
for h in 0 1; do
  b="before$h" a="after$h"
  tx=$(( $(field eth0_tx "${!a}") - $(field eth0_tx "${!b}") ))
  lo=$(( $(field lo_tx "${!a}") - $(field lo_tx "${!b}") ))
  echo "host$h: eth0 sent $tx bytes, loopback $lo bytes; bulk AllReduce payload $expect bytes"
  awk -v t="$tx" -v e="$expect" 'BEGIN { exit !(t >= 0.95 * e && t <= 1.3 * e) }' ||
    fail "host$h's link carried $tx bytes, not ~1x the $expect of the hierarchical algorithm (tcp_ring: 1.5x)"
  awk -v l="$lo" -v e="$expect" 'BEGIN { exit !(l < 0.1 * e) }' ||
    fail "host$h's loopback carried $lo bytes: its ranks exchanged data over TCP, not shared memory"
done
echo PASS
