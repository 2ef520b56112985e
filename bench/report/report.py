"""Statistics, markdown report and plots for bench/compare.

Importable without side effects (matplotlib is loaded only when plotting), so
that tests/compare/test_report.py can check it on recorded data.

The data document (results.json) is:

    {
      "schema": "nmad-compare/1",
      "meta":    {"command": ..., "date": ..., "host": {...}, "reps": 3, ...},
      "configs": [{"name": "openmpi-vader", "kind": "mpi", "impl": "Open MPI",
                   "transport": "shared memory (btl vader)", "ours": false,
                   "status": "ok" | "skipped" | "failed", "note": "...",
                   "library": "Open MPI v4.1.4, ...", "launcher": "..."}],
      "notes":   ["free text shown in the report"],
      "errors":  [{"config": ..., "bench": ..., "rep": 0, "message": ...}],
      "samples": [{"bench": "pingpong", "metric": "latency_us",
                   "config": "openmpi-vader", "size": 8, "rep": 0,
                   "value": 0.31}],
      "runs":    [raw per-launch records: command, rc, seconds, parsed lines]
    }

One sample is one launch's value for one (bench, metric, config, size); the
statistics are taken over the repetitions (launches): median, min, max.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections import OrderedDict

SCHEMA = "nmad-compare/1"

# (bench, metric) -> how to show it. Order = order in the report.
METRICS = OrderedDict(
    [
        (("pingpong", "latency_us"), dict(
            title="Ping-pong latency (one-way = round trip / 2)", unit="µs",
            better="lower", plot="latency.png", kind="line")),
        (("pingpong", "bw_MBps"), dict(
            title="Ping-pong bandwidth (size / one-way latency)", unit="MB/s",
            better="higher", plot="bandwidth.png", kind="line")),
        (("bw", "bw_MBps"), dict(
            title="Streaming bandwidth, unidirectional (window of Isend)", unit="MB/s",
            better="higher", plot="stream_bw.png", kind="line")),
        (("bibw", "bw_MBps"), dict(
            title="Streaming bandwidth, bidirectional (both directions added)", unit="MB/s",
            better="higher", plot="stream_bw.png", kind="line")),
        (("pingpong_mt", "latency_us"), dict(
            title="Ping-pong latency at MPI_THREAD_MULTIPLE (thread safety on)", unit="µs",
            better="lower", plot="latency_mt.png", kind="bar")),
        (("latency_mt.k1", "latency_us"), dict(
            title="Latency, 1 receiving thread (median)", unit="µs",
            better="lower", plot="latency_mt.png", kind="bar")),
        (("latency_mt.k2", "latency_us"), dict(
            title="Latency, 2 receiving threads (median)", unit="µs",
            better="lower", plot="latency_mt.png", kind="bar")),
        (("latency_mt.k4", "latency_us"), dict(
            title="Latency, 4 receiving threads (median)", unit="µs",
            better="lower", plot="latency_mt.png", kind="bar")),
        (("latency_mt.k8", "latency_us"), dict(
            title="Latency, 8 receiving threads (median)", unit="µs",
            better="lower", plot="latency_mt.png", kind="bar")),
        (("msgrate", "rate_Mmsgs"), dict(
            title="Message rate with a window", unit="10⁶ msg/s",
            better="higher", plot="msgrate.png", kind="line")),
        (("multiflow", "rate_Mmsgs"), dict(
            title="Multi-flow small messages (4 flows, interleaved)", unit="10⁶ msg/s",
            better="higher", plot="msgrate.png", kind="line")),
        (("overlap", "overlap_pct"), dict(
            title="Isend/Irecv overlap with computation (IMB-NBC formula)", unit="%",
            better="higher", plot="overlap.png", kind="bar")),
        (("send_overlap", "overlap_pct"), dict(
            title="Isend overlap with computation on the sender, receiver waiting (IMB-NBC formula)", unit="%",
            better="higher", plot="overlap.png", kind="bar")),
        (("recv_overlap", "overlap_pct"), dict(
            title="Irecv overlap with computation on the receiver, sender waiting (IMB-NBC formula)", unit="%",
            better="higher", plot="overlap.png", kind="bar")),
        (("eager_send", "sender_us"), dict(
            title="Eager send: time the sender spends in MPI_Isend + MPI_Wait around 50 µs of computation",
            unit="µs", better="lower", plot="eager_send.png", kind="bar")),
        (("eager_send", "latency_us"), dict(
            title="Eager send: ping-pong latency with MPI_Isend + MPI_Wait", unit="µs",
            better="lower", plot="eager_send.png", kind="bar")),
        (("nbc_overlap.Iallreduce", "overlap_pct"), dict(
            title="Iallreduce overlap (IMB-NBC)", unit="%",
            better="higher", plot="overlap.png", kind="bar")),
        (("nbc_overlap.Ibcast", "overlap_pct"), dict(
            title="Ibcast overlap (IMB-NBC)", unit="%",
            better="higher", plot="overlap.png", kind="bar")),
        (("nbc_overlap.Ialltoall", "overlap_pct"), dict(
            title="Ialltoall overlap (IMB-NBC)", unit="%",
            better="higher", plot="overlap.png", kind="bar")),
        (("oversub4.barrier", "us_per_op"), dict(
            title="MPI_Barrier, 4 ranks on this machine (oversubscribed)", unit="µs",
            better="lower", plot="oversub.png", kind="bar")),
        (("oversub4.allreduce", "us_per_op"), dict(
            title="MPI_Allreduce of 256 doubles, 4 ranks (oversubscribed)", unit="µs",
            better="lower", plot="oversub.png", kind="bar")),
        (("oversub16.alltoall", "iters_per_s"), dict(
            title="MPI_Alltoall loop, 4 KiB per peer, 16 ranks (oversubscribed)", unit="iterations/s",
            better="higher", plot="oversub16.png", kind="bar")),
        (("oversub16.ring", "iters_per_s"), dict(
            title="Ring of 1 MiB messages (MPI_Sendrecv), 16 ranks (oversubscribed)", unit="iterations/s",
            better="higher", plot="oversub16.png", kind="bar")),
        (("reduce_local.float.sum", "us"), dict(
            title="MPI_Reduce_local, MPI_FLOAT MPI_SUM (one call, cache-resident up to 1M)", unit="µs",
            better="lower", plot="reduce.png", kind="line")),
        (("reduce_local.double.max", "us"), dict(
            title="MPI_Reduce_local, MPI_DOUBLE MPI_MAX (one call)", unit="µs",
            better="lower", plot="reduce.png", kind="line")),
        (("allreduce.float.sum", "us"), dict(
            title="MPI_Allreduce, MPI_FLOAT MPI_SUM (slowest rank)", unit="µs",
            better="lower", plot="allreduce.png", kind="line")),
        (("allreduce.double.max", "us"), dict(
            title="MPI_Allreduce, MPI_DOUBLE MPI_MAX (slowest rank)", unit="µs",
            better="lower", plot="allreduce.png", kind="line")),
        (("memcpy", "bw_MBps"), dict(
            title="Single-core memcpy bandwidth (ceiling, bytes copied)", unit="MB/s",
            better="higher", plot="bandwidth.png", kind="line",
            overlay_on=("pingpong", "bw_MBps"))),
    ]
)

# Raw times behind the overlap percentages: shown in a details block.
AUX_METRICS = OrderedDict(
    [(("overlap", m), "Isend/Irecv %s (µs)" % m[:-3]) for m in ("t_comm_us", "t_comp_us", "t_ovrl_us")]
    + [(("send_overlap", m), "Isend (sender computes) %s (µs)" % m[:-3]) for m in ("t_comm_us", "t_comp_us", "t_ovrl_us")]
    + [(("recv_overlap", m), "Irecv (receiver computes) %s (µs)" % m[:-3]) for m in ("t_comm_us", "t_comp_us", "t_ovrl_us")]
    + [(("nbc_overlap." + op, m), "%s %s (µs)" % (op, m[:-3]))
       for op in ("Iallreduce", "Ibcast", "Ialltoall") for m in ("t_pure_us", "t_cpu_us", "t_ovrl_us", "coll_cpu_us")]
    + [(("eager_send", m), "Eager send %s (µs)" % m[:-3]) for m in ("isend_us", "wait_us")]
)

# Values kept from the MPI benchmarks' JSON lines (bench/mpi/*.c).
MPI_VALUE_KEYS = ("latency_us", "bw_MBps", "rate_Mmsgs", "overlap_pct",
                  "t_comm_us", "t_comp_us", "t_ovrl_us", "t_pure_us", "t_cpu_us", "coll_cpu_us",
                  "us_per_op", "iters_per_s", "isend_us", "wait_us", "sender_us", "us")


# --------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------

def summarize(values):
    """Median, min, max, count and spread ((max - min) / median, in %)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return None
    med = statistics.median(vals)
    lo, hi = min(vals), max(vals)
    spread = (hi - lo) / med * 100.0 if med else 0.0
    return {"median": med, "min": lo, "max": hi, "n": len(vals), "spread_pct": spread}


def imb_overlap(t_comm, t_comp, t_ovrl):
    """IMB-NBC overlap in [0, 1]:
    max(0, min(1, (t_comm + t_comp - t_ovrl) / min(t_comm, t_comp)))."""
    m = min(t_comm, t_comp)
    if m <= 0:
        return 0.0
    return max(0.0, min(1.0, (t_comm + t_comp - t_ovrl) / m))


def aggregate(samples):
    """{(bench, metric): {config: {size: stats}}} over the repetitions."""
    groups = {}
    for s in samples:
        key = (s["bench"], s["metric"])
        groups.setdefault(key, {}).setdefault(s["config"], {}).setdefault(int(s["size"]), []).append(s["value"])
    out = {}
    for key, by_cfg in groups.items():
        out[key] = {}
        for cfg, by_size in by_cfg.items():
            out[key][cfg] = {}
            for size in sorted(by_size):
                st = summarize(by_size[size])
                if st is not None:
                    out[key][cfg][size] = st
    return out


def ratios(table, ours, peers):
    """{(our, peer): {size: median(our) / median(peer)}} for every size both
    have (None where the peer's median is 0)."""
    out = OrderedDict()
    for o in ours:
        if o not in table:
            continue
        for p in peers:
            if p not in table or p == o:
                continue
            r = {}
            for size in sorted(set(table[o]) & set(table[p])):
                pm = table[p][size]["median"]
                r[size] = table[o][size]["median"] / pm if pm else None
            if r:
                out[(o, p)] = r
    return out


# --------------------------------------------------------------------------
# Parsers for the benchmarks' output
# --------------------------------------------------------------------------

def parse_mpi_output(text):
    """Lines of bench/mpi/*.c: returns (library, [point dicts]).
    The bench name of nbc_overlap points becomes 'nbc_overlap.<op>'."""
    library = None
    points = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict) or "bench" not in obj:
            continue
        if "library" in obj:
            library = obj["library"]
            continue
        if "size" not in obj:
            continue
        if obj.get("op"):
            obj["bench"] = "%s.%s" % (obj["bench"], obj["op"])
        points.append(obj)
    return library, points


def keep_sample(metric, size):
    """A bandwidth of a 0-byte message is meaningless: not kept."""
    return not (metric.endswith("MBps") and int(size) == 0)


def points_to_samples(points, config, rep):
    """Flattens parsed points into samples (one per value key)."""
    out = []
    for p in points:
        for k in MPI_VALUE_KEYS:
            if k in p and p[k] is not None and keep_sample(k, p["size"]):
                out.append({"bench": p["bench"], "metric": k, "config": config,
                            "size": int(p["size"]), "rep": rep, "value": float(p[k])})
    return out


_FI_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _fi_size(tok):
    tok = tok.strip().lower()
    if tok and tok[-1] in _FI_UNITS:
        return int(float(tok[:-1]) * _FI_UNITS[tok[-1]])
    return int(tok)


def parse_fi_pingpong(text):
    """fi_pingpong table -> [{"size", "latency_us", "bw_MBps"}].
    fi_pingpong's usec/xfer is one-way (two transfers per iteration) and its
    MB/sec is 10^6 B/s, like the MPI benchmarks."""
    out = []
    header = None
    for line in text.splitlines():
        cols = line.split()
        if not cols:
            continue
        if cols[0] == "bytes":
            header = cols
            continue
        if header is None or len(cols) != len(header):
            continue
        try:
            row = dict(zip(header, cols))
            out.append({"size": _fi_size(row["bytes"]),
                        "latency_us": float(row["usec/xfer"]),
                        "bw_MBps": float(row["MB/sec"])})
        except (KeyError, ValueError):
            continue
    return out


def parse_nmad_native(text):
    """The ONE JSON object printed by bazel-bin/bench/nmad_pingpong --json:
    {"benchmark": "nmad_pingpong", "driver": ..., "strategy": ...,
     "results": [{"size", "reps", "latency_us": {"median", "min", "max"},
                  "bandwidth_MBps", "samples_us": [...]}]}
    Returns (header dict, [{"size", "latency_us", "bw_MBps", "raw"}]); the
    latency of one launch is the median over its repetitions."""
    obj = None
    text = text.strip()
    try:
        obj = json.loads(text)
    except ValueError:
        # Tolerate log lines around the object: take the last JSON line.
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                    break
                except ValueError:
                    continue
    if not isinstance(obj, dict) or "results" not in obj:
        raise ValueError("nmad_pingpong did not print the expected JSON object")
    points = []
    for r in obj["results"]:
        lat = r.get("latency_us")
        med = lat.get("median") if isinstance(lat, dict) else lat
        bw = r.get("bandwidth_MBps")
        if bw is None and med:
            bw = r["size"] / med
        points.append({"size": int(r["size"]), "latency_us": float(med),
                       "bw_MBps": float(bw) if bw is not None else None, "raw": r})
    header = {k: v for k, v in obj.items() if k != "results"}
    return header, points


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------

def fmt_size(n):
    n = int(n)
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def fmt_num(v):
    if v is None:
        return "–"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3f" % v


def fmt_cell(st):
    """'median (min–max)'."""
    if st is None:
        return "–"
    return "%s (%s–%s)" % (fmt_num(st["median"]), fmt_num(st["min"]), fmt_num(st["max"]))


def fmt_ratio(r):
    return "–" if r is None else "%.2f×" % r


def _config_order(data):
    return [c["name"] for c in data.get("configs", [])]


def _ordered(cfgs, order):
    known = [c for c in order if c in cfgs]
    return known + sorted(c for c in cfgs if c not in order)


def _ours(data):
    return {c["name"] for c in data.get("configs", []) if c.get("ours")}


def _md_table(header, rows, numeric=True):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i and numeric else "---" for i in range(len(header))) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    return "\n".join(lines)


def metric_table(table, order):
    """Markdown table: size rows x configuration columns, 'median (min–max)'."""
    cfgs = _ordered(list(table), order)
    sizes = sorted({s for c in cfgs for s in table[c]})
    rows = [[fmt_size(s)] + [fmt_cell(table[c].get(s)) for c in cfgs] for s in sizes]
    return _md_table(["size"] + cfgs, rows)


def ratio_table(rt):
    pairs = list(rt)
    sizes = sorted({s for p in pairs for s in rt[p]})
    header = ["size"] + ["%s / %s" % p for p in pairs]
    rows = [[fmt_size(s)] + [fmt_ratio(rt[p].get(s)) for p in pairs] for s in sizes]
    return _md_table(header, rows)


def headline(agg, order):
    """Per configuration: 8 B latency, ping-pong bandwidth at 1 MiB and at the
    largest size, streaming bandwidth at the largest size (sizes >= 1 MiB).
    Returns (rows, header)."""
    lat = agg.get(("pingpong", "latency_us"), {})
    bw = agg.get(("pingpong", "bw_MBps"), {})
    sbw = agg.get(("bw", "bw_MBps"), {})
    rows = []
    for c in _ordered(sorted(set(lat) | set(bw) | set(sbw)), order):
        def at(t, size):
            st = t.get(c, {}).get(size) if size is not None else None
            return "%s @ %s" % (fmt_cell(st), fmt_size(size)) if st else "–"

        def largest(t):
            sizes = [s for s in t.get(c, {}) if s >= (1 << 20)]
            return max(sizes) if sizes else None

        rows.append([c, fmt_cell(lat.get(c, {}).get(8)), at(bw, 1 << 20), at(bw, largest(bw)),
                     at(sbw, largest(sbw))])
    return rows, ["configuration", "latency 8 B (µs)", "ping-pong bandwidth 1 MiB (MB/s)",
                  "ping-pong bandwidth, largest (MB/s)", "streaming bandwidth, largest (MB/s)"]


# --------------------------------------------------------------------------
# Markdown report
# --------------------------------------------------------------------------

def render_markdown(data, plots=(), image_prefix="", embed=True):
    """The whole report. plots: PNG file names, embedded as images (with
    image_prefix before each) or, with embed=False, only named."""
    meta = data.get("meta", {})
    order = _config_order(data)
    ours = _ours(data)
    agg = aggregate(data.get("samples", []))
    out = []
    out.append("# nmad vs Open MPI vs MPICH — benchmark comparison")
    out.append("")
    if meta.get("command"):
        out.append("Command: `%s`" % meta["command"])
        out.append("")
    facts = []
    for k, label in (("date", "date"), ("duration_s", "duration (s)"), ("reps", "repetitions per point"),
                     ("nprocs", "processes"), ("binding", "binding"), ("mode", "mode")):
        if k in meta:
            v = meta[k]
            facts.append("- %s: %s" % (label, ("%.0f" % v) if isinstance(v, float) else v))
    if meta.get("load"):
        facts.append("- load average (1 min) at start / end: %s (the machine is shared: a load above ~0.5 "
                     "means other work competed with the benchmarks)" % meta["load"])
    host = meta.get("host", {})
    if host:
        facts.append("- host: " + ", ".join("%s %s" % (k, v) for k, v in host.items()))
    out.extend(facts)
    out.append("")
    out.append("Each cell is the **median (min–max)** over the repetitions; every repetition is a "
               "separate launch and the configurations run interleaved, in an order rotated every repetition (A B C, B C A, C A B …). "
               "Ratios are median(ours) / median(peer): below 1 is better for latency, above 1 is "
               "better for bandwidth, rates and overlap. MB/s = 10⁶ B/s.")
    out.append("")

    # Configurations.
    out.append("## Configurations")
    out.append("")
    rows = []
    for c in data.get("configs", []):
        rows.append([c["name"], c.get("impl", ""), c.get("transport", ""),
                     "yes" if c.get("ours") else "", c.get("status", ""),
                     " ".join((c.get("library") or "").replace("|", "/").split()),
                     " ".join((c.get("note") or "").replace("|", "/").split())])
    out.append(_md_table(["configuration", "implementation", "transport", "ours", "status", "library", "note"],
                         rows, numeric=False))
    out.append("")

    skipped = [c for c in data.get("configs", []) if c.get("status") != "ok"]
    notes = list(data.get("notes", []))
    errors = data.get("errors", [])
    if skipped or notes or errors:
        out.append("## Skipped, failures and notes")
        out.append("")
        for c in skipped:
            out.append("- **%s** %s: %s" % (c["name"], c.get("status"), c.get("note", "")))
        for n in notes:
            out.append("- %s" % n)
        for e in errors:
            msg = " ".join(str(e.get("message", "")).split())
            if len(msg) > 400:
                msg = msg[:400] + " …"
            out.append("- failure: %s / %s (rep %s): %s" % (e.get("config"), e.get("bench"), e.get("rep"), msg))
        out.append("")

    if not any(c in ours for t in agg.values() for c in t):
        out.append("> No nmad configuration produced data in this run (see above): the tables "
                   "show the peers and the raw ceilings alone, without ours/peer ratios.")
        out.append("")

    hrows, hhead = headline(agg, order)
    if hrows:
        out.append("## Headline")
        out.append("")
        out.append(_md_table(hhead, hrows))
        out.append("")

    if plots and embed:
        out.append("## Plots")
        out.append("")
        for p in plots:
            out.append("![%s](%s%s)" % (os.path.splitext(p)[0], image_prefix, p))
            out.append("")
    elif plots:
        out.append("Plots (not embedded here): %s, written with report.md and results.json into the `--out` "
                   "directory of the command above." % ", ".join("`%s`" % p for p in plots))
        out.append("")

    for key, spec in METRICS.items():
        if key not in agg or not agg[key]:
            continue
        table = agg[key]
        out.append("## %s [%s]" % (spec["title"], spec["unit"]))
        out.append("")
        out.append("`%s` / `%s`, %s is better." % (key[0], key[1], spec["better"]))
        out.append("")
        out.append(metric_table(table, order))
        out.append("")
        our_cfgs = [c for c in _ordered(list(table), order) if c in ours]
        peer_cfgs = [c for c in _ordered(list(table), order) if c not in ours]
        rt = ratios(table, our_cfgs, peer_cfgs)
        if rt:
            out.append("Ratios ours / peer (%s is better):" % ("< 1" if spec["better"] == "lower" else "> 1"))
            out.append("")
            out.append(ratio_table(rt))
            out.append("")

    aux = [(k, label) for k, label in AUX_METRICS.items() if k in agg and agg[k]]
    if aux:
        out.append("<details><summary>Raw overlap times (median over iterations, max over ranks, µs)</summary>")
        out.append("")
        for k, label in aux:
            out.append("**%s**" % label)
            out.append("")
            out.append(metric_table(agg[k], order))
            out.append("")
        out.append("</details>")
        out.append("")

    # Any other (bench, metric) pair a future benchmark adds.
    extra = [k for k in agg if k not in METRICS and k not in AUX_METRICS]
    for k in sorted(extra):
        out.append("## %s / %s" % k)
        out.append("")
        out.append(metric_table(agg[k], order))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------

def _style(cfg_kind):
    return {"ceiling": dict(linestyle="--"), "raw": dict(linestyle=":")}.get(cfg_kind, dict(linestyle="-"))


def make_plots(data, outdir):
    """Writes the PNG plots; returns their file names (in report order)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullLocator

    agg = aggregate(data.get("samples", []))
    order = _config_order(data)
    kinds = {c["name"]: c.get("kind", "mpi") for c in data.get("configs", [])}
    os.makedirs(outdir, exist_ok=True)
    files = OrderedDict()
    overlays = {}
    for key, spec in METRICS.items():
        if key in agg and agg[key]:
            if spec.get("overlay_on") in agg:
                overlays.setdefault(spec["overlay_on"], []).append(key)
            else:
                files.setdefault(spec["plot"], []).append(key)
    written = []
    size_fmt = FuncFormatter(lambda x, _pos: fmt_size(x) if x >= 1 or x == 0 else "")
    colors = {}
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, c in enumerate(order):
        colors[c] = cycle[i % len(cycle)]

    for fname, keys in files.items():
        kind = METRICS[keys[0]]["kind"]
        n = len(keys)
        ncols = 1 if n == 1 else 2
        nrows = (n + ncols - 1) // ncols
        fig, axes = plt.subplots(nrows, ncols, figsize=(7.5 * ncols, 4.8 * nrows), squeeze=False)
        for ax, key in zip(axes.flat, keys):
            spec = METRICS[key]
            table = dict(agg[key])
            for okey in overlays.get(key, []):
                for c, series in agg[okey].items():
                    table.setdefault(c, series)
            cfgs = _ordered(list(table), order)
            if kind == "line":
                has_zero = any(0 in table[c] for c in cfgs)
                for c in cfgs:
                    sizes = sorted(s for s in table[c] if spec["unit"] != "MB/s" or s > 0)
                    if not sizes:
                        continue
                    med = [table[c][s]["median"] for s in sizes]
                    lo = [m - table[c][s]["min"] for m, s in zip(med, sizes)]
                    hi = [table[c][s]["max"] - m for m, s in zip(med, sizes)]
                    ax.errorbar(sizes, med, yerr=[lo, hi], marker="o", markersize=3, capsize=2,
                                label=c, color=colors.get(c), **_style(kinds.get(c)))
                if has_zero and spec["unit"] != "MB/s":
                    ax.set_xscale("symlog", base=2, linthresh=1)
                else:
                    ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                allsizes = [s for c in cfgs for s in table[c] if s > 0]
                if allsizes:
                    top = max(allsizes).bit_length() - 1
                    bottom = 0 if has_zero else min(allsizes).bit_length() - 1
                    ticks = [1 << k for k in range(bottom - bottom % 2, top + 1, 2)]
                    if len(ticks) > 12:
                        ticks = ticks[::2]
                    ax.set_xticks(([0] if has_zero and spec["unit"] != "MB/s" else []) + ticks)
                    ax.xaxis.set_minor_locator(NullLocator())
                ax.xaxis.set_major_formatter(size_fmt)
                ax.tick_params(axis="x", labelsize=8)
                ax.set_xlabel("message size (bytes)")
                ax.grid(True, which="both", alpha=0.3)
            else:
                sizes = sorted({s for c in cfgs for s in table[c]})
                width = 0.8 / max(1, len(cfgs))
                for j, c in enumerate(cfgs):
                    xs, med, lo, hi = [], [], [], []
                    for i, s in enumerate(sizes):
                        st = table[c].get(s)
                        if st is None:
                            continue
                        xs.append(i + (j - (len(cfgs) - 1) / 2.0) * width)
                        med.append(st["median"])
                        lo.append(st["median"] - st["min"])
                        hi.append(st["max"] - st["median"])
                    ax.bar(xs, med, width, yerr=[lo, hi], capsize=2, label=c, color=colors.get(c))
                ax.set_xticks(range(len(sizes)))
                ax.set_xticklabels([fmt_size(s) for s in sizes])
                ax.set_ylim(0, 105)
                ax.set_xlabel("message size (bytes)")
                ax.grid(True, axis="y", alpha=0.3)
            ax.set_title(spec["title"], fontsize=10)
            ax.set_ylabel("%s [%s]" % (key[1], spec["unit"]))
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        fig.tight_layout()
        path = os.path.join(outdir, fname)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(fname)
    return written


# --------------------------------------------------------------------------
# Everything at once
# --------------------------------------------------------------------------

DOCS_BEGIN = "<!-- bench/compare report: begin -->"
DOCS_END = "<!-- bench/compare report: end -->"


def write_docs(path, md):
    """Writes md to path; if path already holds the begin/end markers, only
    the text between them is replaced (so docs/BENCHMARKS.md can embed the
    latest report among hand-written sections)."""
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old and DOCS_BEGIN in old and DOCS_END in old:
        head, rest = old.split(DOCS_BEGIN, 1)
        _, tail = rest.split(DOCS_END, 1)
        text = head + DOCS_BEGIN + "\n" + md.rstrip("\n") + "\n" + DOCS_END + tail
    else:
        text = md
    with open(path, "w") as f:
        f.write(text)


def write_all(data, outdir, docs_md=None):
    """results.json, the PNG plots and report.md in outdir (and, if docs_md,
    the report without embedded images at that path). Returns the paths."""
    os.makedirs(outdir, exist_ok=True)
    jpath = os.path.join(outdir, "results.json")
    with open(jpath, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    plots, plot_error = [], None
    try:
        plots = make_plots(data, outdir)
    except ImportError as e:  # matplotlib missing: the report still comes out
        plot_error = "plots not written: %s (install python3-matplotlib)" % e
    if plot_error:
        data.setdefault("notes", []).append(plot_error)
    md = render_markdown(data, plots)
    mpath = os.path.join(outdir, "report.md")
    with open(mpath, "w") as f:
        f.write(md)
    paths = {"json": jpath, "markdown": mpath, "plots": [os.path.join(outdir, p) for p in plots]}
    if docs_md:
        os.makedirs(os.path.dirname(os.path.abspath(docs_md)), exist_ok=True)
        write_docs(docs_md, render_markdown(data, plots, embed=False))
        paths["docs"] = docs_md
    return paths


def load(path):
    with open(path) as f:
        return json.load(f)


if __name__ == "__main__":  # re-render a report from a results.json
    import argparse

    ap = argparse.ArgumentParser(description="Re-render report.md and the plots from results.json")
    ap.add_argument("results")
    ap.add_argument("--out", required=True)
    ap.add_argument("--docs-md")
    a = ap.parse_args()
    print(json.dumps(write_all(load(a.results), a.out, a.docs_md), indent=1))
