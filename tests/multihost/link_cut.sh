#!/usr/bin/env bash
# A cable pulled mid-run: 2 emulated hosts x 2 ranks run AllReduce in a loop
# (strata_fault_worker --mode loop); once every rank is past init, host 1's switch port goes
# down (`ip link set h1 down` in the switch namespace: no FIN, no RST, the packets just stop).
# Every rank must end on its own with a network error (NetworkError, or its kind TimeoutError)
# that names the peer it waited for (on each host, some rank names one across the cut), none may be killed by the launcher's deadline, and the last one must be
# gone within a bound derived from STRATA_TIMEOUT_MS.
#   link_cut.sh FAULT_WORKER
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_testbed --hosts 2 -- "$@"
BIN=$1

launch run --per-host 2 --timeout 120 --env STRATA_TIMEOUT_MS=$FAULT_TIMEOUT_MS -- \
  "$BIN" --mode loop --iters 1000000000 --count 65536 >"$LOGS/launch.txt" 2>&1 &
launcher=$!
trap 'kill $launcher 2>/dev/null || true' EXIT
# Every rank past init (a generous wait: the machine may be busy).
for ((i = 0; i < 600; i++)); do
  ready=$(cat "$LOGS"/run/rank*.log 2>/dev/null | grep -c '^ready ' || true)
  ((ready == 4)) && break
  kill -0 $launcher 2>/dev/null || break
  sleep 0.1
done
((ready == 4)) || { show_logs run; fail "only $ready of 4 ranks got past init"; }
sleep 0.5  # some AllReduces in flight (not needed for correctness: any moment after init will do)
cut_at=$(date +%s.%N)
"$TESTBED" cut "$TESTBED_ID" 1
echo "cut host1's link at $(date -Is)"
rc=0
wait $launcher || rc=$?
trap - EXIT
ended_at=$(date +%s.%N)
cat "$LOGS/launch.txt"
show_logs run
((rc != 0)) || fail "every rank exited 0 although host 1 was cut off"

ended_in_time "$(awk -v a="$cut_at" -v b="$ended_at" 'BEGIN { printf "%.1f", b - a }')" "all ranks"
for r in 0 1 2 3; do
  log="$LOGS/run/rank$r.log"
  line=$(grep "^rank=$r " "$LOGS/launch.txt")
  code=$(field exit "$line")
  [[ $code == 3 || $code == 4 ]] ||
    fail "rank $r exited '$code', not 3 (NetworkError) or 4 (TimeoutError): $(grep '^error' "$log" || echo 'no error line')"
  grep -q '^error-type: \(NetworkError\|TimeoutError\)$' "$log" || fail "rank $r: no network error type reported"
  # The error names the peer this rank waited for (not itself).
  grep -q "^error: .*rank [0-9]" "$log" || fail "rank $r: its error names no peer: $(grep '^error: ' "$log")"
  # No `| grep -q` under pipefail: grep -q exits at its first match and the writer before it
  # can die of SIGPIPE, failing the pipeline (the across-the-cut check below failed that way).
  named=$(grep "^error: " "$log" | grep -o "rank [0-9]*")
  grep -qv "^rank $r\$" <<<"$named" ||
    fail "rank $r: its error names no rank but itself: $(grep '^error: ' "$log")"
done
# A rank may time out waiting for a peer on its own host that is itself stuck on the link
# (both waits race), but on each host some rank must name a peer across the cut: in its error,
# or in the " (here: ...)" line that follows an error agreed from another rank (the two 8 s
# waits can end within milliseconds, and then the host-local one may be agreed first).
for h in 0 1; do
  if ((h == 0)); then across='[23]'; else across='[01]'; fi
  grep -hq "^\(error: \| (here: \).*\(from\|to\) rank $across\b" "$LOGS/run/rank$((2 * h)).log" \
    "$LOGS/run/rank$((2 * h + 1)).log" || fail "no rank of host$h names a peer across the cut"
done
echo PASS
