#!/usr/bin/env bash
# scripts/bench never writes over earlier raw outputs (bench/RESULTS.md cites them): by default
# it writes to a new dated folder of bench/results/, and it refuses an --out that exists and is
# not empty, before installing, building or running anything (--dry-run stops after the check).
#   bench_out_test.sh SOURCE_DIR
set -euo pipefail
SRC="$1"
fail() { echo "FAIL: $*"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The default: a folder of bench/results/ named for the date and time, that does not exist yet.
out=$("$SRC/scripts/bench" --dry-run) || fail "--dry-run failed: $out"
echo "$out"
dir=$(sed -n 's/^\[strata\] out: //p' <<<"$out")
[[ $dir =~ ^$SRC/bench/results/bench_[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{6}$ ]] || fail "default out is $dir"
[ ! -e "$dir" ] || fail "the default out $dir exists already"

# The committed results, and any other folder with files in it, are refused (exit 2), untouched.
before=$(ls -la "$SRC/bench/results" | md5sum)
for target in "$SRC/bench/results" bench/results; do
  rc=0
  msg=$(cd "$SRC" && scripts/bench --dry-run --out "$target" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "--out $target: exit $rc, not 2: $msg"
  grep -q "exists and is not empty" <<<"$msg" || fail "--out $target: $msg"
done
[ "$(ls -la "$SRC/bench/results" | md5sum)" = "$before" ] || fail "bench/results changed"
touch "$scratch/earlier.txt"
rc=0
"$SRC/scripts/bench" --dry-run --out "$scratch" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "a non-empty --out was accepted (exit $rc)"

# A new or empty folder is fine.
mkdir "$scratch/empty"
"$SRC/scripts/bench" --dry-run --out "$scratch/empty" | grep -q "out: $scratch/empty" || fail "an empty --out was refused"
"$SRC/scripts/bench" --dry-run --out "$scratch/new" | grep -q "out: $scratch/new" || fail "a new --out was refused"
[ ! -e "$scratch/new" ] || fail "--dry-run created the folder"
echo PASS
