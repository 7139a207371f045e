#!/usr/bin/env python3
"""Summaries of allreduce_bench runs (each run: NAME.txt + NAME.json written with -J).

  summarize.py runs  NAME...              medians over runs, per host mode and overall, in
                                          the benchmark's table shape, then the "# ratio" lines
  summarize.py sweep OUT ROUNDS CONFIG... Strata busbw per configuration (sweep_allreduce.sh),
                                          and when the runs include other implementations, the
                                          median per-run busbw ratios strata/<impl>

Host mode: the host places this VM's two vCPUs in (at least) two ways, and changes it over
time. allreduce_bench measures a shared-memory ping-pong between ranks 0 and 1 at the start
and end of each run:
  "near": round trip < PROBE_NEAR_US (default 0.2 us; ~0.05-0.1 us measured): the vCPUs share
          a last-level cache; synchronisation is fast, but both share one memory path
          (concurrent memcpy ~12 GB/s per rank at >= 64 MiB);
  "far":  ~0.35-0.4 us round trip: separate caches (likely separate CCDs); every
          synchronising collective is ~3x slower, cross-core data moves cost more, but each
          vCPU has its own memory bandwidth (concurrent memcpy ~20 GB/s per rank).
Runs whose start and end probes disagree are "mixed". Compare only runs of one mode.
"""
import json
import os
import re
import statistics
import sys

NEAR_US = float(os.environ.get("PROBE_NEAR_US", "0.2"))
RATIO_SIZES = (64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20)


def label(b):
    for s, u in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s}{u}"
    return f"{b}B"


def load(name):
    txt = open(name + ".txt").read()
    probes = [float(x) for x in re.findall(r"# probe .*: ([0-9.]+)", txt)]
    foreign = re.search(r"# foreign cpu.*: ([0-9.]+)", txt)
    mode = "?"
    if len(probes) == 2:
        mode = "near" if max(probes) < NEAR_US else "far" if min(probes) >= NEAR_US else "mixed"
    return {"name": os.path.basename(name), "rows": json.load(open(name + ".json")), "mode": mode,
            "probes": probes, "foreign": float(foreign.group(1)) if foreign else -1.0}


def cell(run, b, impl):
    return next(r for r in run["rows"] if r["bytes"] == b and r["impl"] == impl)


def table(runs, title):
    med = statistics.median
    impls = list(dict.fromkeys(r["impl"] for r in runs[0]["rows"]))
    sizes = sorted({r["bytes"] for r in runs[0]["rows"]})
    refs = [i for i in impls if i in ("memcpy", "inplace")]
    coll = [i for i in impls if i not in refs]
    print(f"# {title}: median of {len(runs)} runs ({' '.join(r['name'] for r in runs)})")
    print("#" + " " * 39 + "".join(f"  {(' ' + i + ' ').center(24, '-')}" for i in coll))
    print("#       size        count    type  redop" + "       time   busbw #wrong" * len(coll) +
          "  strata-algo  " + "".join(f" {i:>8}" for i in refs))
    for b in sizes:
        line = f"{b:12d} {b // 4:12d} {'float':>7} {'sum':>6}"
        for i in coll:
            c = [cell(r, b, i) for r in runs]
            line += (f"  {med([x['time_us'] for x in c]):9.2f} {med([x['busbw_gbs'] for x in c]):7.2f}"
                     f" {max(x['wrong'] for x in c):6d}")
        algos = [cell(r, b, coll[0])["note"] for r in runs]
        line += f"  {max(set(algos), key=algos.count) or '-':<13}"
        for i in refs:
            line += f" {med([cell(r, b, i)['busbw_gbs'] for r in runs]):8.2f}"
        print(line)
    ratios = []
    for b in RATIO_SIZES:
        if b not in sizes:
            continue
        for i in impls[1:]:
            rs = [cell(r, b, impls[0])["busbw_gbs"] / cell(r, b, i)["busbw_gbs"] for r in runs]
            ratios.append((f"# ratio {impls[0]}/{i} {label(b)}: {med(rs):.2f}", rs))
    if 4096 in sizes:
        for i in coll:
            ratios.append((f"# latency {i} 4KiB us: {med([cell(r, 4096, i)['time_us'] for r in runs]):.2f}",
                           [cell(r, 4096, i)["time_us"] for r in runs]))
    return ratios


def runs_main(names):
    runs = [load(n) for n in names]
    for r in runs:
        print(f"# run {r['name']}: mode={r['mode']} probe_us={r['probes']} foreign_cores={r['foreign']}")
    for mode in ("near", "far", "mixed"):
        subset = [r for r in runs if r["mode"] == mode]
        if subset and len(subset) < len(runs):
            for line, _ in table(subset, f"host mode {mode}"):
                print(line.replace("# ratio", "#   (" + mode + ") ratio").replace("# latency", "#   (" + mode + ") latency"))
    ratios = table(runs, "all runs")
    for line, rs in ratios:
        print(f"#   per-run: {line.split(':')[0][2:]}: {' '.join(f'{x:.2f}' for x in rs)}")
    print("\n".join(line for line, _ in ratios))


def sweep_header(sizes):
    return f"{'config':<20}{'n':>3}" + "".join(f"{label(b):>14}" for b in sizes)


def runs_in_mode(data, configs, mode):
    """(config, its runs in host mode `mode`) for each config that has any."""
    for c in configs:
        runs = [r for r in data[c] if r["mode"] == mode]
        if runs:
            yield c, runs


def sweep_main(out, rounds, configs):
    med = statistics.median
    data = {c: [load(f"{out}/{c}_r{k}") for k in range(1, rounds + 1)] for c in configs}
    sizes = sorted({r["bytes"] for r in data[configs[0]][0]["rows"]})
    for mode in ("near", "far"):
        print(f"# host mode {mode}: Strata busbw GB/s, median over that mode's runs [algorithm]; n = runs")
        print(sweep_header(sizes))
        best = {}
        for c, runs in runs_in_mode(data, configs, mode):
            line = f"{c:<20}{len(runs):>3}"
            for b in sizes:
                bw = med([cell(r, b, 'strata')["busbw_gbs"] for r in runs])
                algo = cell(runs[0], b, "strata")["note"].replace("shm_", "")[:4]
                line += f"{bw:8.2f}[{algo}]"
                if bw > best.get(b, (0, ""))[0]:
                    best[b] = (bw, c)
            print(line)
        runs = [r for c in configs for r in data[c] if r["mode"] == mode]
        if runs:
            print(f"{'memcpy reference':<20}{len(runs):>3}" +
                  "".join(f"{med([cell(r, b, 'memcpy')['busbw_gbs'] for r in runs]):14.2f}" for b in sizes))
            print("# best: " + ", ".join(f"{label(b)} {best[b][1]} ({best[b][0]:.2f})" for b in sizes if b in best))
    others = [i for i in dict.fromkeys(r["impl"] for r in data[configs[0]][0]["rows"]) if i != "strata"]
    for mode in ("near", "far"):
        for other in others:
            print(f"# host mode {mode}: busbw ratio strata/{other}, median of per-run ratios (min)")
            print(sweep_header(sizes))
            for c, runs in runs_in_mode(data, configs, mode):
                line = f"{c:<20}{len(runs):>3}"
                for b in sizes:
                    rs = [cell(r, b, "strata")["busbw_gbs"] / cell(r, b, other)["busbw_gbs"] for r in runs]
                    line += f"{med(rs):8.2f}({min(rs):4.2f})"
                print(line)
    print("# runs: " + " ".join(f"{r['name']}={r['mode']}" for c in configs for r in data[c]))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "runs":
        runs_main(sys.argv[2:])
    elif len(sys.argv) >= 5 and sys.argv[1] == "sweep":
        sweep_main(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(__doc__)
