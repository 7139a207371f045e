"""PyTorch DDP (Gloo) on the same workloads as scaling_bench, for a side-by-side run.

Run with Debian's interpreter, which sees python3-torch:
    /usr/bin/python3 bench/ddp_baseline.py --model mlp25m --ranks 2 --steps 30 --batch 32
Prints: ddp model=<m> ranks=<n> samples_per_s=<x> step_ms=<t>
"""
import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def make_workload(model, batch):
    torch.manual_seed(0)
    if model == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10),
                            nn.LogSoftmax(1))
        return net, torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,)), True
    net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                        nn.Linear(4096, 1024))
    return net, torch.randn(batch, 1024), torch.randn(batch, 1024), False


def worker(rank, args, store_path, results):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank,
                            world_size=args.ranks)
    net, x, y, classification = make_workload(args.model, args.batch)
    model = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        out = model(x)
        loss = F.nll_loss(out, y) if classification else F.mse_loss(out, y)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            total += time.perf_counter() - start
    t = torch.tensor([total])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    results[rank] = t.item()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=max(1, os.cpu_count() // 2))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = mp.Manager().dict()
        mp.spawn(worker, args=(args, os.path.join(tmp, "store"), results), nprocs=args.ranks)
        total = results[0]
    print(f"ddp model={args.model} ranks={args.ranks} threads={args.threads} "
          f"samples_per_s={args.batch * args.ranks * args.steps / total:.1f} "
          f"step_ms={total / args.steps * 1e3:.2f}")


if __name__ == "__main__":
    main()
