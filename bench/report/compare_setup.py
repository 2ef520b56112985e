"""What bench/compare finds and builds before measuring: the peers (Open MPI,
MPICH) and why one is missing, our MPI layer installed from the current tree
with the strategies it lists, nmad's native ping-pong built with Bazel, the
benchmarks compiled once per MPI implementation, and the host's description.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
from collections import OrderedDict

from compare_benches import BENCHES, MPI_SRC, REPO
from compare_configs import MpiConfig, NativeConfig
from compare_run import log, run_cmd, tail

OMPI_COMMON = ["--allow-run-as-root", "--bind-to", "core", "--mca", "oob_tcp_if_include", "lo",
               "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]


def install_failures():
    path = os.environ.get("NMAD_COMPARE_INSTALL_LOG")
    out = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if "\t" in line:
                    pkg, msg = line.rstrip("\n").split("\t", 1)
                    out[pkg] = msg
    return out


def peer_configs(np, failures):
    cfgs = []

    def missing(tools, pkgs):
        absent = [t for t in tools if not shutil.which(t)]
        if not absent:
            return None
        why = "not available: %s not found" % ", ".join(absent)
        failed = ["%s (%s)" % (p, failures[p]) for p in pkgs if p in failures]
        if failed:
            why += "; apt-get install failed for " + "; ".join(failed)
        else:
            why += " (packages %s; run bench/compare without --no-install, as root)" % " ".join(pkgs)
        return why

    why = missing(["mpicc.openmpi", "mpirun.openmpi"], ["openmpi-bin", "libopenmpi-dev"])
    for name, btl, transport in (("openmpi-vader", "self,vader", "shared memory (pml ob1, btl vader)"),
                                 ("openmpi-tcp", "self,tcp", "TCP loopback (pml ob1, btl tcp)")):
        c = MpiConfig(name, "Open MPI", transport, "openmpi", "mpicc.openmpi",
                      ["mpirun.openmpi", "-np", str(np)] + OMPI_COMMON + ["--mca", "btl", btl])
        if why:
            c.skip(why)
        cfgs.append(c)
    # Open MPI's OFI MTL over the libfabric providers the ofi driver uses
    # (it leaves tcp and shm out unless told to include them).
    for name, prov in (("openmpi-ofi-tcp", "tcp"), ("openmpi-ofi-shm", "shm")):
        common = [a for a in OMPI_COMMON]
        common[common.index("ob1")] = "cm"
        c = MpiConfig(name, "Open MPI", "libfabric %s provider (pml cm, mtl ofi)" % prov, "openmpi",
                      "mpicc.openmpi", ["mpirun.openmpi", "-np", str(np)] + common +
                      ["--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", prov])
        if why:
            c.skip(why)
        cfgs.append(c)
    why = missing(["mpicc.mpich", "mpiexec.mpich"], ["mpich", "libmpich-dev"])
    for name, env, transport in (
            ("mpich", {"UCX_NET_DEVICES": "lo"}, "ch4:ucx, default (shared memory)"),
            ("mpich-tcp", {"UCX_NET_DEVICES": "lo", "UCX_TLS": "tcp,self", "MPIR_CVAR_NOLOCAL": "1"},
             "ch4:ucx, TCP loopback (UCX_TLS=tcp, NOLOCAL)")):
        c = MpiConfig(name, "MPICH", transport, "mpich", "mpicc.mpich",
                      ["mpiexec.mpich", "-n", str(np), "-bind-to", "core"], env=env)
        if why:
            c.skip(why)
        elif name == "mpich-tcp":
            c.note = ("known peer bug: after large transfers MPICH 4.0.2 + UCX tcp sometimes hangs in "
                      "MPI_Finalize (PMPI_Finalize -> ucp_worker_progress); such a job is ended after its "
                      "last result and its results are kept")
        cfgs.append(c)
    return cfgs


def nmad_mpi_config(args, np, notes):
    prefix = os.path.abspath(args.nmad_prefix or os.path.join(REPO, "out", "install"))
    mpicc = os.path.join(prefix, "bin", "mpicc")
    installer = os.path.join(REPO, "tools", "install")
    # Always reinstall (unless told not to): a prefix left by an earlier
    # build would silently measure old code.
    if not args.no_nmad_build and os.access(installer, os.X_OK):
        log("installing the current tree: tools/install %s" % prefix)
        rc, out, err, secs = run_cmd([installer, prefix], args.build_timeout, cwd=REPO)
        if rc != 0:
            notes.append("`tools/install %s` failed (exit %d, %.0f s): %s" % (
                os.path.relpath(prefix, REPO), rc, secs, tail(err) or tail(out)))
    launch = None
    for cand in ("mpiexec", "mpirun"):
        p = os.path.join(prefix, "bin", cand)
        if os.access(p, os.X_OK):
            launch = p
            break
    c = MpiConfig("nmad", "nmad MPI layer", "default drivers", "nmad", mpicc,
                  [launch or "mpiexec", "-n", str(np)] + shlex.split(args.nmad_launch_args), ours=True)
    if not os.access(mpicc, os.X_OK):
        where = os.path.relpath(prefix, REPO) if prefix.startswith(REPO) else prefix
        c.skip("our MPI layer is not installed yet: no %s/bin/mpicc (`tools/install %s` provides it; "
               "or pass --nmad-prefix)" % (where, where))
    elif launch is None:
        c.skip("%s/bin has mpicc but no mpiexec/mpirun" % prefix)
    return c


def installed_strategies(ours, notes):
    """The strategies the installed nmad-info lists (--strategies: an
    indented line per strategy, its name first)."""
    info = os.path.join(os.path.dirname(ours.mpicc), "nmad-info")
    try:
        out = subprocess.run([info, "--strategies"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        notes.append("nmad-info --strategies failed: %s" % e)
        return []
    names, inside = [], False
    for line in out.splitlines():
        if line.startswith("Strategies"):
            inside = True
        elif inside and line.startswith("  ") and len(line.split()) >= 2 and \
                line.split()[1] in ("built-in", "plugin", "registered"):
            names.append(line.split()[0])  # not "plugin directories: ..." and the like
        elif inside and line.strip() and not line.startswith(" "):
            inside = False
    return names


def native_configs(args, notes):
    drivers = [d for d in args.nmad_drivers.split(",") if d]
    names = ["nmad-native-%s" % d for d in drivers]
    if args.no_nmad_build:
        return [_skipped_native(d, "--no-nmad-build given") for d in drivers]
    if not (os.path.exists(os.path.join(REPO, "bench", "BUILD.bazel")) or
            os.path.exists(os.path.join(REPO, "bench", "BUILD"))):
        why = "native benchmark not available yet: no //bench package (bench/BUILD.bazel) defining nmad_pingpong"
        return [_skipped_native(d, why) for d in drivers]
    if not shutil.which("bazel"):
        return [_skipped_native(d, "bazel not found") for d in drivers]
    log("bazel build //bench:nmad_pingpong //tools:nmad-run (for %s)" % ", ".join(names))
    rc, out, err, secs = run_cmd(["bazel", "build", "//bench:nmad_pingpong", "//tools:nmad-run"],
                                 args.build_timeout, cwd=REPO)
    if rc != 0:
        why = "`bazel build //bench:nmad_pingpong //tools:nmad-run` failed (exit %d, %.0f s): %s" % (
            rc, secs, tail(err, 4))
        return [_skipped_native(d, why) for d in drivers]
    run_bin = os.path.join(REPO, "bazel-bin", "tools", "nmad-run")
    bench_bin = os.path.join(REPO, "bazel-bin", "bench", "nmad_pingpong")
    if not (os.access(run_bin, os.X_OK) and os.access(bench_bin, os.X_OK)):
        return [_skipped_native(d, "bazel build succeeded but %s or %s is missing" % (run_bin, bench_bin))
                for d in drivers]
    return [NativeConfig(d, run_bin, bench_bin, args.nmad_strategy) for d in drivers]


def _skipped_native(driver, why):
    c = NativeConfig(driver, os.path.join(REPO, "bazel-bin", "tools", "nmad-run"),
                     os.path.join(REPO, "bazel-bin", "bench", "nmad_pingpong"))
    c.skip(why)
    return c


def build_mpi(configs, benches, builddir, ctx):
    """Compiles each needed source once per implementation."""
    srcs = sorted({BENCHES[b]["src"] for b in benches if not BENCHES[b].get("plain")})
    by_impl = OrderedDict()
    for c in configs:
        if isinstance(c, MpiConfig) and c.status == "ok":
            by_impl.setdefault(c.impl_key, []).append(c)
    for impl, cfgs in by_impl.items():
        d = os.path.join(builddir, impl)
        os.makedirs(d, exist_ok=True)
        mpicc = cfgs[0].mpicc
        built = {}
        for src in srcs:
            exe = os.path.join(d, os.path.splitext(src)[0])
            libs = sorted({l for b in benches if BENCHES[b]["src"] == src for l in BENCHES[b].get("libs", [])})
            argv = [mpicc, "-O2", "-std=c11", "-o", exe, os.path.join(MPI_SRC, src)] + libs
            rc, out, err, _ = run_cmd(argv, 300)
            if rc == 0:
                built[src] = exe
            else:
                ctx.error(",".join(c.name for c in cfgs), src, "-", "build failed: %s: %s" % (
                    " ".join(argv), tail(err, 8)))
        if srcs and not built:
            for c in cfgs:
                c.skip("no benchmark compiled with %s (see failures)" % mpicc, "failed")
        for c in cfgs:
            c.binaries = dict(built)


def build_memcpy(cfg, builddir, ctx):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        cfg.skip("no C compiler (cc)")
        return
    os.makedirs(builddir, exist_ok=True)
    exe = os.path.join(builddir, "memcpy_bw")
    argv = [cc, "-O2", "-std=c11", "-o", exe, os.path.join(MPI_SRC, "memcpy_bw.c")]
    rc, out, err, _ = run_cmd(argv, 120)
    if rc != 0:
        cfg.skip("build failed: %s" % tail(err, 6), "failed")
    else:
        cfg.binary = exe


def host_info():
    info = OrderedDict()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cores"] = os.cpu_count()
    info["kernel"] = platform.release()
    try:
        with open("/etc/debian_version") as f:
            info["debian"] = f.read().strip()
    except OSError:
        pass
    return info
