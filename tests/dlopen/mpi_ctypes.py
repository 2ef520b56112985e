"""Loads libmpi.so into Python with ctypes (as mpi4py and other bindings
load it: at run time, after the interpreter started) and runs MPI through
it. Start it with mpiexec:

    mpiexec -n 2 python3 mpi_ctypes.py LIBMPI MPI_H

MPI_H is the library's mpi.h: the handles and constants are read from its
#define lines, so nothing here depends on their values. Per rank: MPI_Init,
rank and size, a ring exchange (MPI_Sendrecv), MPI_Allreduce and MPI_Bcast
checked against values every rank can compute, MPI_Barrier, MPI_Finalize.
Prints "PASS mpi_ctypes rank R", or "FAIL mpi_ctypes: ..." and exits 1.
"""
import ctypes
import os
import re
import sys


def say(line):
    """One write(2) per line: the ranks share one pipe, and print() may
    write the text and its newline apart (it does with PYTHONUNBUFFERED),
    so two ranks' lines could run together."""
    os.write(1, (line + "\n").encode())


def constants(header):
    """NAME -> int for every '#define NAME ((Type)N)' or '#define NAME N'."""
    out = {}
    pat = re.compile(r"^#define\s+(MPI_\w+)\s+(?:\(\(\w+\*?\)\s*)?(-?\d+)\)?\)?\s*$")
    with open(header) as f:
        for line in f:
            m = pat.match(line.strip())
            if m:
                out[m.group(1)] = int(m.group(2))
    return out


def main():
    lib_path, header = sys.argv[1], sys.argv[2]
    c = constants(header)
    for name in ("MPI_COMM_WORLD", "MPI_INT", "MPI_DOUBLE", "MPI_SUM", "MPI_SUCCESS"):
        if name not in c:
            say("FAIL mpi_ctypes: %s not found in %s" % (name, header))
            return 1
    try:
        mpi = ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        say("FAIL mpi_ctypes: cannot load %s: %s" % (lib_path, e))
        return 1
    rank = ctypes.c_int(-1)
    size = ctypes.c_int(0)
    me = "?"

    def call(fn, *args):
        err = getattr(mpi, fn)(*args)
        if err != c["MPI_SUCCESS"]:
            raise RuntimeError("%s returned %d" % (fn, err))

    try:
        call("MPI_Init", None, None)
        comm = ctypes.c_int(c["MPI_COMM_WORLD"])
        call("MPI_Comm_rank", comm, ctypes.byref(rank))
        call("MPI_Comm_size", comm, ctypes.byref(size))
        me = rank.value
        n, r = size.value, rank.value
        if n < 2:
            raise RuntimeError("needs 2 or more processes, got %d" % n)
        status = (ctypes.c_byte * 256)()  # larger than any MPI_Status
        for tag, count in ((1, 4), (2, 100000)):  # eager, then rendezvous
            out = (ctypes.c_int * count)(*[r * 1000003 + tag * 7 + i for i in range(count)])
            inb = (ctypes.c_int * count)()
            nxt, prv = (r + 1) % n, (r + n - 1) % n
            call("MPI_Sendrecv", out, count, c["MPI_INT"], nxt, tag, inb, count, c["MPI_INT"], prv, tag, comm, status)
            want = [prv * 1000003 + tag * 7 + i for i in range(count)]
            if list(inb) != want:
                raise RuntimeError("ring %d: received %s..." % (tag, list(inb)[:4]))
        mine = (ctypes.c_double * 2)(r + 1.0, 0.25 * r)
        total = (ctypes.c_double * 2)()
        call("MPI_Allreduce", mine, total, 2, c["MPI_DOUBLE"], c["MPI_SUM"], comm)
        if list(total) != [n * (n + 1) / 2.0, 0.25 * n * (n - 1) / 2.0]:
            raise RuntimeError("allreduce gave %s" % list(total))
        v = (ctypes.c_int * 3)(*([7, 8, 9] if r == 0 else [0, 0, 0]))
        call("MPI_Bcast", v, 3, c["MPI_INT"], 0, comm)
        if list(v) != [7, 8, 9]:
            raise RuntimeError("bcast gave %s" % list(v))
        call("MPI_Barrier", comm)
        call("MPI_Finalize")
    except RuntimeError as e:
        say("FAIL mpi_ctypes: rank %s: %s" % (me, e))
        return 1
    say("PASS mpi_ctypes rank %d" % me)
    return 0


if __name__ == "__main__":
    sys.exit(main())
