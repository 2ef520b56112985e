"""The configurations bench/compare measures, each a column of the report: an
MPI implementation and transport launching bench/mpi binaries (MpiConfig),
libfabric's raw fi_pingpong (FiConfig), nmad's native ping-pong under
nmad-run (NativeConfig) and single-core memcpy (MemcpyConfig). Each runs one
benchmark launch and turns its output into samples.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time

import report
from compare_benches import BENCHES, REPO, iters_for, mpi_args, parse_sizes
from compare_run import BenchError, free_port, log, run_cmd, tail


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
