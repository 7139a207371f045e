#!/usr/bin/env python3
"""Issue 14's summary lines of several bench/run_pipeline.sh runs, one column per run.

  summarize_pipeline.py RUN_DIR...   (each holding pipeline.txt, in run order)

Marks a missed target with "**" (values as printed, 2 decimals), and says which runs met every target and whether two
consecutive runs did (issue 14's "done when").
"""
import re
import sys

# line prefix -> (short name, test on the value, target as written in the issue)
TARGETS = [
    ("# bubble measured/predicted interleaved p=2 m=8:", "bubble meas/pred interleaved p=2 m=8",
     lambda v: abs(v - 1) <= 0.10 + 1e-9, "1.00 +- 0.10"),
    ("# bubble measured/predicted simple p=2 m=8:", "bubble meas/pred simple p=2 m=8",
     lambda v: abs(v - 1) <= 0.10 + 1e-9, "1.00 +- 0.10"),
    ("# bubble zero-bubble/1F1B p=2 m=8:", "bubble zero-bubble/1F1B p=2 m=8", lambda v: v <= 0.60 + 1e-9, "<= 0.6"),
    ("# speedup 2-stage/1-thread m=8:", "speedup 2-stage/1-thread m=8", lambda v: v >= 1.60 - 1e-9, ">= 1.6"),
    ("# auto/best-manual step time:", "auto/best-manual step time", lambda v: v <= 1.05 + 1e-9, "<= 1.05"),
]
PROBE = re.compile(r"^# host probe .* (before|after): (\S+)")


def read(path):
    values, probes = {}, {}
    with open(path) as f:
        for line in f:
            for prefix, name, _, _ in TARGETS:
                if line.startswith(prefix):
                    values[name] = float(line[len(prefix):].split()[0])
            m = PROBE.match(line)
            if m:
                probes[m.group(1)] = m.group(2)
    return values, probes


def main(dirs):
    runs = [(d.rstrip("/").split("/")[-1], *read(d.rstrip("/") + "/pipeline.txt")) for d in dirs]
    print("| line | " + " | ".join(name for name, _, _ in runs) + " | target |")
    print("|---|" + "---|" * (len(runs) + 1))
    print("| host probe us, before / after | " +
          " | ".join(f"{p.get('before', '?')} / {p.get('after', '?')}" for _, _, p in runs) + " | |")
    met = [True] * len(runs)
    for prefix, name, ok, target in TARGETS:
        cells = []
        for i, (_, values, _) in enumerate(runs):
            if name not in values:
                cells.append("-")
                met[i] = False
                continue
            good = ok(values[name])
            met[i] = met[i] and good
            cells.append(f"{values[name]:.2f}" if good else f"**{values[name]:.2f}**")
        print(f"| {name} | " + " | ".join(cells) + f" | {target} |")
    passed = [name for (name, _, _), m in zip(runs, met) if m]
    print(f"\nruns meeting every target: {', '.join(passed) or 'none'}")
    pairs = [f"{runs[i][0]}+{runs[i + 1][0]}" for i in range(len(runs) - 1) if met[i] and met[i + 1]]
    print(f"two consecutive runs meeting every target: {', '.join(pairs) or 'none'}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
