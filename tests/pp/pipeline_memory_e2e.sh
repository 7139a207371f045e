#!/usr/bin/env bash
# Peak RSS of a LayerList model: one process against a pipeline of 2 ranks
# (tests/pp/pipeline_memory_e2e.cpp). Every pipeline rank's growth over its baseline (the RSS
# before the model existed) must stay below 0.75 of the one process's growth (ideal 0.5: a rank
# never holds the other stage), and a rank's parameters + gradients + optimizer state must
# equal the plan's prediction exactly. optimize: memory, so the cut follows the bytes (a
# speed cut follows timings, which a loaded machine skews).
set -euo pipefail
source "$(dirname "$0")/../testing/e2e_driver.sh"
e2e_start pp_mem "$@"
cat >"$dir/one.json" <<JSON
{"output_dir": "$dir/one", "profiler": {"disable_profiler": true}}
JSON
cat >"$dir/pipe.json" <<JSON
{"output_dir": "$dir/pipe", "profiler": {"disable_profiler": true},
 "modelparallel": {"enabled": true, "partitions": 2, "microbatches": 2, "pipeline": "interleaved",
                   "optimize": "memory"}}
JSON
"$BINARY" --config "$dir/one.json" | tee "$dir/one.txt"
"$MPIEXEC" -n 2 "$BINARY" --config "$dir/pipe.json" | tee "$dir/pipe.txt"
field() { sed -n "s/.*$1=\([-0-9]*\).*/\1/p"; }
one_growth=$(( $(field peak_kb < "$dir/one.txt") - $(field baseline_kb < "$dir/one.txt") ))
status=0
while read -r line; do
  rank=$(echo "$line" | field rank)
  growth=$(( $(echo "$line" | field peak_kb) - $(echo "$line" | field baseline_kb) ))
  predicted=$(echo "$line" | field predicted_bytes); held=$(echo "$line" | field held_bytes)
  ratio=$(awk -v g="$growth" -v o="$one_growth" 'BEGIN { printf "%.3f", g / o }')
  echo "rank $rank: peak RSS growth ${growth} KiB = ${ratio} of one process's ${one_growth} KiB; holds $held B, plan $predicted B"
  if awk -v r="$ratio" 'BEGIN { exit !(r > 0.75) }'; then echo "FAIL: rank $rank grew more than 0.75 of one process"; status=1; fi
  if [ "$held" != "$predicted" ]; then echo "FAIL: rank $rank holds $held bytes, the plan predicted $predicted"; status=1; fi
done < <(grep '^rank=' "$dir/pipe.txt")
[ "$(grep -c '^rank=' "$dir/pipe.txt")" = 2 ] || { echo "FAIL: expected 2 ranks' lines"; status=1; }
exit $status
