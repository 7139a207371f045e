#!/usr/bin/env bash
# The job secret never crosses the network in clear (docs/security.md): mpirun on 2 emulated
# hosts x 2 ranks, no secret given, while a capture writes every frame of host 0's link (all
# that host 0 exchanges with host 1 and with mpirun, MPI's data path included) to a pcap.
#   exchange run (encryption off): rank 0 draws the secret and seals it for each rank
#       (X25519); every rank writes the secret in force and its keys to a local file
#       (strata_job_key_probe), and its log too (STRATA_LOG_FILE): nothing of the test's own
#       crosses the link.
#       No TCP stream and no frame of the capture holds the secret (as text or bytes) or any
#       derived key, while rank 0's X25519 public key is in it (so the capture does see the
#       exchange's traffic: before this exchange the secret itself travelled there, in an
#       MPI_Allgatherv);
#   refused run (STRATA_TLS=1): encryption across hosts without a secret exits 78, naming
#       the ways to give one;
#   "-x" run: a secret passed with `mpirun -x` is in the capture in clear, as docs/security.md
#       warns.
#   secret_exchange.sh JOB_KEY_PROBE
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_testbed --hosts 2 -- "$@"
BIN=$1

hex_of() { python3 -c 'import sys; print(sys.argv[1].encode().hex())' "$1"; }   # text -> hex of its bytes

# captured NAME [MPIRUN_ARGS...]: runs the probe under a capture of host 0's eth0 into
# $LOGS/NAME.pcap; mpirun's output in $LOGS/NAME.log, the ranks' logs in $LOGS/NAME/rank<R>.log
# and their keys in $LOGS/NAME/rank<R>.keys; prints mpirun's exit code.
captured() {
  local name=$1 stop="$LOGS/$1.stop" rc=0 pid; shift
  mkdir -p "$LOGS/$name"
  rm -f "$stop"
  "$TESTBED" exec "$TESTBED_ID" 0 python3 "$MULTIHOST_DIR/sniff.py" eth0 "" "$stop" "$LOGS/$name.pcap" \
    >"$LOGS/$name.sniff" 2>&1 &
  pid=$!
  for ((i = 0; i < 300; i++)); do grep -q '^sniff ready' "$LOGS/$name.sniff" && break; sleep 0.1; done
  timeout 120 "$TESTBED" mpirun "$TESTBED_ID" -np 4 --map-by ppr:2:node -x STRATA_TIMEOUT_MS=60000 \
    -x STRATA_LOG_LEVEL=INFO -x STRATA_LOG_FILE="$LOGS/$name/rank%r.log" "$@" "$BIN" "$LOGS/$name" \
    >"$LOGS/$name.log" 2>&1 || rc=$?
  cat "$LOGS/$name"/rank*.log >>"$LOGS/$name.log" 2>/dev/null || true
  touch "$stop"
  wait "$pid" || true
  cat "$LOGS/$name.sniff" >&2
  echo "$rc"
}

# 1. The exchange.
rc=$(captured exchange)
cat "$LOGS/exchange.log"
((rc == 0)) || fail "exchange: mpirun exited $rc"
[[ $(grep -c '^allreduce ok' "$LOGS/exchange.log") == 4 ]] || fail "exchange: not every rank's AllReduce was right"
keys=$(cat "$LOGS/exchange"/rank*.keys | sed 's/^job-key rank=[0-9]* //' | sort -u)
[[ $(cat "$LOGS/exchange"/rank*.keys | grep -c '^job-key ') == 4 && $(wc -l <<<"$keys") == 1 ]] ||
  fail "exchange: the ranks do not hold one secret: $keys"
secret_hex=$(field secret "$keys")
needles=("secret_text=$secret_hex")  # the secret's own bytes (64 hex characters of text)
raw=$(python3 -c 'import sys; print(bytes.fromhex(sys.argv[1]).decode())' "$secret_hex")
[[ $raw =~ ^[0-9a-f]{64}$ ]] || fail "exchange: the drawn secret is not 64 hex characters: $raw"
needles+=("secret_bytes=$raw")  # the 32 bytes it spells, should a sender decode it
for use in store tcp tls; do
  key=$(field "$use" "$keys")
  needles+=("${use}_key=$key" "${use}_key_text=$(hex_of "$key")")
done
pub=$(sed -nE "s/.*rank 0's public key ([0-9a-f]{64}).*/\1/p" "$LOGS/exchange.log" | head -1)
[[ -n $pub ]] || fail "exchange: no rank logged rank 0's public key"
needles+=("rank0_public_key_text=$(hex_of "$pub")")
found=$(python3 "$MULTIHOST_DIR/pcap_search.py" "$LOGS/exchange.pcap" "${needles[@]}")
echo "$found"
[[ $(field tcp_bytes "$found") -gt 100000 ]] || fail "exchange: the capture holds almost nothing"
[[ $(sed -n 's/^needle rank0_public_key_text=//p' <<<"$found") -ge 1 ]] ||
  fail "exchange: rank 0's public key is not in the capture: it does not see the exchange's traffic"
if grep -E '^needle (secret|store|tcp|tls)' <<<"$found" | grep -qv '=0$'; then
  fail "exchange: the secret or a key derived from it crossed host 0's link"
fi
echo "exchange: neither the secret nor its keys crossed the link; rank 0's public key did"

# 2. Encryption across hosts without a secret: refused on every rank.
rc=$(captured refused -x STRATA_TLS=1)
cat "$LOGS/refused.log"
((rc == 78)) || fail "refused: mpirun exited $rc, not 78"
grep -q 'encrypt_inter_node_traffic is on across several hosts but the job has no secret' "$LOGS/refused.log" ||
  fail "refused: no rank said why"
grep -q 'STRATA_JOB_SECRET_FILE' "$LOGS/refused.log" || fail "refused: the ways to give a secret are not named"
ls "$LOGS/refused"/*.keys >/dev/null 2>&1 && fail "refused: a rank started anyway"
echo "refused: exit 78 with the ways to give a secret"

# 3. What docs/security.md warns of: `mpirun -x` carries a secret to the other hosts in clear.
given=$(openssl rand -hex 32)
rc=$(captured given -x STRATA_JOB_SECRET="$given")
((rc == 0)) || { cat "$LOGS/given.log"; fail "given: mpirun exited $rc"; }
found=$(python3 "$MULTIHOST_DIR/pcap_search.py" "$LOGS/given.pcap" "given=$(hex_of "$given")")
echo "$found"
[[ $(sed -n 's/^needle given=//p' <<<"$found") -ge 1 ]] || fail "given: the -x secret was not seen on the link"
echo "given: a secret passed with mpirun -x crosses the link in clear (docs/security.md says so)"
echo PASS
