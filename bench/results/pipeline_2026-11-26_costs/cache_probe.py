# Does a Linear(1536,1536) F+B at 16 rows time faster when the same layer runs back to back
# (weights cached) than when 8 layers take turns (as in a pipeline stage)?
import time, torch, statistics
torch.set_num_threads(1)
W, R = 1536, 16
layers = [torch.nn.Linear(W, W) for _ in range(8)]
x = torch.randn(R, W, requires_grad=True)
def fb(l):
    y = l(x); y.backward(torch.ones_like(y))
def timed(seq, reps):
    out = []
    for _ in range(reps):
        for l in seq:
            t = time.perf_counter(); fb(l); out.append(time.perf_counter() - t)
    return statistics.median(out[len(seq):])
for trial in range(2):
    same = timed([layers[0]] * 8, 6)
    cycle = timed(layers, 6)
    print(f"same layer {same*1e3:.2f} ms, 8 layers in turn {cycle*1e3:.2f} ms, ratio {cycle/same:.2f}")
