#!/usr/bin/env python3
"""Unexpected-message memory and drain time: nmad (default bound, no bound)
next to Open MPI and MPICH, on the same MPI program (bench/mpi/unexpected.c).

    bench/unexpected_memory.py [--counts 10000,100000,1000000] [--reps 3]
                               [--prefix out/install] [--timeout 300]
                               [--only nmad,nmad-nobound,openmpi,mpich]

Rank 0 posts N 8-byte sends before rank 1 receives any; rank 1 reports its
resident-memory growth at the peak and after receiving everything, and the
time the receives took (the drain). Every configuration runs `--reps` times,
interleaved (A B C D A B C D ...), and the table gives the median and the
range. nmad's MPI layer comes from `tools/install PREFIX` (run first when
PREFIX/bin/mpicc is missing); the peers from the Debian packages
(mpicc.openmpi / mpirun.openmpi, mpicc.mpich / mpiexec.mpich). All of them
run both ranks on this host, over their shared-memory paths.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "bench", "mpi", "unexpected.c")


def configs(prefix):
    ours = os.path.join(prefix, "bin")
    ompi = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "pml", "ob1",
            "--mca", "btl", "self,vader"]
    return [
        ("nmad", "nmad, default bound (NMAD_UNEXPECTED_MAX=64M)", os.path.join(ours, "mpicc"),
         [os.path.join(ours, "mpiexec"), "-n", "2"], {}),
        ("nmad-nobound", "nmad, no bound (NMAD_UNEXPECTED_MAX=0)", os.path.join(ours, "mpicc"),
         [os.path.join(ours, "mpiexec"), "-n", "2"], {"NMAD_UNEXPECTED_MAX": "0"}),
        ("openmpi", "Open MPI 4.1 (ob1, vader)", "mpicc.openmpi", ompi, {}),
        ("mpich", "MPICH 4.0 (ch4:ucx, its shared memory)", "mpicc.mpich", ["mpiexec.mpich", "-n", "2"],
         {"UCX_NET_DEVICES": "lo"}),
    ]


def run(argv, env, timeout):
    e = dict(os.environ)
    e.update(env)
    try:
        p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "did not finish in %d s" % timeout
    for line in p.stdout.splitlines():
        if line.startswith("{") and '"unexpected"' in line:
            return json.loads(line), None
    tail = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return None, "failed: " + tail[:160]


def med(xs, fmt):
    if not xs:
        return "—"
    m = statistics.median(xs)
    if len(xs) == 1:
        return fmt % m
    return (fmt + " (" + fmt + "–" + fmt + ")") % (m, min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="10000,100000,1000000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prefix", default=os.path.join(REPO, "out", "install"))
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", help="also write every sample here")
    args = ap.parse_args()
    prefix = os.path.abspath(args.prefix)
    if not os.access(os.path.join(prefix, "bin", "mpicc"), os.X_OK):
        print("installing nmad: tools/install %s" % prefix, file=sys.stderr)
        subprocess.run([os.path.join(REPO, "tools", "install"), prefix], check=True)
    cfgs = [c for c in configs(prefix) if not args.only or c[0] in args.only.split(",")]
    tmp = tempfile.mkdtemp(prefix="nmad-unexpected-")
    exes = {}
    for name, _, cc, _, _ in cfgs:
        exe = os.path.join(tmp, "unexpected-" + name)
        if shutil.which(cc) is None and not os.access(cc, os.X_OK):
            print("%s: %s not found, skipped" % (name, cc), file=sys.stderr)
            continue
        subprocess.run([cc, "-O2", "-std=c11", "-o", exe, SRC], check=True, capture_output=True)
        exes[name] = exe
    counts = [int(c) for c in args.counts.split(",")]
    samples = {}  # (name, n) -> list of results
    errors = {}
    for n in counts:
        for rep in range(args.reps):
            for name, _, _, launch, env in cfgs:
                if name not in exes or errors.get((name, n)):
                    continue
                res, err = run(launch + [exes[name], str(n)], env, args.timeout)
                print("n=%d rep %d %s: %s" % (n, rep + 1, name, res if res else err), file=sys.stderr)
                if res:
                    samples.setdefault((name, n), []).append(res)
                else:
                    errors[(name, n)] = err  # a configuration that failed once is not run again
    print("| messages | implementation | RSS growth at the peak (MiB) | after draining (MiB) | drain (ms) |")
    print("|---:|---|---:|---:|---:|")
    for n in counts:
        for name, label, _, _, _ in cfgs:
            if name not in exes:
                continue
            xs = samples.get((name, n), [])
            if (name, n) in errors and not xs:
                print("| %s | %s | %s | | |" % (format(n, ","), label, errors[(name, n)]))
                continue
            note = "" if (name, n) not in errors else " (then %s)" % errors[(name, n)]
            print("| %s | %s | %s | %s | %s%s |" % (
                format(n, ","), label, med([x["growth_mib"] for x in xs], "%.1f"),
                med([x["after_mib"] for x in xs], "%.1f"), med([x["drain_ms"] for x in xs], "%.0f"), note))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"%s/%d" % k: v for k, v in samples.items()}, f, indent=1)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
