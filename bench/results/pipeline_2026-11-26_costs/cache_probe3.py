# Interleaved rounds (load drift cancels in the per-round ratio): F+B of Linear(1536,1536) at
# 16 rows, the same layer 8 times vs 8 layers in turn vs the same layer with a 64 MiB buffer
# touched before forward and before backward.
import time, torch, statistics
torch.set_num_threads(1)
W, R = 1536, 16
layers = [torch.nn.Linear(W, W) for _ in range(8)]
x = torch.randn(R, W, requires_grad=True)
ev = torch.zeros(64 * 2**20 // 4)
def fb(l, evict):
    if evict: ev.add_(1)
    t = time.perf_counter(); y = l(x); f = time.perf_counter() - t
    g = torch.ones_like(y)
    if evict: ev.add_(1)
    t = time.perf_counter(); y.backward(g); return f + time.perf_counter() - t
def block(seq, evict):
    return statistics.median([fb(l, evict) for l in seq])
for l in layers: fb(l, False)
r1, r2 = [], []
for _ in range(15):
    same = block([layers[0]] * 8, False); cyc = block(layers, False); evs = block([layers[0]] * 8, True)
    r1.append(cyc / same); r2.append(evs / same)
print(f"median ratio cycle/same {statistics.median(r1):.2f} (min {min(r1):.2f} max {max(r1):.2f}); "
      f"evict64MB/same {statistics.median(r2):.2f} (min {min(r2):.2f} max {max(r2):.2f})")
