# Pools the per-round efficiencies of several bench/run_scaling.sh outputs (scaling.txt files).
# Why: one run's five rounds span 12 minutes of a VM whose cores drift apart for minutes at a
# time, so one run's median says as much about that quarter hour as about the runtime. Over
# many runs the rounds of one run are still related (same minutes), so the uncertainty is
# estimated by resampling whole runs (a cluster bootstrap), not rounds.
#   /usr/bin/python3 bench/pool_scaling.py [--target 0.90] [--key "efficiency cnn 2" ...] FILE...
# A key may name alternatives, "a|b": each file contributes the rounds of the first one it has
# (since session 17 the script's "efficiency <model> <n>" divides by baselines on every core and
# the former core-0 line is "efficiency_core0_baseline <model> <n>", so
# "efficiency_core0_baseline cnn 2|efficiency cnn 2" pools the core-0 definition over old and
# new files; pool "efficiency cnn 2" itself over files of one definition only).
# Prints per key: runs, rounds, the pooled median of the rounds, a 90 % interval of it (2000
# resamples of the runs, fixed seed: the same files give the same lines), how many run
# medians and rounds reach the target, and the run medians' range; then
#   # pooled <key>: <median> [<low>, <high>] runs at target <k> of <n>
import argparse
import random
import re
import statistics
import sys

DEFAULT_KEYS = [
    "efficiency cnn 2",
    "efficiency_core0_baseline cnn 2",
    "baseline core_ratio cnn",
    "efficiency host_shared mlp25m 2",
    "efficiency mlp25m 2",
    "efficiency_core0_baseline mlp25m 2",
    "efficiency host_shared cnn 2",
    "efficiency sharded mlp25m 2",
    "efficiency ddp cnn 2",
    "efficiency ddp mlp25m 2",
    "efficiency lockstep_bound cnn 2",
    "efficiency/lockstep_bound cnn 2",
    "efficiency lockstep_bound mlp25m 2",
]


def rounds_of(path, key):
    with open(path) as f:
        text = f.read()
    for name in key.split("|"):
        pattern = re.compile(r"^\[round \d+\] " + re.escape(name) + r": ([0-9.]+)$", re.M)
        values = [float(v) for v in pattern.findall(text)]
        if values:
            return values
    return []


def interval(runs, resamples, seed):
    rng = random.Random(seed)
    medians = sorted(
        statistics.median([v for run in rng.choices(runs, k=len(runs)) for v in run]) for _ in range(resamples))
    return medians[int(0.05 * resamples)], medians[int(0.95 * resamples) - 1]


def main():
    parser = argparse.ArgumentParser(description="pool run_scaling.sh rounds over runs")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--key", action="append", help="summary key (repeatable); default: the efficiency lines")
    parser.add_argument("--target", type=float, default=0.90)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    if args.resamples < 20:
        sys.exit(f"pool_scaling.py: --resamples must be at least 20, got {args.resamples}")
    for key in args.key or DEFAULT_KEYS:
        runs = [r for r in (rounds_of(p, key) for p in args.files) if r]
        if not runs:
            print(f"# pooled {key}: no rounds in the {len(args.files)} file(s)")
            continue
        pooled = [v for run in runs for v in run]
        run_medians = [statistics.median(run) for run in runs]
        low, high = interval(runs, args.resamples, seed=16)
        print(f"{key}: runs {len(runs)}, rounds {len(pooled)}, pooled median {statistics.median(pooled):.3f}, "
              f"90% interval [{low:.3f}, {high:.3f}], run medians {min(run_medians):.3f}-{max(run_medians):.3f}, "
              f"at >= {args.target:.2f}: {sum(m >= args.target for m in run_medians)} of {len(runs)} runs, "
              f"{sum(v >= args.target for v in pooled)} of {len(pooled)} rounds")
        print(f"# pooled {key}: {statistics.median(pooled):.3f} [{low:.3f}, {high:.3f}] "
              f"runs at target {sum(m >= args.target for m in run_medians)} of {len(runs)}")


if __name__ == "__main__":
    main()
