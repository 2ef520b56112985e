#!/usr/bin/env bash
# bench/io_compare.sh — bench/mpi/io_block2d.c (collective against
# independent write and read of a 2-D block-distributed array) built with
# nmad's, Open MPI's and MPICH's mpicc and run with each launcher, the
# three interleaved launch by launch so that they see the same machine.
#
#   bench/io_compare.sh --prefix out/install --out /tmp/io-cmp
#   bench/io_compare.sh --prefix out/install --out /tmp/io-cmp --np 4 --sizes 64M,256M,1G \
#       --launches 3 --iters 3 --dir /tmp
#
# --prefix: an nmad installation (tools/install PREFIX). Each launch runs
# every size and mode (--modes, default both) --iters times (see
# io_block2d.c); --launches repeats
# the whole program. Writes OUT/<mpi>.<launch>.jsonl (the program's JSON
# lines) and prints, per implementation, size, mode and operation, the
# median over every timing of every launch with its minimum and maximum,
# plus the load average at the start and at the end.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix= out= np=4 sizes=64M,256M,1G launches=3 iters=3 dir=/tmp impls="nmad openmpi mpich" modes=collective,independent
while (($#)); do
  case "$1" in
    --prefix) prefix=$2; shift ;;
    --out) out=$2; shift ;;
    --np) np=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --launches) launches=$2; shift ;;
    --iters) iters=$2; shift ;;
    --modes) modes=$2; shift ;;
    --dir) dir=$2; shift ;;
    --impls) impls=$2; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "io_compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $prefix && -n $out ]] || { echo "io_compare.sh: --prefix and --out are needed (see --help)" >&2; exit 2; }
prefix=$(cd "$prefix" && pwd)
mkdir -p "$out"
src=$ROOT/bench/mpi/io_block2d.c

cc_of() {
  case $1 in
    nmad) echo "$prefix/bin/mpicc" ;;
    openmpi) echo mpicc.openmpi ;;
    mpich) echo mpicc.mpich ;;
  esac
}
run_of() {
  case $1 in
    nmad) echo "$prefix/bin/mpiexec -n $np" ;;
    openmpi) echo "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi --oversubscribe -n $np" ;;
    mpich) echo "mpiexec.mpich -n $np" ;;
  esac
}

for m in $impls; do
  "$(cc_of "$m")" -O2 -std=gnu11 -I"$ROOT/bench/mpi" "$src" -o "$out/io_block2d.$m" -lm || exit 1
done
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((l = 1; l <= launches; l++)); do
  for m in $impls; do
    cmd="$(run_of "$m") $out/io_block2d.$m --sizes $sizes --iters $iters --modes $modes --dir $dir"
    echo "[$l/$launches] $cmd"
    $cmd >"$out/$m.$l.jsonl" 2>"$out/$m.$l.err" || { echo "  failed: $(tail -3 "$out/$m.$l.err")"; }
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" $impls <<'PY'
import json, sys, glob, statistics
out, impls = sys.argv[1], sys.argv[2:]
rows, nbytes = {}, {}
for m in impls:
    for f in sorted(glob.glob(f"{out}/{m}.*.jsonl")):
        for line in open(f):
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            if "op" not in d:
                continue
            # Every timing of a launch is summarised by its median, minimum and maximum:
            # keep all three per launch (the per-iteration values are not printed).
            rows.setdefault((d["size"], d["mode"], d["op"], m), []).append((d["s"], d["s_min"], d["s_max"]))
            nbytes[d["size"]] = d["n"] * d["n"] * 8
print(f"{'size':>6} {'mode':<12} {'op':<6}" + "".join(f" {m + ' s (min-max)':>30}" for m in impls))
for key in sorted({k[:3] for k in rows}):
    size, mode, op = key
    cells = []
    for m in impls:
        v = rows.get((size, mode, op, m))
        if not v:
            cells.append(f"{'-':>30}")
            continue
        med = statistics.median(x[0] for x in v)
        lo, hi = min(x[1] for x in v), max(x[2] for x in v)
        gbs = nbytes[size] / med / 1e9
        cells.append(f"{med:8.3f} ({lo:.3f}-{hi:.3f}) {gbs:5.2f}GB/s")
    print(f"{size >> 20:>5}M {mode:<12} {op:<6}" + "".join(f" {c:>30}" for c in cells))
PY
