#!/usr/bin/env python3
"""The contention table of docs/BENCHMARKS.md from bench/compare results.

    bench/report/contention_table.py OUT/results.json [more results.json ...]

Per (benchmark, size): each configuration's median time per operation over
the launches, its range (min-max), and nmad / best peer (the peer with the
lower median). Several results files (idle, loaded) give one table each.
"""
import collections
import json
import statistics
import sys


def fmt(us):
    # Sub-microsecond points (0-byte calls take ~0.01 us) need the third decimal.
    return "%.3f" % us if us < 1 else "%.2f" % us


def table(path):
    d = json.load(open(path))
    meta = d["meta"]
    by = collections.defaultdict(list)
    configs = []
    for s in d["samples"]:
        if not s["bench"].startswith("contention"):
            continue
        by[(s["bench"].split(".", 1)[1], s["size"], s["config"])].append(s["value"])
        if s["config"] not in configs:
            configs.append(s["config"])
    ours = [c for c in configs if c.startswith("nmad")]
    peers = [c for c in configs if not c.startswith("nmad")]
    print("%s — %s busy processes, load average %s, %s launches, `%s`" % (
        meta["date"], meta.get("busy_processes", 0), meta["load"], meta["reps"], meta["command"]))
    print()
    head = ["op", "size"] + ["%s µs (range)" % c for c in ours + peers] + ["nmad / best peer"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    order = ["barrier", "bcast", "scatter", "gather", "allreduce", "alltoall", "polling"]
    keys = sorted({(op, size) for (op, size, _) in by}, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1]))
    worst = 0.0
    for op, size in keys:
        row = [op, str(size)]
        med = {}
        for c in ours + peers:
            v = by.get((op, size, c))
            if not v:
                row.append("—")
                continue
            med[c] = statistics.median(v)
            row.append("%s (%s–%s)" % (fmt(med[c]), fmt(min(v)), fmt(max(v))))
        best = min((med[p] for p in peers if p in med), default=None)
        if ours and ours[0] in med and best:
            r = med[ours[0]] / best
            worst = max(worst, r)
            row.append("%.2f×%s" % (r, "" if r <= 1.2 else " ✗"))
        else:
            row.append("—")
        print("| " + " | ".join(row) + " |")
    print()
    print("Worst point: %.2f× the best peer (target 1.2×)." % worst)
    print()


if __name__ == "__main__":
    for p in sys.argv[1:]:
        table(p)
