#!/usr/bin/python3
"""bench/compare: nmad against Open MPI and MPICH, side by side.

Run through the bench/compare wrapper (which installs the peers with apt-get
first). Builds bench/mpi/*.c once per MPI implementation, runs every
(benchmark, configuration) pair interleaved (A B C A B C ...) with the same
process count and binding, repeats each point, and writes results.json (every
sample), report.md (median and min-max, ratios ours/peer) and PNG plots into
--out. See `bench/compare --help`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report  # noqa: E402

MPI_SRC = os.path.join(REPO, "bench", "mpi")

# ---------------------------------------------------------------------------
# Benchmarks and their parameters
# ---------------------------------------------------------------------------

PP_FULL = ",".join(["0"] + [str(1 << i) for i in range(23)])  # 0, 1 B .. 4 MiB
PP_QUICK = "0,8,64,512,4K,32K,256K,1M,4M"

# name -> source, extra args, parameters per mode. "iters" is what the MPI
# programs take as --iters (scaled down above 64 KiB by the programs).
BENCHES = OrderedDict([
    ("pingpong", dict(src="pingpong.c", args=[],
                      full=dict(sizes=PP_FULL, iters=1000, min_iters=20),
                      quick=dict(sizes=PP_QUICK, iters=500, min_iters=20))),
    ("bw", dict(src="bw.c", args=[],
                full=dict(sizes="1,4,16,64,256,1K,4K,16K,64K,256K,1M,4M", iters=100, min_iters=10, window=64),
                quick=dict(sizes="8,512,8K,64K,1M,4M", iters=40, min_iters=10, window=64))),
    ("bibw", dict(src="bw.c", args=["--bidir"],
                  full=dict(sizes="1,4,16,64,256,1K,4K,16K,64K,256K,1M,4M", iters=100, min_iters=10, window=64),
                  quick=dict(sizes="8,512,8K,64K,1M,4M", iters=40, min_iters=10, window=64))),
    # The same ping-pong at MPI_THREAD_MULTIPLE: the cost of thread safety.
    ("pingpong_mt", dict(src="pingpong.c", args=["--thread-multiple"],
                         full=dict(sizes="8,1K", iters=5000, min_iters=20),
                         quick=dict(sizes="8", iters=2000, min_iters=20))),
    # k receiving threads, one sending thread (like osu_latency_mt).
    ("latency_mt", dict(src="latency_mt.c", args=["--threads", "1,2,4,8"], libs=["-lpthread"],
                        full=dict(sizes="8", iters=5000, min_iters=20),
                        quick=dict(sizes="8", iters=1000, min_iters=20))),
    ("msgrate", dict(src="msgrate.c", args=[],
                     full=dict(sizes="1,8,64,512,4K", iters=500, window=64),
                     quick=dict(sizes="8,512", iters=200, window=64))),
    ("multiflow", dict(src="multiflow.c", args=["--flows", "4"],
                       full=dict(sizes="8,64,1K", iters=300, window=16),
                       quick=dict(sizes="8,1K", iters=100, window=16))),
    ("overlap", dict(src="overlap.c", args=[],
                     full=dict(sizes="1K,16K,128K,1M,4M", iters=200, min_iters=10),
                     quick=dict(sizes="1K,64K,1M", iters=50, min_iters=10))),
    ("send_overlap", dict(src="send_overlap.c", args=[],
                          full=dict(sizes="64K,256K,1M,4M,16M", iters=100, min_iters=10),
                          quick=dict(sizes="64K,1M,16M", iters=40, min_iters=10))),
    ("recv_overlap", dict(src="recv_overlap.c", args=[],
                          full=dict(sizes="64K,256K,1M,4M,16M", iters=100, min_iters=10),
                          quick=dict(sizes="64K,1M,16M", iters=40, min_iters=10))),
    # What an eager send costs its sender, and its latency (copy offload).
    ("eager_send", dict(src="eager_send.c", args=[],
                        full=dict(sizes="1K,4K,16K,32K", iters=1000, min_iters=20),
                        quick=dict(sizes="1K,16K,32K", iters=300, min_iters=20))),
    # Reductions: the local kernel and MPI_Allreduce (float sum, double max).
    ("reduce", dict(src="reduce.c", args=[],
                    full=dict(sizes="1K,16K,64K,1M,16M", iters=1000, min_iters=5),
                    quick=dict(sizes="16K,1M", iters=300, min_iters=5))),
    ("nbc", dict(src="nbc_overlap.c", args=["--ops", "Iallreduce,Ibcast,Ialltoall"],
                 full=dict(sizes="8,1K,64K,1M", iters=100, min_iters=10),
                 quick=dict(sizes="8,64K,1M", iters=50, min_iters=10))),
    # Oversubscribed: more ranks than this machine's 2 cores ("np" overrides
    # the launch's rank count; every library runs unbound then).
    ("oversub4", dict(src="oversub.c", args=["--ops", "barrier,allreduce", "--tag", "4"], np=4,
                      full=dict(sizes="0", iters=500), quick=dict(sizes="0", iters=200))),
    ("oversub16", dict(src="oversub.c", args=["--ops", "alltoall,ring", "--tag", "16"], np=16,
                       full=dict(sizes="0", iters=100), quick=dict(sizes="0", iters=25))),
    # Ranks sharing cores (4 ranks on this machine's 2 cores; with --load K,
    # K busy processes too): every collective at 0 B to 64 KiB and the
    # Graph500-style polling loop (contention.c).
    ("contention4", dict(src="contention.c", args=["--tag", "4"], np=4,
                         full=dict(sizes="0,8,1K,64K", iters=200), quick=dict(sizes="0,8,1K,64K", iters=100))),
    ("memcpy", dict(src="memcpy_bw.c", args=[], plain=True,
                    full=dict(sizes="4K,64K,1M,4M,16M,128M", bytes="1G", trials=3),
                    quick=dict(sizes="64K,1M,4M,64M", bytes="256M", trials=2))),
])

GROUPS = {
    "latency": ["pingpong"],
    "threads": ["pingpong", "pingpong_mt", "latency_mt"],
    "native": ["pingpong"],
    "bw": ["bw", "bibw", "memcpy"],
    "bandwidth": ["bw", "bibw", "memcpy"],
    "rate": ["msgrate", "multiflow"],
    "overlap": ["overlap", "send_overlap", "recv_overlap", "nbc"],
    "nbc_overlap": ["nbc"],
    "offload": ["eager_send"],
    "reductions": ["reduce"],
    "ceilings": ["memcpy", "pingpong"],
    "oversub": ["oversub4", "oversub16"],
    "contention": ["contention4"],
    "all": list(BENCHES),
}

APT_PACKAGES = ["openmpi-bin", "libopenmpi-dev", "mpich", "libmpich-dev", "libfabric-bin", "python3-matplotlib"]


def log(msg):
    print("[compare] " + msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def iters_for(iters, min_iters, size):
    """Same scaling as bench_iters_for() in bench/mpi/common.h."""
    n = iters
    if size > 65536:
        n = int(iters * 65536.0 / size)
    return max(min_iters, min(n, iters))


def parse_sizes(text):
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        mult = 1
        t = tok.upper().rstrip("B").rstrip("I")
        if t and t[-1] in "KMG":
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
            t = t[:-1]
        out.append(int(t) * mult)
    return out


class Result:
    """What a launch gave: rc, stdout, stderr, seconds, and whether it hung
    after printing its last result (killed `grace` seconds after the
    done marker; rc is then 0 if nothing else went wrong)."""

    def __init__(self, rc, out, err, seconds, hung_after_done=False):
        self.rc, self.out, self.err, self.seconds, self.hung_after_done = rc, out, err, seconds, hung_after_done

    def __iter__(self):  # rc, out, err, seconds = run_cmd(...)
        return iter((self.rc, self.out, self.err, self.seconds))


def run_cmd(argv, timeout, env=None, cwd=None, done_marker=None, grace=10.0):
    """Runs argv in its own process group; on timeout ends that group (only
    what we started). With done_marker, a process still alive `grace` seconds
    after printing a stdout line containing it is ended too (a hang in
    MPI_Finalize must not cost the whole timeout)."""
    t0 = time.time()
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=cwd,
                         start_new_session=True, text=True, errors="replace")
    out_lines, err_parts, done_at = [], [], []

    def read_out():
        for line in p.stdout:
            out_lines.append(line)
            if done_marker and not done_at and done_marker in line:
                done_at.append(time.time())

    def read_err():
        err_parts.append(p.stderr.read())

    threads = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for t in threads:
        t.start()
    killed = hung = False
    while p.poll() is None:
        now = time.time()
        if now - t0 > timeout or (done_at and now - done_at[0] > grace):
            hung = bool(done_at)
            killed = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        time.sleep(0.01)
    p.wait()
    for t in threads:
        t.join(timeout=5)
    out, err = "".join(out_lines), "".join(err_parts)
    rc = p.returncode
    if killed and hung:
        rc = 0
        err += "\n[hung after its last result; killed after %.0f s]" % grace
    elif killed:
        rc = 124
        err += "\n[timed out after %.0f s]" % timeout
    return Result(rc, out, err, time.time() - t0, hung)


def tail(text, n=6):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------

class Config:
    kind = "mpi"

    def __init__(self, name, impl, transport, ours=False):
        self.name, self.impl, self.transport, self.ours = name, impl, transport, ours
        self.status, self.note, self.library, self.launcher = "ok", "", "", ""

    def skip(self, why, status="skipped"):
        self.status, self.note = status, why

    def supports(self, bench):
        return False

    def describe(self):
        return dict(name=self.name, kind=self.kind, impl=self.impl, transport=self.transport, ours=self.ours,
                    status=self.status, note=self.note, library=self.library, launcher=self.launcher)


class MpiConfig(Config):
    """One MPI implementation + transport, launching bench/mpi binaries."""

    def __init__(self, name, impl, transport, impl_key, mpicc, launch, env=None, ours=False, rank_env=None):
        super().__init__(name, impl, transport, ours)
        self.impl_key, self.mpicc, self.launch, self.env = impl_key, mpicc, launch, env or {}
        # rank_env = (rank 0's variables, the other ranks'): set by a shell
        # wrapper that reads PMI_RANK (our launcher's ranks only).
        self.rank_env = rank_env
        envs = " ".join("%s=%s" % kv for kv in self.env.items())
        self.launcher = ((envs + " ") if envs else "") + " ".join(launch + self.wrapper()) + " PROG"
        self.binaries = {}  # src -> path (filled by the build step)

    def wrapper(self):
        if not self.rank_env:
            return []
        first, rest = (" ".join("%s=%s" % kv for kv in d.items()) for d in self.rank_env)
        script = 'if [ "${PMI_RANK:-0}" = 0 ]; then export %s; else export %s; fi; exec "$@"' % (first, rest)
        return ["/bin/sh", "-c", script, "sh"]

    def supports(self, bench):
        spec = BENCHES[bench]
        return not spec.get("plain") and spec["src"] in self.binaries

    def launch_for(self, np):
        """The launch command for `np` ranks instead of the default count; with
        more ranks than cores, nobody is bound to a core (Open MPI refuses to
        bind more ranks than cores and needs --oversubscribe)."""
        if np is None:
            return list(self.launch)
        argv = list(self.launch)
        for flag in ("-np", "-n"):
            if flag in argv:
                argv[argv.index(flag) + 1] = str(np)
        over = np > (os.cpu_count() or 1)
        if over:
            for i, a in enumerate(argv):
                if a in ("--bind-to", "-bind-to") and i + 1 < len(argv):
                    argv[i + 1] = "none"
            if self.impl_key == "openmpi":
                argv.insert(1, "--oversubscribe")
        return argv

    def run(self, bench, params, rep, ctx):
        spec = BENCHES[bench]
        argv = (self.launch_for(spec.get("np")) + self.wrapper() + [self.binaries[spec["src"]]] + spec["args"] +
                mpi_args(params))
        res = run_cmd(argv, ctx.timeout, env=self.env, done_marker='"done": true', grace=ctx.grace)
        rc, out, err, secs = res
        library, points = report.parse_mpi_output(out)
        raw = dict(config=self.name, bench=bench, rep=rep, command=" ".join(argv), rc=rc, seconds=round(secs, 3),
                   points=points)
        if library:
            self.library = library
        if res.hung_after_done:
            raw["hung_after_done"] = True
            log("warning: %s / %s (rep %d) hung after its last result (MPI_Finalize?): ended, results kept"
                % (self.name, bench, rep))
            ctx.hangs.setdefault(self.name, []).append("%s rep %d" % (bench, rep))
        if rc != 0:
            raise BenchError("exit code %d: %s" % (rc, tail(err) or tail(out)), raw)
        if not points:
            raise BenchError("no result lines in the output: %s" % (tail(err) or tail(out)), raw)
        bad = [p for p in points if p.get("verified") is not True]
        if bad:
            raise BenchError("unverified results", raw)
        return report.points_to_samples(points, self.name, rep), raw


def mpi_args(p):
    a = ["--sizes", p["sizes"], "--iters", str(p["iters"])]
    if "min_iters" in p:
        a += ["--min-iters", str(p["min_iters"])]
    if "window" in p:
        a += ["--window", str(p["window"])]
    return a


class FiConfig(Config):
    """Raw libfabric ceiling: fi_pingpong server + client on 127.0.0.1,
    pinned to cores 0 and 1, one launch pair per size."""
    kind = "raw"

    # tcp: a connected msg endpoint (an rdm endpoint sets its connection up
    # inside the timed loop); shm: rdm, the only endpoint type it has.
    # tcp;ofi_rxm: the rdm endpoint the ofi driver uses (libfabric-tcp-rxm).
    ENDPOINT = {"tcp": "msg", "shm": "rdm"}

    def __init__(self, provider, name=None):
        ep = self.ENDPOINT.get(provider, "rdm")
        super().__init__(name or "libfabric-%s" % provider, "libfabric (fi_pingpong, raw)",
                         "%s provider, %s endpoint, 127.0.0.1" % (provider, ep))
        self.provider, self.endpoint = provider, ep
        self.note = "fi_pingpong prints the mean over its iterations (no median), so it is more exposed to load"
        self.launcher = ("taskset -c 0 fi_pingpong -p %s -e %s -B PORT -I N -S SIZE & "
                         "taskset -c 1 fi_pingpong -p %s -e %s -P PORT -I N -S SIZE 127.0.0.1"
                         % (shlex.quote(provider), ep, shlex.quote(provider), ep))

    def supports(self, bench):
        return bench == "pingpong"

    def _one(self, size, iters, timeout):
        common = ["fi_pingpong", "-p", self.provider, "-e", self.endpoint, "-I", str(iters), "-S", str(size)]
        last_err = ""
        for attempt in range(3):
            port = free_port()
            srv = subprocess.Popen(["taskset", "-c", "0"] + common + ["-B", str(port)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                deadline = time.time() + 5
                rc, out, err = 1, "", ""
                while time.time() < deadline:
                    time.sleep(0.05)
                    if srv.poll() is not None:
                        break
                    rc, out, err, _ = run_cmd(["taskset", "-c", "1"] + common + ["-P", str(port), "127.0.0.1"],
                                              timeout)
                    if rc == 0 or "refused" not in (out + err).lower():
                        break
                if rc == 0:
                    pts = [p for p in report.parse_fi_pingpong(out) if p["size"] == size]
                    if pts:
                        return pts[0]
                    last_err = "no result row for size %d: %s" % (size, tail(out))
                else:
                    last_err = "exit code %d: %s" % (rc, tail(err) or tail(out))
            finally:
                try:
                    srv.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(srv.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    srv.communicate()
        raise BenchError(last_err)

    def run(self, bench, params, rep, ctx):
        samples, points, errs = [], [], []
        for size in parse_sizes(params["sizes"]):
            n = iters_for(params["iters"], params.get("min_iters", 10), size)
            try:
                p = self._one(size, n, ctx.timeout)
            except BenchError as e:
                errs.append("size %d: %s" % (size, e.args[0]))
                continue
            points.append(dict(p, iters=n))
            for k in ("latency_us", "bw_MBps"):
                if report.keep_sample(k, size):
                    samples.append(dict(bench="pingpong", metric=k, config=self.name, size=size, rep=rep,
                                        value=p[k]))
        raw = dict(config=self.name, bench=bench, rep=rep, command=self.launcher, points=points, errors=errs)
        if errs and not samples:
            raise BenchError("; ".join(errs), raw)
        if errs:
            ctx.error(self.name, bench, rep, "some sizes failed: " + "; ".join(errs))
        return samples, raw


class NativeConfig(Config):
    """nmad's native ping-pong (//bench:nmad_pingpong) under tools/nmad-run."""
    kind = "native"

    # --nmad-drivers names that mean the ofi driver over one provider.
    OFI = {"ofi-tcp": "tcp;ofi_rxm", "ofi-shm": "shm", "ofi-udp": "udp;ofi_rxd"}

    def __init__(self, driver, run_bin, bench_bin, strategy="default"):
        self.env = {}
        transport = "driver %s, strategy %s" % (driver, strategy)
        name = "nmad-native-%s" % driver
        if driver in self.OFI:
            self.env = {"NMAD_OFI_PROVIDER": self.OFI[driver]}
            transport = "driver ofi (provider %s), strategy %s" % (self.OFI[driver], strategy)
            driver = "ofi"
        super().__init__(name, "nmad native API", transport, ours=True)
        self.driver, self.run_bin, self.bench_bin, self.strategy = driver, run_bin, bench_bin, strategy
        self.launcher = "%s%s -n 2 %s --json --driver %s --strategy %s" % (
            "".join("%s=%s " % (k, shlex.quote(v)) for k, v in self.env.items()),
            os.path.relpath(run_bin, REPO), os.path.relpath(bench_bin, REPO), driver, strategy)
        self.library = "nmad (native)"

    def supports(self, bench):
        return bench == "pingpong"

    def run(self, bench, params, rep, ctx):
        argv = [self.run_bin, "-n", "2", self.bench_bin, "--json", "--sizes",
                ",".join(str(s) for s in parse_sizes(params["sizes"])), "--reps", str(params["iters"]),
                "--driver", self.driver, "--strategy", self.strategy]
        rc, out, err, secs = run_cmd(argv, ctx.timeout, env=self.env, cwd=REPO)
        raw = dict(config=self.name, bench=bench, rep=rep, command=" ".join(argv), rc=rc, seconds=round(secs, 3),
                   env=self.env)
        if rc != 0:
            raise BenchError("exit code %d: %s" % (rc, tail(err) or tail(out)), raw)
        try:
            header, points = report.parse_nmad_native(out)
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError("%s: %s" % (e, tail(out)), raw)
        raw["header"], raw["points"] = header, [p["raw"] for p in points]
        samples = []
        for p in points:
            for k in ("latency_us", "bw_MBps"):
                if p.get(k) is not None and report.keep_sample(k, p["size"]):
                    samples.append(dict(bench="pingpong", metric=k, config=self.name, size=p["size"], rep=rep,
                                        value=p[k]))
        if not samples:
            raise BenchError("no results in the JSON", raw)
        return samples, raw


class MemcpyConfig(Config):
    kind = "ceiling"

    def __init__(self):
        super().__init__("memcpy-1core", "libc memcpy (ceiling)", "one core, no MPI")
        self.binary = None
        self.launcher = "taskset -c 0 memcpy_bw"

    def supports(self, bench):
        return bench == "memcpy" and self.binary is not None

    def run(self, bench, params, rep, ctx):
        argv = ["taskset", "-c", "0", self.binary, "--sizes", params["sizes"], "--bytes", params["bytes"],
                "--trials", str(params["trials"])]
        rc, out, err, secs = run_cmd(argv, ctx.timeout)
        library, points = report.parse_mpi_output(out)
        raw = dict(config=self.name, bench=bench, rep=rep, command=" ".join(argv), rc=rc, seconds=round(secs, 3),
                   points=points)
        if rc != 0 or not points:
            raise BenchError("exit code %d: %s" % (rc, tail(err) or tail(out)), raw)
        return report.points_to_samples(points, self.name, rep), raw


# ---------------------------------------------------------------------------
# Discovery and build
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

class Context:
    def __init__(self, timeout, grace=5.0):
        self.timeout = timeout
        self.grace = grace
        self.errors = []
        self.warnings = []
        self.hangs = OrderedDict()  # config -> ["bench rep N"] that hung after their last result

    def warn(self, message):
        log("warning: " + message)
        self.warnings.append(message)

    def error(self, config, bench, rep, message):
        log("FAILED %s / %s (rep %s): %s" % (config, bench, rep, message))
        self.errors.append(dict(config=config, bench=bench, rep=rep, message=message))


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


def select_benches(only):
    if not only:
        return list(BENCHES)
    chosen = []
    for tok in only.split(","):
        tok = tok.strip()
        if not tok:
            continue
        names = GROUPS.get(tok) or ([tok] if tok in BENCHES else None)
        if names is None:
            raise SystemExit("bench/compare: unknown --only entry %r (benchmarks: %s; groups: %s)" % (
                tok, ", ".join(BENCHES), ", ".join(sorted(GROUPS))))
        for n in names:
            if n not in chosen:
                chosen.append(n)
    return [b for b in BENCHES if b in chosen]


def bench_params(bench, args):
    p = dict(BENCHES[bench]["quick" if args.quick else "full"])
    if args.sizes and bench != "memcpy":
        p["sizes"] = args.sizes
    if args.iters and bench != "memcpy":
        p["iters"] = args.iters
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="bench/compare",
        description="Measure nmad against Open MPI and MPICH side by side (report.md, results.json, PNG plots).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="benchmarks: %s\ngroups for --only: %s\n"
               "configurations: openmpi-vader, openmpi-tcp, mpich, mpich-tcp, nmad, nmad-tcp, nmad-busy, nmad-thread, nmad-tcp-thread, "
               "nmad-offload, nmad-offload-off, nmad-tcp-offload, nmad-tcp-offload-off, nmad-native-<driver>, "
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
        for c in [tcp, busy, thread, tcp_thread] + ofi + offload + strategy_configs:
            if ours.status != "ok":
                c.skip(ours.note or "as nmad", ours.status)
            configs.append(c)
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


def start_load(k):
    """K busy processes for the whole run (ended by PID in stop_load)."""
    hogs = []
    for _ in range(max(0, k)):
        hogs.append(subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if hogs:
        log("load: %d busy processes (pids %s)" % (len(hogs), " ".join(str(h.pid) for h in hogs)))
    return hogs


def stop_load(hogs):
    for h in hogs:
        h.kill()
    for h in hogs:
        h.wait()


def measure_all(configs, benches, args, reps, ctx):
    samples, runs = [], []
    disabled = set()
    active = [c for c in configs if c.status == "ok"]
    for rep in range(reps):
        for bench in benches:
            params = bench_params(bench, args)
            for c in active:
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
