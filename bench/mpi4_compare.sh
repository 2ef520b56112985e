#!/usr/bin/env bash
# MPI 4 benchmarks, nmad against MPICH 4.0 (Open MPI 4.1 has neither
# partitioned communication nor persistent collectives: not run), launches
# interleaved, medians over launches with their range.
#
#   bench/mpi4_compare.sh --bench partitioned [--partitions 16,64,256,1024]
#                         [--bytes 1M] [--threads 4] ...
#       bench/mpi/partitioned.c, 2 ranks, nmad's `default` and `aggreg`
#       strategies and MPICH: per partition count, the time from the last
#       MPI_Pready to the receiver's completion (each launch's median)
#   bench/mpi4_compare.sh --bench persistent_allreduce [--sizes 8,1K,64K,1M] [--np 2]
#       bench/mpi/persistent_allreduce.c: MPI_Allreduce_init + Start/Wait
#       against MPI_Allreduce, per size (ratio persistent / blocking, and
#       each form's median)
#
# Common: [--prefix out/install] [--runs 5] [--iters 200] [--load K] [--out DIR]
#   --prefix P   our install prefix (tools/install P), default out/install
#   --load K     K busy processes (spinning shell loops) during every run
#   --out DIR    keeps every launch's JSON lines in DIR/results.jsonl
# Output: the JSON lines of every launch (with "impl", "run" and "load"
# added), then a table of medians (min-max) over the launches.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="" prefix="$ROOT/out/install" runs=5 iters=200 parts="16,64,256,1024" bytes=1M threads=4 load=0 out=""
sizes="8,1K,64K,1M" np=2
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --partitions) parts="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n 2,23p "$0"; exit 0 ;;
    *) echo "mpi4_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$bench" in
  partitioned) args=(--bytes "$bytes" --partitions "$parts" --threads "$threads" --iters "$iters"); np=2 ;;
  persistent_allreduce) args=(--sizes "$sizes" --iters "$iters") ;;
  *) echo "mpi4_compare: --bench partitioned or --bench persistent_allreduce" >&2; exit 2 ;;
esac
[ -x "$prefix/bin/mpicc" ] || { echo "mpi4_compare: $prefix/bin/mpicc not found (tools/install $prefix)" >&2; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/nmad-mpi4.XXXXXX")"
hogs=()
cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
declare -A launch binary
impls=()
build() {  # name mpicc binary-name launch...
  local name="$1" cc="$2" bin="$3"; shift 3
  command -v "$cc" >/dev/null || { echo "mpi4_compare: $cc not found: $name skipped" >&2; return; }
  if [ ! -x "$work/$bin" ] &&
     ! "$cc" -O2 -o "$work/$bin" "$ROOT/bench/mpi/$bench.c" -lpthread >"$work/$bin.log" 2>&1; then
    echo "mpi4_compare: build with $cc failed: $name skipped ($(tail -1 "$work/$bin.log"))" >&2
    return
  fi
  launch[$name]="$*"
  binary[$name]="$work/$bin"
  impls+=("$name")
}
over=""
[ "$np" -gt "$(nproc)" ] && over="--oversubscribe"
if [ "$bench" = partitioned ]; then
  build nmad-default "$prefix/bin/mpicc" nmad env NMAD_STRATEGY=default "$prefix/bin/mpiexec" -n 2
  build nmad-aggreg "$prefix/bin/mpicc" nmad env NMAD_STRATEGY=aggreg "$prefix/bin/mpiexec" -n 2
else
  build nmad "$prefix/bin/mpicc" nmad "$prefix/bin/mpiexec" $over -n "$np"
fi
build mpich mpicc.mpich mpich mpiexec.mpich -n "$np"
for ((i = 0; i < load; i++)); do
  /bin/sh -c 'while :; do :; done' &
  hogs+=($!)
done
results="$work/results.jsonl"
: >"$results"
for ((run = 1; run <= runs; run++)); do
  for name in "${impls[@]}"; do
    if ! o=$(timeout 600 ${launch[$name]} "${binary[$name]}" "${args[@]}" 2>"$work/err"); then
      echo "mpi4_compare: $name run $run failed: $(tail -2 "$work/err")" >&2
      continue
    fi
    echo "$o" | grep '"verified"' | sed "s/^{/{\"impl\": \"$name\", \"run\": $run, \"load\": $load, /" | tee -a "$results"
  done
done
[ -n "$out" ] && mkdir -p "$out" && cp "$results" "$out/results.jsonl"
python3 - "$results" "$bench" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bench = sys.argv[2]
key, metrics = ("partitions", ["after_last_us"]) if bench == "partitioned" else ("size", ["ratio", "blocking_us", "persistent_us"])
by = collections.defaultdict(list)
impls, keys = [], []
for r in rows:
    by[(r["impl"], r[key])].append(r)
    if r["impl"] not in impls: impls.append(r["impl"])
    if r[key] not in keys: keys.append(r[key])
cols = ["%s %s" % (i, m) for i in impls for m in metrics]
print("| %s | %s |" % (key, " | ".join(cols)))
print("|---|" + "---|" * len(cols))
for k in sorted(keys):
    cells = []
    for i in impls:
        for m in metrics:
            xs = [r[m] for r in by.get((i, k), [])]
            cells.append("%.2f (%.2f-%.2f)" % (statistics.median(xs), min(xs), max(xs)) if xs else "-")
    print("| %s | %s |" % (k, " | ".join(cells)))
print("(medians over %s launches; ranges in parentheses)" % max((len(v) for v in by.values()), default=0))
EOF
