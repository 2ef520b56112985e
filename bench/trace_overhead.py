#!/usr/bin/env python3
"""Cost of NMAD_TRACE on 8-byte native ping-pong latency, off and on side by
side: LAUNCHES launches of each, interleaved (off, on, off, on, ...), per
driver; each launch's median one-way latency, then the median of those.
Prints one JSON object.

    bazel build //tools:nmad-run //bench:nmad_pingpong
    nmad-quiet bench/trace_overhead.py [--launches 7] [--reps 20000] [--drivers shm,tcp]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def launch(binroot, driver, reps, trace_prefix):
    env = dict(os.environ)
    env.pop("NMAD_TRACE", None)
    if trace_prefix:
        env["NMAD_TRACE"] = trace_prefix
    cmd = [os.path.join(binroot, "tools/nmad-run"), "-n", "2", "--timeout", "120",
           os.path.join(binroot, "bench/nmad_pingpong"), "--sizes", "8", "--reps", str(reps),
           "--driver", driver, "--json"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    return doc["results"][0]["latency_us"]["median"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=7)
    ap.add_argument("--reps", type=int, default=20000)
    ap.add_argument("--drivers", default="shm,tcp")
    ap.add_argument("--bin", default=os.environ.get("BAZEL_BIN", "bazel-bin"))
    a = ap.parse_args()
    result = {"benchmark": "trace_overhead", "size": 8, "launches": a.launches, "reps": a.reps, "drivers": []}
    with tempfile.TemporaryDirectory() as tmp:
        for driver in a.drivers.split(","):
            off, on = [], []
            trace_bytes = 0
            for i in range(a.launches):
                off.append(launch(a.bin, driver, a.reps, None))
                prefix = os.path.join(tmp, f"{driver}{i}")
                on.append(launch(a.bin, driver, a.reps, prefix))
                trace_bytes = sum(os.path.getsize(f"{prefix}.{r}") for r in (0, 1))
                for r in (0, 1):
                    os.unlink(f"{prefix}.{r}")
            m_off, m_on = statistics.median(off), statistics.median(on)
            result["drivers"].append({
                "driver": driver, "off_us": off, "on_us": on,
                "off_median_us": round(m_off, 4), "on_median_us": round(m_on, 4),
                "overhead_pct": round(100 * (m_on / m_off - 1), 2),
                "trace_bytes_per_launch": trace_bytes,
            })
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
