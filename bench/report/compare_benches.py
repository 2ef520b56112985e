"""What bench/compare measures: the benchmarks (bench/mpi/*.c and the ceilings)
with their message sizes and iterations in full and --quick mode, the groups
--only accepts, and how a benchmark's parameters become its command line.
"""

from __future__ import annotations

import os
from collections import OrderedDict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPI_SRC = os.path.join(REPO, "bench", "mpi")

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


def mpi_args(p):
    a = ["--sizes", p["sizes"], "--iters", str(p["iters"])]
    if "min_iters" in p:
        a += ["--min-iters", str(p["min_iters"])]
    if "window" in p:
        a += ["--window", str(p["window"])]
    return a


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
