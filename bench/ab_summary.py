# Summarises a bench/run_ab.sh file: per build and kind, the median samples/s over the pairs;
# each 2-rank kind's efficiency (its median over 2 x the same build's 1-rank median); and
# new/old per kind, with the pairs in which new was faster.
#   /usr/bin/python3 bench/ab_summary.py FILE...
import re
import statistics
import sys

LINE = re.compile(r"pair=(\d+) (?:build|reducer)=(\w+) (\w+) .*?samples_per_s=([\d.]+)")

for path in sys.argv[1:]:
    rows = {}
    for line in open(path):
        m = LINE.match(line)
        if m:
            rows.setdefault((m[2], m[3]), {})[int(m[1])] = float(m[4])
    print(f"# summary of {path}")
    kinds = sorted({kind for _, kind in rows}, key=lambda k: (k != "1rank", k))
    for kind in kinds:
        for build in ("old", "new"):
            values = rows.get((build, kind))
            if not values:
                continue
            med = statistics.median(values.values())
            text = f"#   {build} {kind}: median {med:.1f} samples/s (n={len(values)})"
            one = rows.get((build, "1rank"))
            if kind != "1rank" and one:
                text += f", efficiency {med / (2 * statistics.median(one.values())):.3f}"
            print(text)
        old, new = rows.get(("old", kind)), rows.get(("new", kind))
        if old and new:
            pairs = sorted(set(old) & set(new))
            faster = sum(new[p] > old[p] for p in pairs)
            ratio = statistics.median(new.values()) / statistics.median(old.values())
            print(f"# new/old {kind}: {ratio:.3f} (new faster in {faster} of {len(pairs)} pairs)")
