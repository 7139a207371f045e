#!/usr/bin/env bash
# "security": {"encrypt_inter_node_traffic": true} encrypts exactly the traffic between hosts:
# 2 emulated hosts x 2 ranks broadcast a buffer of a cleartext marker from rank 0, while
# packet captures count the frames that carry the marker in clear, on host 0's link to the
# switch (everything between host 0 and host 1) and on each host's loopback (TCP between
# ranks of one host).
#   plain run (encryption off): the marker crosses the link in clear (the capture works);
#   secure run:                 no marker on the link, and still in clear on a loopback
#                               (no TLS between ranks of one host).
#   encryption_between_hosts.sh HOSTS_COLLECTIVES
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_testbed --hosts 2 -- "$@"
BIN=$1
MARKER="strata-multihost-cleartext-marker"
echo '{"security": {"encrypt_inter_node_traffic": false}}' >"$LOGS/plain.json"
echo '{"security": {"encrypt_inter_node_traffic": true}}' >"$LOGS/secure.json"

# captured NAME CONFIG: runs the job under three captures; prints "link=N lo=M" (frames
# with the marker on host 0's eth0, and on both hosts' loopbacks together). Not the switch's
# br0: frames the bridge forwards between its ports do not reach a capture on br0 itself.
captured() {
  local name=$1 config=$2 stop="$LOGS/$1.stop" where pids=() rc=0
  rm -f "$stop"
  for where in "0 eth0" "0 lo" "1 lo"; do
    set -- $where
    "$TESTBED" exec "$TESTBED_ID" "$1" python3 "$MULTIHOST_DIR/sniff.py" "$2" "$MARKER" "$stop" \
      >"$LOGS/$name.sniff-$1-$2" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < 300; i++)); do
    [[ $(cat "$LOGS/$name".sniff-* | grep -c '^sniff ready') -eq 3 ]] && break
    sleep 0.1
  done
  launch "$name" --per-host 2 --timeout 120 --env STRATA_TIMEOUT_MS=60000 --env STRATA_JOB_SECRET=multihost-test \
    --env STRATA_CONFIG="$config" -- "$BIN" --marker "$MARKER" >&2 || rc=$?
  touch "$stop"
  wait "${pids[@]}" || true
  show_logs "$name" >&2
  cat "$LOGS/$name".sniff-* >&2
  ((rc == 0)) || fail "$name: a rank failed"
  local link lo0 lo1
  link=$(field marker_frames "$(grep '^sniff iface=eth0' "$LOGS/$name.sniff-0-eth0")")
  lo0=$(field marker_frames "$(grep '^sniff iface=lo' "$LOGS/$name.sniff-0-lo")")
  lo1=$(field marker_frames "$(grep '^sniff iface=lo' "$LOGS/$name.sniff-1-lo")")
  echo "link=${link:-missing} lo=$((${lo0:-0} + ${lo1:-0}))"
}

plain=$(captured plain "$LOGS/plain.json")
echo "plain run: frames with the marker in clear: $plain"
[[ $(field link "$plain") =~ ^[1-9] ]] || fail "plain run: the capture saw no marker between the hosts ($plain)"
secure=$(captured secure "$LOGS/secure.json")
echo "secure run: frames with the marker in clear: $secure"
[[ $(field link "$secure") == 0 ]] || fail "secure run: the marker crossed between hosts in clear ($secure)"
[[ $(field lo "$secure") =~ ^[1-9] ]] || fail "secure run: no cleartext within a host ($secure): TLS where none is needed?"
echo PASS
