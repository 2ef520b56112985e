#!/usr/bin/env bash
# Partitioned send (bench/mpi/partitioned.c) with nmad's `default` and
# `aggreg` strategies against MPICH's partitioned path, launches
# interleaved: per partition count, the median over launches of each
# launch's median time from the last MPI_Pready to the receiver's
# completion, with the range over launches. Open MPI 4.1 has no
# partitioned communication (MPI_Psend_init arrived in 5.0): not run.
#
#   bench/partitioned_compare.sh [--prefix out/install] [--runs 5] [--iters 200]
#                                [--partitions 16,64,256,1024] [--bytes 1M]
#                                [--threads 4] [--load K] [--out DIR]
#
#   --prefix P   our install prefix (tools/install P), default out/install
#   --load K     K busy processes (spinning shell loops) during every run
#   --out DIR    keeps every launch's JSON lines in DIR/results.jsonl
# Output: the JSON lines of every launch (with "impl" and "run" added), then
# a table: partitions, then per implementation median (min-max) in us.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$ROOT/out/install" runs=5 iters=200 parts="16,64,256,1024" bytes=1M threads=4 load=0 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --partitions) parts="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) echo "partitioned_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$prefix/bin/mpicc" ] || { echo "partitioned_compare: $prefix/bin/mpicc not found (tools/install $prefix)" >&2; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/nmad-partitioned.XXXXXX")"
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
  command -v "$cc" >/dev/null || { echo "partitioned_compare: $cc not found: $name skipped" >&2; return; }
  if [ ! -x "$work/$bin" ] &&
     ! "$cc" -O2 -o "$work/$bin" "$ROOT/bench/mpi/partitioned.c" -lpthread >"$work/$bin.log" 2>&1; then
    echo "partitioned_compare: build with $cc failed: $name skipped ($(tail -1 "$work/$bin.log"))" >&2
    return
  fi
  launch[$name]="$*"
  binary[$name]="$work/$bin"
  impls+=("$name")
}
build nmad-default "$prefix/bin/mpicc" nmad env NMAD_STRATEGY=default "$prefix/bin/mpiexec" -n 2
build nmad-aggreg "$prefix/bin/mpicc" nmad env NMAD_STRATEGY=aggreg "$prefix/bin/mpiexec" -n 2
build mpich mpicc.mpich mpich mpiexec.mpich -n 2
for ((i = 0; i < load; i++)); do
  /bin/sh -c 'while :; do :; done' &
  hogs+=($!)
done
results="$work/results.jsonl"
: >"$results"
for ((run = 1; run <= runs; run++)); do
  for name in "${impls[@]}"; do
    if ! o=$(timeout 600 ${launch[$name]} "${binary[$name]}" --bytes "$bytes" --partitions "$parts" \
               --threads "$threads" --iters "$iters" 2>"$work/err"); then
      echo "partitioned_compare: $name run $run failed: $(tail -2 "$work/err")" >&2
      continue
    fi
    echo "$o" | grep '"partitions"' | sed "s/^{/{\"impl\": \"$name\", \"run\": $run, \"load\": $load, /" | tee -a "$results"
  done
done
[ -n "$out" ] && mkdir -p "$out" && cp "$results" "$out/results.jsonl"
python3 - "$results" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
impls, parts = [], []
for r in rows:
    by[(r["impl"], r["partitions"])].append(r["after_last_us"])
    if r["impl"] not in impls: impls.append(r["impl"])
    if r["partitions"] not in parts: parts.append(r["partitions"])
print("| partitions | " + " | ".join(impls) + " |")
print("|---|" + "---|" * len(impls))
for p in sorted(parts):
    cells = []
    for i in impls:
        xs = by.get((i, p), [])
        cells.append("%.1f (%.1f-%.1f), %d runs" % (statistics.median(xs), min(xs), max(xs), len(xs)) if xs else "-")
    print("| %d | %s |" % (p, " | ".join(cells)))
EOF
