#!/usr/bin/python3
"""bench/compare: nmad against Open MPI and MPICH, side by side.

Run through the bench/compare wrapper (which installs the peers with apt-get
first). Builds bench/mpi/*.c once per MPI implementation, runs every
(benchmark, configuration) pair interleaved, the order rotated each
repetition (A B C, B C A, C A B, ...: no configuration always runs first
or always after the same one) with the same process count and binding, repeats each point, and writes results.json (every
sample), report.md (median and min-max, ratios ours/peer) and PNG plots into
--out. See `bench/compare --help`.

This file holds the command line, the list of configurations, the
interleaved measurement and the results; the modules next to it hold the
rest:
    compare_benches.py   the benchmarks, their parameters and groups
    compare_configs.py   the configurations and how each runs a launch
    compare_setup.py     discovery of the peers, our install and builds
    compare_run.py       launching processes, the run's errors and warnings
    report.py            statistics, markdown report and plots
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import sys
import time
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402
from compare_benches import BENCHES, GROUPS, REPO, bench_params, select_benches  # noqa: E402
from compare_configs import FiConfig, MemcpyConfig, MpiConfig  # noqa: E402
from compare_run import BenchError, Context, log, start_load, stop_load  # noqa: E402
from compare_setup import (build_memcpy, build_mpi, host_info, install_failures,  # noqa: E402
                           installed_strategies, native_configs, nmad_mpi_config, peer_configs)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="bench/compare",
        description="Measure nmad against Open MPI and MPICH side by side (report.md, results.json, PNG plots).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="benchmarks: %s\ngroups for --only: %s\n"
               "configurations: openmpi-vader, openmpi-tcp, mpich, mpich-tcp, nmad, nmad-tcp, nmad-busy, nmad-thread, nmad-tcp-thread, "
               "nmad-offload, nmad-offload-off, nmad-tcp-offload, nmad-tcp-offload-off, nmad-base, nmad-base-tcp, nmad-native-<driver>, "
               "nmad-ofi-tcp, nmad-ofi-shm, openmpi-ofi-tcp, openmpi-ofi-shm, "
               "libfabric-tcp, libfabric-shm, libfabric-tcp-rxm, memcpy-1core" % (", ".join(BENCHES), ", ".join(
                   "%s=%s" % (k, "+".join(v)) for k, v in sorted(GROUPS.items()) if k != "all")))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "compare"), help="output directory (default out/compare)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes, iterations and repetitions (< 5 min here)")
    ap.add_argument("--only", help="comma list of benchmarks or groups (e.g. latency,bw)")
    ap.add_argument("--configs", help="comma list of configurations to run (default: all available)")
    ap.add_argument("--sizes", help="message sizes for every size sweep except memcpy, e.g. 0,8,1K,1M")
    ap.add_argument("--reps", type=int, help="repetitions (launches) per point (default 5, --quick 3)")
    ap.add_argument("--iters", type=int, help="iterations per launch for small messages (benchmark default)")
    ap.add_argument("--np", type=int, default=2, help="processes per MPI job (default 2)")
    ap.add_argument("--timeout", type=float, help="seconds per launch (default 300, --quick 60)")
    ap.add_argument("--build-timeout", type=float,
                    help="seconds for bazel build and for tools/install (default 900, --quick 180)")
    ap.add_argument("--nmad-prefix", help="install prefix of our MPI layer (default out/install)")
    ap.add_argument("--nmad-base-prefix",
                    help="install prefix of an earlier build of our MPI layer: adds nmad-base and nmad-base-tcp "
                         "(its own binaries, measured in the same interleaved run), for before/after comparisons")
    ap.add_argument("--nmad-launch-args", default="", help="extra arguments for our mpiexec")
    ap.add_argument("--nmad-drivers", default="tcp",
                    help="drivers of the native ping-pong (default tcp; ofi-tcp, ofi-shm: the ofi driver over "
                         "libfabric's tcp;ofi_rxm or shm provider)")
    ap.add_argument("--nmad-strategy", default="default", help="strategy of the native ping-pong")
    ap.add_argument("--strategy-configs", action="store_true",
                    help="add nmad-strategy-<name> and nmad-tcp-strategy-<name> for every strategy nmad-info lists")
    ap.add_argument("--no-nmad-build", action="store_true", help="do not run bazel build or tools/install")
    ap.add_argument("--no-install", action="store_true", help="(wrapper) do not apt-get install missing peers")
    ap.add_argument("--load", type=int, default=0, metavar="K",
                    help="start K busy processes (one spinning shell loop each) for the whole run: a loaded "
                         "machine, as users' machines are (default 0)")
    ap.add_argument("--docs-md", help="also write the report without images to this path "
                                      "(e.g. docs/benchmarks/compare-latest.md)")
    args = ap.parse_args(argv)

    t_start = time.time()
    load_start = os.getloadavg()[0]
    reps = args.reps or (3 if args.quick else 5)
    timeout = args.timeout or (60 if args.quick else 300)
    if args.build_timeout is None:
        args.build_timeout = 180 if args.quick else 900
    benches = select_benches(args.only)
    ctx = Context(timeout)
    notes = []
    out = os.path.abspath(args.out)
    builddir = os.path.join(out, "build")
    os.makedirs(out, exist_ok=True)
    failures = install_failures()
    for pkg, msg in failures.items():
        notes.append("apt-get install %s failed: %s" % (pkg, msg))

    configs = []
    if any(not BENCHES[b].get("plain") for b in benches):
        ours = nmad_mpi_config(args, args.np, notes)
        configs.append(ours)
        # The same MPI layer with every peer over the tcp driver (loopback),
        # to stand against the peers' TCP paths.
        tcp = MpiConfig("nmad-tcp", "nmad MPI layer", "tcp driver (loopback)", "nmad", ours.mpicc,
                        list(ours.launch), env={"NMAD_DRIVER": "tcp"}, ours=True)
        # And with busy waiting (NMAD_WAIT=busy), for contrast with the
        # default fixed-spin where threads wait together (latency_mt).
        busy = MpiConfig("nmad-busy", "nmad MPI layer", "default drivers, NMAD_WAIT=busy", "nmad", ours.mpicc,
                         list(ours.launch), env={"NMAD_WAIT": "busy"}, ours=True)
        # With a progress thread (NMAD_PROGRESS=thread), on both drivers.
        thread = MpiConfig("nmad-thread", "nmad MPI layer", "default drivers, NMAD_PROGRESS=thread", "nmad",
                           ours.mpicc, list(ours.launch), env={"NMAD_PROGRESS": "thread"}, ours=True)
        tcp_thread = MpiConfig("nmad-tcp-thread", "nmad MPI layer", "tcp driver (loopback), NMAD_PROGRESS=thread",
                               "nmad", ours.mpicc, list(ours.launch),
                               env={"NMAD_DRIVER": "tcp", "NMAD_PROGRESS": "thread"}, ours=True)
        # Copy offload (eager_send): rank 0 sends with a progress thread
        # that spins (NMAD_PROGRESS_SPIN_US=1000), the other ranks have none
        # and wait by sleeping, leaving their core to rank 0's thread (the
        # arrangement for 2 ranks on 2 cores); with and without the offload.
        # shm with NMAD_RDV_THRESHOLD=64K, so that 16K and 32K are eager.
        offload = []
        for drv, label in (("shm", "nmad"), ("tcp", "nmad-tcp")):
            for on in ("off", "on"):
                env = {"NMAD_DRIVER": drv, "NMAD_PROGRESS_SPIN_US": "1000"}
                if drv == "shm":
                    env["NMAD_RDV_THRESHOLD"] = "65536"
                offload.append(MpiConfig(
                    "%s-offload%s" % (label, "" if on == "on" else "-off"), "nmad MPI layer",
                    "%s; rank 0: progress thread, NMAD_COPY_OFFLOAD=%s; others: NMAD_PROGRESS=none, "
                    "NMAD_WAIT=block" % (", ".join("%s=%s" % kv for kv in env.items()), on), "nmad",
                    ours.mpicc, list(ours.launch), env=env, ours=True,
                    rank_env=({"NMAD_PROGRESS": "thread", "NMAD_COPY_OFFLOAD": on},
                              {"NMAD_PROGRESS": "none", "NMAD_WAIT": "block"})))
        # --strategy-configs: our MPI layer once per strategy nmad-info
        # lists (strategies added later join by themselves), on the
        # default drivers and on tcp: nmad-strategy-<name>,
        # nmad-tcp-strategy-<name> (bench/scenarios, scenario 4).
        strategy_configs = []
        if args.strategy_configs:
            for strat in installed_strategies(ours, notes):
                for label, drv_env in (("nmad", {}), ("nmad-tcp", {"NMAD_DRIVER": "tcp"})):
                    env = dict(drv_env, NMAD_STRATEGY=strat)
                    strategy_configs.append(MpiConfig(
                        "%s-strategy-%s" % (label, strat), "nmad MPI layer",
                        "%s, NMAD_STRATEGY=%s" % ("tcp driver (loopback)" if drv_env else "default drivers", strat),
                        "nmad", ours.mpicc, list(ours.launch), env=env, ours=True))
        # Over the ofi driver, one libfabric provider each (against Open
        # MPI's OFI MTL on the same provider).
        ofi = [MpiConfig("nmad-ofi-%s" % label, "nmad MPI layer", "ofi driver, libfabric %s provider" % prov, "nmad",
                         ours.mpicc, list(ours.launch), env={"NMAD_DRIVER": "ofi", "NMAD_OFI_PROVIDER": prov},
                         ours=True) for label, prov in (("tcp", "tcp;ofi_rxm"), ("shm", "shm"))]
        # An earlier build (--nmad-base-prefix), both drivers: a change
        # measured against the commit before it in one interleaved run.
        base = []
        if args.nmad_base_prefix:
            bp = os.path.abspath(args.nmad_base_prefix)
            launch = [os.path.join(bp, "bin", "mpiexec"), "-n", str(args.np)] + shlex.split(args.nmad_launch_args)
            for name, transport, env in (("nmad-base", "default drivers", {}),
                                         ("nmad-base-tcp", "tcp driver (loopback)", {"NMAD_DRIVER": "tcp"})):
                c = MpiConfig(name, "nmad MPI layer (%s)" % bp, transport, "nmad-base",
                              os.path.join(bp, "bin", "mpicc"), list(launch), env=env, ours=True)
                if not os.access(c.mpicc, os.X_OK) or not os.access(launch[0], os.X_OK):
                    c.skip("--nmad-base-prefix %s has no bin/mpicc and bin/mpiexec" % bp)
                base.append(c)
        for c in [tcp, busy, thread, tcp_thread] + ofi + offload + strategy_configs:
            if ours.status != "ok":
                c.skip(ours.note or "as nmad", ours.status)
            configs.append(c)
        configs += base
        configs += peer_configs(args.np, failures)
    if "pingpong" in benches:
        configs += native_configs(args, notes)
        for prov, fname in (("tcp", None), ("shm", None), ("tcp;ofi_rxm", "libfabric-tcp-rxm")):
            c = FiConfig(prov, fname)
            if not shutil.which("fi_pingpong"):
                c.skip("fi_pingpong not found (package libfabric-bin%s)" % (
                    ": " + failures["libfabric-bin"] if "libfabric-bin" in failures else ""))
            configs.append(c)
    if "memcpy" in benches:
        configs.append(MemcpyConfig())
    if args.configs:
        wanted = [c.strip() for c in args.configs.split(",") if c.strip()]
        unknown = [w for w in wanted if w not in {c.name for c in configs}]
        if unknown:
            raise SystemExit("bench/compare: unknown --configs entries %s (known: %s)" % (
                ", ".join(unknown), ", ".join(c.name for c in configs)))
        configs = [c for c in configs if c.name in wanted]

    for c in configs:
        if c.status != "ok":
            log("skip %s: %s" % (c.name, c.note))
    build_mpi(configs, benches, builddir, ctx)
    for c in configs:
        if isinstance(c, MemcpyConfig) and c.status == "ok":
            build_memcpy(c, os.path.join(builddir, "plain"), ctx)

    hogs = start_load(args.load)
    try:
        samples, runs = measure_all(configs, benches, args, reps, ctx)
    finally:
        stop_load(hogs)
    if args.load:
        notes.append("loaded machine: %d busy processes (spinning shell loops started by bench/compare) ran "
                     "during every measurement" % args.load)
    return finish(args, argv, t_start, load_start, reps, benches, configs, notes, ctx, samples, runs, out)


def measure_all(configs, benches, args, reps, ctx):
    samples, runs = [], []
    disabled = set()
    active = [c for c in configs if c.status == "ok"]
    for rep in range(reps):
        for bench in benches:
            params = bench_params(bench, args)
            # Rotated each repetition: a configuration that always ran
            # right after the same one (or first in a launch series) took
            # that position's warm-up or leftovers with it, e.g. an 8-byte
            # ping-pong 50 % slower in every launch, gone once rotated.
            shift = rep % len(active) if active else 0
            for c in active[shift:] + active[:shift]:
                if not c.supports(bench) or (c.name, bench) in disabled:
                    continue
                t0 = time.time()
                try:
                    s, raw = c.run(bench, params, rep, ctx)
                    samples += s
                    runs.append(raw)
                    log("rep %d/%d %-9s %-15s %5.1fs  %d values" % (rep + 1, reps, bench, c.name,
                                                                   time.time() - t0, len(s)))
                except BenchError as e:
                    ctx.error(c.name, bench, rep, e.args[0] + " (not repeated)")
                    if len(e.args) > 1:
                        runs.append(e.args[1])
                    disabled.add((c.name, bench))
                except OSError as e:
                    ctx.error(c.name, bench, rep, "could not start: %s (not repeated)" % e)
                    disabled.add((c.name, bench))
    return samples, runs


def finish(args, argv, t_start, load_start, reps, benches, configs, notes, ctx, samples, runs, out):
    for cfg, where in ctx.hangs.items():
        launches = sum(1 for r in runs if r.get("config") == cfg)
        ctx.warnings.append("%s: %d of %d launches printed all their results, then hung (in MPI_Finalize) and "
                            "were ended after %.0f s; their results are kept (%s)" % (
                                cfg, len(where), launches, ctx.grace, ", ".join(where)))
    for c in configs:
        if c.status == "ok" and not any(s["config"] == c.name for s in samples):
            c.status = "failed"
            c.note = (c.note + " " if c.note else "") + "no data (every benchmark failed, see failures)"

    cmd = "bench/compare" + ("" if argv is None and len(sys.argv) <= 1 else " " + shlex.join(
        sys.argv[1:] if argv is None else argv))
    data = dict(
        schema=report.SCHEMA,
        meta=OrderedDict(
            command=cmd,
            date=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z"),
            duration_s=round(time.time() - t_start, 1),
            mode="quick" if args.quick else "full",
            reps=reps,
            nprocs=args.np,
            binding="MPI: --bind-to core (Open MPI, MPICH; ours: %s); fi_pingpong: taskset cores 0 and 1; "
                    "memcpy: taskset core 0" % (args.nmad_launch_args or "launcher default"),
            benches=benches,
            params={b: bench_params(b, args) for b in benches},
            host=host_info(),
            load="%.2f / %.2f" % (load_start, os.getloadavg()[0]),
            busy_processes=args.load,
        ),
        configs=[c.describe() for c in configs],
        notes=notes + ctx.warnings,
        errors=ctx.errors,
        samples=samples,
        runs=runs,
    )
    data["meta"]["duration_s"] = round(time.time() - t_start, 1)
    paths = report.write_all(data, out, args.docs_md)
    log("wrote %s, %s and %d plots in %s (%.0f s)" % (
        os.path.basename(paths["markdown"]), os.path.basename(paths["json"]), len(paths["plots"]), out,
        time.time() - t_start))
    if args.docs_md:
        log("wrote %s" % args.docs_md)
    for e in ctx.errors:
        print("bench/compare: FAILED %s / %s (rep %s): %s" % (e["config"], e["bench"], e["rep"], e["message"]),
              file=sys.stderr)
    for c in configs:
        if c.status == "skipped":
            print("bench/compare: skipped %s: %s" % (c.name, c.note), file=sys.stderr)
    print(paths["markdown"])
    if not samples:
        print("bench/compare: ERROR: no benchmark produced data", file=sys.stderr)
        return 1
    return 3 if ctx.errors else 0


if __name__ == "__main__":
    sys.exit(main())
