"""How bench/compare runs things: launches in their own process group with a
timeout (and an end for a job that hangs after its last result), the
run's errors, warnings and hangs (Context), busy processes for a loaded
machine, and small helpers (log lines, output tails, a free port).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict


def log(msg):
    print("[compare] " + msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


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
