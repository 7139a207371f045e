#!/usr/bin/env bash
# End to end: real 2-rank runs of the Fashion-MNIST example, stopped by rules.
#   1. a learning rate of 1e-9 (the loss does not decrease): LossNotDecreasing, run by the
#      online thread on rank 0, fires and its StopTraining stops both ranks at the same step;
#   2. a learning rate of 1e3 (the loss becomes NaN): ExplodingTensor or LossNotDecreasing
#      fires and stops both ranks;
#   3. the same with the rules in a separate `strata rules --watch` process: its stop file
#      stops both ranks;
#   4. a healthy run with the demo's rules (examples/fashion_mnist/job.json) fires no
#      training rule and is not stopped;
#   5. a data loader slowed on purpose (30 ms per batch) makes the Dataloader rule fire;
#   6. a 2-stage pipeline with nearly all layers on stage 0 (manual partition) makes
#      LoadBalancing fire (compute per step and waiting share across the ranks) and name rank 0's
#      stage as the slow one, as `strata breakdown` does. StepOutlier
#      runs on the same data and, by its definition, cannot fire from the imbalance: it compares
#      each rank's steps with that rank's own mean + 3 std, and a partition slows every step of
#      both ranks alike (the pipeline keeps their step times equal); the check asserts that;
#   7. a short diverging job (400 steps, lr 1e3) with the demo's rules is stopped (with the
#      old 5 s file poll it ran to its end);
#   8. a 2-stage pipeline stopped by the last stage's in-process verdict (the loss is there);
#   9. in-process verdicts equal `strata rules` on the files, data parallel and pipeline
#      (each pipeline stage's engine, the stages' verdicts together).
# Each run must exit 0 with every rank reporting the same step.
set -euo pipefail
MPIEXEC="$1"; EXAMPLE="$2"; STRATA="$3"; SOURCE_DIR="$4"
WORK="$(mktemp -d /tmp/strata_stop_e2e.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export STRATA_RULES_INTERVAL_MS=200 CI=1
fail() { echo "FAIL: $*"; exit 1; }

# run NAME CONFIG ARGS...: runs the example, leaves its output in $WORK/NAME.log
run() {
  local name="$1" config="$2"; shift 2
  echo "== $name: $MPIEXEC -n 2 $EXAMPLE --config $config $*"
  "$MPIEXEC" -n 2 "$EXAMPLE" --config "$config" --seed 3 "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name: the example exited with an error"; }
  grep -v '^epoch 1 step' "$WORK/$name.log" || true
}

# stopped_same_step NAME: prints the step; fails unless both ranks stopped at the same step,
# before the end of the epoch, and the final line agrees.
stopped_same_step() {
  local name="$1" log="$WORK/$1.log"
  local s0 s1 final
  s0=$(sed -nE 's/^rank 0 stopped at step ([0-9]+):.*/\1/p' "$log")
  s1=$(sed -nE 's/^rank 1 stopped at step ([0-9]+):.*/\1/p' "$log")
  final=$(sed -nE 's/^final: step=([0-9]+) .*/\1/p' "$log")
  [ -n "$s0" ] && [ -n "$s1" ] || fail "$name: not every rank reported a stop (rank 0: '$s0', rank 1: '$s1')"
  [ "$s0" = "$s1" ] || fail "$name: rank 0 stopped at step $s0, rank 1 at step $s1"
  [ "$final" = "$s0" ] || fail "$name: final step $final, stop step $s0"
  [ "$s0" -lt 937 ] || fail "$name: stopped only at the end of the epoch"
  echo "$s0"
}

# stopped_soon NAME STOP: the stop came at most 2 steps after the step that showed the issue.
# Rank 0 logs "StopTraining: RULE found an issue at step K" (the debugger's step, counted from
# 0); "stopped at step STOP" counts the steps trained (from 1), so the last step trained is
# STOP-1, and it must be at most K+2 (README: "one or two steps after"). A step count, not a
# time.
stopped_soon() {
  local name="$1" stop="$2" k
  k=$(sed -nE 's/.*StopTraining: [A-Za-z]+ found an issue at step ([0-9]+) .*/\1/p' "$WORK/$name.log" | head -1)
  [ -n "$k" ] || fail "$name: rank 0 did not log the step of the finding"
  [ $((stop - 1)) -le $((k + 2)) ] || fail "$name: the issue was found at step $k but the ranks trained until step $((stop - 1))"
  echo "$name: the issue found at step $k, the last step trained $((stop - 1)) (at most $((k + 2)))"
}

# private_files NAME: no file the run wrote may be readable by other users (docs/security.md).
private_files() {
  local open
  open=$(find "$WORK/$1" -type f -perm /o=r | head -5)
  [ -z "$open" ] || fail "$1: files readable by others: $open"
  echo "$1: $(find "$WORK/$1" -type f | wc -l) files, none readable by others"
}

status_of() {  # status_of RUN_DIR RULE
  /usr/bin/env python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Status"])' "$1/rule-output/$2.json" 2>/dev/null \
    || sed -nE 's/.*"Status": *"([A-Za-z]+)".*/\1/p' "$1/rule-output/$2.json"
}

config() {  # config NAME RULES_JSON
  cat > "$WORK/$1.json" <<JSON
{"output_dir": "$WORK/$1",
 "debugger": {"collections": [{"name": "losses", "save_interval": 1}]},
 "profiler": {"disable_profiler": true},
 "rules": $2}
JSON
  echo "$WORK/$1.json"
}

# 1. The loss does not decrease.
cfg=$(config flat '[{"name": "LossNotDecreasing", "parameters": {"num_steps": 5}, "actions": ["StopTraining"]}]')
run flat "$cfg" --lr 1e-9 --epochs 1
step=$(stopped_same_step flat)
stopped_soon flat "$step"
grep -q '^rank 0 stopped at step [0-9]*: rule LossNotDecreasing: loss did not decrease' "$WORK/flat.log" \
  || fail "flat: rank 0's stop reason does not name LossNotDecreasing"
grep -q '^rank 1 stopped at step [0-9]*: rule LossNotDecreasing: loss did not decrease.*(step [0-9]*, rank 0)' "$WORK/flat.log" \
  || fail "flat: rank 1's stop reason does not name the rule, its step and rank 0"
grep -q 'StopTraining: LossNotDecreasing found an issue at step [0-9]* (rank 0)' "$WORK/flat.log" \
  || fail "flat: rank 0 did not log which rule found an issue at which step"
[ "$(status_of "$WORK/flat" LossNotDecreasing)" = IssuesFound ] || fail "flat: LossNotDecreasing.json is not IssuesFound"
echo "flat: both ranks stopped at step $step"

# 2. The loss explodes (lr 1e3).
cfg=$(config exploding '[{"name": "LossNotDecreasing", "parameters": {"num_steps": 5}, "actions": ["StopTraining"]},
                          {"name": "ExplodingTensor", "actions": ["StopTraining"]}]')
run exploding "$cfg" --lr 1e3 --epochs 1
step=$(stopped_same_step exploding)
stopped_soon exploding "$step"
grep -qE '^rank 0 stopped at step [0-9]*: rule (ExplodingTensor|LossNotDecreasing): ' "$WORK/exploding.log" \
  || fail "exploding: rank 0's stop reason names neither ExplodingTensor nor LossNotDecreasing"
echo "exploding: both ranks stopped at step $step"

# 3. The rules in a separate process: `strata rules --watch` writes the stop file.
cfg=$(config watched '[]')
cat > "$WORK/watch_rules.json" <<'JSON'
{"rules": [{"name": "ExplodingTensor", "actions": ["StopTraining"]}]}
JSON
mkdir -p "$WORK/watched"
"$STRATA" rules "$WORK/watched" --watch --rules "$WORK/watch_rules.json" --interval 0.2 > "$WORK/watcher.log" 2>&1 &
watcher=$!
run watched "$cfg" --lr 1e3 --epochs 1
step=$(stopped_same_step watched)
grep -q '^rank 0 stopped at step [0-9]*: rule ExplodingTensor: .*(stop file .*stop_training.json)' "$WORK/watched.log" \
  || fail "watched: rank 0 was not stopped by the watcher's stop file"
# The watcher ends by itself once the job wrote training_job_end.ts (bounded wait).
for _ in $(seq 1 300); do kill -0 "$watcher" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$watcher" 2>/dev/null; then kill "$watcher"; cat "$WORK/watcher.log"; fail "watched: the watcher did not end with the job"; fi
wait "$watcher" || { cat "$WORK/watcher.log"; fail "watched: the watcher failed"; }
echo "watched: both ranks stopped at step $step by the watcher's stop file"

# 4. Healthy: the demo itself (scripts/demo's config, seed and whole epoch) fires no training
# rule. With diff_percent 10 its LossNotDecreasing stopped it at step 591 of 937 on minibatch
# noise, after the 400 steps this check used to run.
sed -e "s#\"output_dir\": *\"[^\"]*\"#\"output_dir\": \"$WORK/healthy\"#" "$SOURCE_DIR/examples/fashion_mnist/job.json" > "$WORK/healthy.json"
echo "== healthy: $MPIEXEC -n 2 $EXAMPLE --config $WORK/healthy.json --epochs 1"
"$MPIEXEC" -n 2 "$EXAMPLE" --config "$WORK/healthy.json" --epochs 1 > "$WORK/healthy.log" 2>&1 \
  || { cat "$WORK/healthy.log"; fail "healthy: the example exited with an error"; }
grep -q '^final: step=937 ' "$WORK/healthy.log" || { cat "$WORK/healthy.log"; fail "healthy: the demo did not run its whole epoch"; }
grep -q 'stopped at step' "$WORK/healthy.log" && fail "healthy: the run was stopped"
private_files healthy  # trial, timelines, system metrics, rule outputs, the report
for rule in LossNotDecreasing ExplodingTensor VanishingGradient Dataloader; do
  [ "$(status_of "$WORK/healthy" "$rule")" = NoIssuesFound ] || fail "healthy: $rule is $(status_of "$WORK/healthy" "$rule")"
done
echo "healthy: no training rule fired"
# The same losses judged with smdebug's single-loss comparison (the rule's defaults): minibatch
# noise fires on this healthy run, which is why the examples smooth.
cat > "$WORK/unsmoothed.json" <<'JSON'
{"rules": [{"name": "LossNotDecreasing"}]}
JSON
"$STRATA" rules "$WORK/healthy" --rules "$WORK/unsmoothed.json" > "$WORK/unsmoothed.log" || { cat "$WORK/unsmoothed.log"; fail "unsmoothed: strata rules failed"; }
[ "$(status_of "$WORK/healthy" LossNotDecreasing)" = IssuesFound ] \
  || fail "healthy, unsmoothed: LossNotDecreasing is $(status_of "$WORK/healthy" LossNotDecreasing): expected minibatch noise to fire"
echo "healthy: unsmoothed LossNotDecreasing fires on noise ($(grep -c '^  LossNotDecreasing' "$WORK/unsmoothed.log") finding(s))"

# 5. A slow data loader.
cat > "$WORK/slow.json" <<JSON
{"output_dir": "$WORK/slow",
 "profiler": {"framework_profile": {"start_step": 5, "num_steps": 20}},
 "rules": [{"name": "ProfilerReport"}]}
JSON
run slow "$WORK/slow.json" --max-steps 40 --slow-loader-ms 30
[ "$(status_of "$WORK/slow" Dataloader)" = IssuesFound ] || fail "slow: Dataloader is $(status_of "$WORK/slow" Dataloader)"
grep -q 'rule Dataloader: IssuesFound .*waits for its next batch' "$WORK/slow.log" || fail "slow: no Dataloader finding logged"
echo "slow: Dataloader fired"

# 6. An unbalanced manual pipeline partition: stage 0 holds every layer but the LogSoftmax.
cat > "$WORK/unbalanced.json" <<JSON
{"output_dir": "$WORK/unbalanced",
 "modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "interleaved",
                   "auto_partition": false, "default_partition": 0, "manual_partition": {"log_softmax": 1}},
 "profiler": {"framework_profile": {"start_step": 5, "num_steps": 140}},
 "rules": [{"name": "LoadBalancing"}, {"name": "StepOutlier"}]}
JSON
run unbalanced "$WORK/unbalanced.json" --max-steps 150
[ "$(status_of "$WORK/unbalanced" LoadBalancing)" = IssuesFound ] \
  || fail "unbalanced: LoadBalancing is $(status_of "$WORK/unbalanced" LoadBalancing)"
grep -q 'rule LoadBalancing: IssuesFound .*rank 0, stages* [0-9,]* is the slow stage.*compute per step ranges from .* (rank 1, stages* [0-9,]*) to .* (rank 0, stages* [0-9,]*)' "$WORK/unbalanced.log" \
  || fail "unbalanced: no LoadBalancing finding naming rank 0's stage as the slow one"
"$STRATA" breakdown "$WORK/unbalanced" > "$WORK/unbalanced_breakdown.txt" || fail "unbalanced: strata breakdown failed"
cat "$WORK/unbalanced_breakdown.txt"
grep -q '^slow stage: stages* [0-9, ]* (rank 0) computes' "$WORK/unbalanced_breakdown.txt" \
  || fail "unbalanced: strata breakdown does not name rank 0's stage as the slow one"
/usr/bin/env python3 - "$WORK/unbalanced/rule-output" <<'PY' || fail "unbalanced: rule details"
import json, sys
out = sys.argv[1]
lb = json.load(open(out + "/LoadBalancing.json"))["Details"]
ranks = lb["ranks"]
assert ranks["0"]["compute_s"] > 4 * ranks["1"]["compute_s"], ranks
# Rank 1 waits for rank 0's stage; rank 0 waits too when other jobs take its core (seen: 4.0x
# under a load of 7 on the 2 cores, far more on a quiet machine).
assert ranks["1"]["wait_s"] > 2 * ranks["0"]["wait_s"], ranks
# Compute is unbalanced, step times are not (the pipeline makes both ranks wait for each
# other). Quiet: compute 0.95, step 0.001; with other jobs on the 2 cores the step spread
# reached 0.23, hence the relative bound.
assert lb["imbalance"]["compute"] > 0.5 and lb["imbalance"]["step"] < 0.5 * lb["imbalance"]["compute"], lb["imbalance"]
so = json.load(open(out + "/StepOutlier.json"))
series = so["Details"]["step_details"]
assert sorted(series) == ["algo-1-0", "algo-1-1"], sorted(series)
means = [s["step_stats"]["mean"] for s in series.values()]
assert all(s["count"] > 100 for s in series.values()), "StepOutlier needs more than 100 steps per series"
# Equal step times on both ranks: the imbalance is in every step, so no step stands out.
assert abs(means[0] - means[1]) < 0.25 * max(means), means
for node, s in series.items():
    print(f"unbalanced: StepOutlier {node}: {s['count']} steps, mean {s['step_stats']['mean']*1e3:.3f} ms, "
          f"threshold {s['threshold_s']*1e3:.3f} ms, {s['number_of_outliers']} outlier(s) "
          f"(fires above {so['RuleParameters'].split('n_outliers:')[1].split()[0]}): {so['Status']}")
PY
echo "unbalanced: LoadBalancing fired"

# 7. A short diverging job (400 steps, lr 1e3) with the demo's rules is stopped.
sed -e "s#\"output_dir\": *\"[^\"]*\"#\"output_dir\": \"$WORK/diverging\"#" "$SOURCE_DIR/examples/fashion_mnist/job.json" > "$WORK/diverging.json"
run diverging "$WORK/diverging.json" --lr 1e3 --max-steps 400
step=$(stopped_same_step diverging)
stopped_soon diverging "$step"
echo "diverging: both ranks stopped at step $step of 400"

# 8. A pipeline: the loss lives on the last stage (rank 1), whose in-process engine finds the
#    flat loss; both ranks stop at the same step, and rank 0 says where the verdict came from.
cat > "$WORK/pipe.json" <<JSON
{"output_dir": "$WORK/pipe",
 "modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "interleaved"},
 "debugger": {"include_workers": "all", "collections": [{"name": "losses", "save_interval": 1}]},
 "profiler": {"disable_profiler": true},
 "rules": [{"name": "LossNotDecreasing", "parameters": {"num_steps": 5}, "actions": ["StopTraining"]}]}
JSON
run pipe "$WORK/pipe.json" --lr 1e-9 --epochs 1
step=$(stopped_same_step pipe)
stopped_soon pipe "$step"
grep -q 'StopTraining: LossNotDecreasing found an issue at step [0-9]* (rank 1)' "$WORK/pipe.log" \
  || fail "pipe: rank 0 did not log the last stage's (rank 1) verdict"
echo "pipe: both ranks stopped at step $step on the last stage's verdict"

# 9. In-process verdicts equal `strata rules` on the files: data parallel and pipeline runs
#    whose rules fire without stopping (LossNotDecreasing on a flat loss; VanishingGradient and
#    ExplodingTensor evaluated on the same data, firing or not, the same way in both).
verdicts() {  # NAME MODELPARALLEL_JSON
  cat > "$WORK/$1.json" <<JSON
{"output_dir": "$WORK/$1", $2
 "debugger": {"include_workers": "all", "collections": [{"name": "losses", "save_interval": 2},
   {"name": "gradients", "save_interval": 5, "reductions": ["abs_mean"]}]},
 "profiler": {"disable_profiler": true},
 "rules": [{"name": "LossNotDecreasing", "parameters": {"num_steps": 4}},
           {"name": "VanishingGradient", "parameters": {"threshold": 1e-3}}, {"name": "ExplodingTensor"}]}
JSON
  run "$1" "$WORK/$1.json" --lr 1e-9 --max-steps 120
  "$STRATA" rules "$WORK/$1" > "$WORK/$1_offline.txt" || { cat "$WORK/$1_offline.txt"; fail "$1: strata rules failed"; }
  /usr/bin/env python3 - "$WORK/$1" <<'PY' || fail "$1: in-process and offline verdicts differ"
import glob, json, sys
run = sys.argv[1]
def verdicts(lines):
    out = {}
    for line in lines:
        f = json.loads(line)
        if "step" in f:
            out.setdefault((f["rule"], f["step"]), set()).update(f["subjects"])
    return out
online = verdicts(l for p in glob.glob(run + "/rule-output/online/*.jsonl") for l in open(p))
offline = verdicts(open(run + "/rule-output/findings.jsonl"))
assert online == offline, (sorted(set(online) ^ set(offline))[:10], len(online), len(offline))
rules = {r for r, _ in online}
assert "LossNotDecreasing" in rules, rules  # the flat loss fires it; the others may or may not
print(f"{run}: {len(online)} in-process verdicts equal the offline ones ({sorted(rules)})")
PY
}
verdicts verdicts_dp ''
# A pipeline: each stage's engine judges its own tensors. Stage 0 has no loss but the
# example's train_loss_avg200 scalar (every rank saves it); offline the losses collection
# (Loss_output_0, on the last stage) is not empty, so stage 0 must not fall back to that
# scalar either (it once gave one verdict more, at step 99).
verdicts verdicts_pipeline '"modelparallel": {"enabled": true, "partitions": 2, "microbatches": 4, "pipeline": "interleaved"},'
echo PASS
