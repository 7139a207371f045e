#!/usr/bin/python3
# Per-layer forward+backward time of a stage's layers timed one layer at a time (each layer
# run again and again, as the pipeline profile did before session 8) against the same layers
# run in turn as a stage runs them (forward through all, backward in reverse, each layer fed
# the gradient of the layer after it), medians of 7 runs after 2 warm-up runs, one thread,
# 16-row microbatch (batch 128 / 8 microbatches). Needs Debian's python3-torch (the same
# libtorch 1.13 engine as Strata). Usage: chain_vs_iso.py stage1|stage0
#   stage1: the partition-search model's layers 4-14 (Linear 3072->768 ... 1536->1536, Tanh between)
#   stage0: its layers 0-3 (Linear 1536->1536, Tanh, Linear 1536->3072, Tanh)
import statistics as st
import sys
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
stage0 = len(sys.argv) > 1 and sys.argv[1] == "stage0"
dims = [(1536, 1536), (1536, 3072)] if stage0 else \
    [(3072, 768), (768, 1536), (1536, 768), (768, 768), (768, 1536), (1536, 1536)]
layers = []
for i, (a, b) in enumerate(dims):
    layers.append(torch.nn.Linear(a, b))
    if stage0 or i < len(dims) - 1:
        layers.append(torch.nn.Tanh())
x0 = torch.randn(16, dims[0][0])


def alone(runs=9, warm=2):
    x, res = x0, []
    for l in layers:
        times = []
        for r in range(runs):
            xi = x.detach().requires_grad_(True)
            t = time.perf_counter()
            y = l(xi)
            tf = time.perf_counter() - t
            t = time.perf_counter()
            y.backward(torch.ones_like(y))
            tb = time.perf_counter() - t
            if r >= warm:
                times.append(tf + tb)
        res.append(st.median(times))
        x = y.detach()
    return res


def in_turn(runs=9, warm=2):
    per = [[] for _ in layers]
    for r in range(runs):
        x, ins, outs, tf = x0, [], [], []
        for l in layers:
            xi = x.detach().requires_grad_(True)
            t = time.perf_counter()
            y = l(xi)
            tf.append(time.perf_counter() - t)
            ins.append(xi)
            outs.append(y)
            x = y
        tb = [0.0] * len(layers)
        g = torch.ones_like(outs[-1])
        for k in reversed(range(len(layers))):
            t = time.perf_counter()
            outs[k].backward(g)
            tb[k] = time.perf_counter() - t
            g = ins[k].grad
        if r >= warm:
            for k in range(len(layers)):
                per[k].append(tf[k] + tb[k])
    return [st.median(p) for p in per]


alone()  # the process's first runs (allocator, page faults) are not part of either
for rep in range(3):
    a, b = alone(), in_turn()
    print("alone %.2f ms, in turn %.2f ms, ratio %.3f | per layer alone/in turn ms: %s" %
          (sum(a) * 1e3, sum(b) * 1e3, sum(b) / sum(a), " ".join("%.2f/%.2f" % (p * 1e3, q * 1e3) for p, q in zip(a, b))))
