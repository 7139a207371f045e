#!/usr/bin/env python3
"""LossNotDecreasing (docs/rules.md: mean smoothing, checks every num_steps) on the demo's per-step
losses (losses_per_step.txt: `strata trial RUN --tensor Loss_output_0` of one epoch of
examples/fashion_mnist/job.json with the losses saved at every step), keeping every tenth loss
from each of the ten offsets, as a save_interval of 10 would. Usage: loss_rule_sim.py [losses_per_step.txt]"""
import sys

losses = [float(line.split()[1]) for line in open(sys.argv[1] if len(sys.argv) > 1 else "losses_per_step.txt")]


def rises(samples, window, num_steps):
    smoothed = [(s, sum(v for _, v in samples[i + 1 - window:i + 1]) / window)
                for i, (s, _) in enumerate(samples) if i + 1 >= window]
    out, first, last = [], smoothed[0][0], None
    for s, v in smoothed:
        if (last is None and s < first + num_steps) or (last is not None and s < last + num_steps):
            continue
        last = s
        base = [x for t, x in smoothed if t <= s - num_steps]
        if base:
            out.append((s, v / base[-1] - 1))
    return out


for interval, window, num_steps in [(10, 20, 200), (1, 200, 200), (1, 100, 200)]:
    for diff in (10, 20, 25):
        fired = []
        for offset in range(interval):
            r = rises([(s, losses[s]) for s in range(offset, len(losses), interval)], window, num_steps)
            hits = [(s, round(x, 3)) for s, x in r if x >= diff / 100]
            fired.append(hits[0] if hits else "-")
        print(f"save every {interval:2d}, window {window:3d}, num_steps {num_steps}, diff {diff}%: first firing per offset {fired}")
print("100-step means:", [round(sum(losses[i:i + 100]) / len(losses[i:i + 100]), 3) for i in range(0, len(losses), 100)])
