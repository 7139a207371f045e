# Summarises the A/B files (ab_reducer.txt, ab_reducer_default.txt): per reducer and run
# kind, the median throughput of scaling_bench mlp25m, and where a 1-rank kind was run in the
# same file, each 2-rank kind's efficiency 2-rank / (2 x 1-rank) of the medians.
#   /usr/bin/python3 ab_reducer_summary.py ab_reducer.txt ab_reducer_default.txt
import re, statistics, sys
for path in sys.argv[1:]:
    rows = {}
    for line in open(path):
        m = re.match(r"pair=\d+ reducer=(\w+) (\w+) samples_per_s=([\d.]+)", line)
        if m:
            rows.setdefault((m[1], m[2]), []).append(float(m[3]))
    print(path)
    for (reducer, kind), values in sorted(rows.items(), key=lambda kv: (kv[0][0] != "old", kv[0][1])):
        line = f"  reducer={reducer} {kind} median={statistics.median(values):.1f} (n={len(values)})"
        one = rows.get((reducer, "1rank"))
        if kind != "1rank" and one:
            line += f" efficiency={statistics.median(values) / (2 * statistics.median(one)):.3f}"
        print(line)
