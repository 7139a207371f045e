import time, torch, statistics
torch.set_num_threads(1)
W, R = 1536, 16
layers = [torch.nn.Linear(W, W) for _ in range(8)]
x = torch.randn(R, W, requires_grad=True)
def fb(l, evict=None):
    if evict is not None: evict.add_(1)
    t = time.perf_counter(); y = l(x); f = time.perf_counter() - t
    if evict is not None: evict.add_(1)
    t = time.perf_counter(); y.backward(torch.ones_like(y)); b = time.perf_counter() - t
    return f + b
def run(seq, evict, reps=5):
    out = [fb(l, evict) for _ in range(reps) for l in seq]
    return statistics.median(out[len(seq):])
for trial in range(2):
    res = [f"cycle {run(layers, None)*1e3:.1f}", f"same {run([layers[0]]*8, None)*1e3:.1f}"]
    for mb in (16, 48, 128):
        ev = torch.zeros(mb * 2**20 // 4)
        res.append(f"same+evict{mb}MB {run([layers[0]]*8, ev)*1e3:.1f}")
    print(", ".join(res))
