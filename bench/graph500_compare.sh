#!/usr/bin/env bash
# The Graph500 reference BFS (its public source, fetched by the user) built
# with our mpicc, Open MPI's and MPICH's, run side by side: whole-job wall
# time of each launch, median and range per implementation, interleaved.
#
#   bench/graph500_compare.sh --src DIR [--prefix /opt/nmad] [--np 4] [--scale 12]
#                             [--runs 5] [--load K] [--timeout 300]
#
#   --src DIR    a checkout of github.com/graph500/graph500 (its src/, aml/
#                and generator/ folders); built into a temporary directory,
#                never into DIR
#   --prefix P   our install prefix (tools/install P), default out/install
#   --load K     K busy processes (spinning shell loops) during every run
# Output: one JSON line per launch and a summary line per implementation:
#   {"impl": "nmad", "np": 4, "scale": 12, "load": 0, "run": 1, "seconds": 0.81, "validated": true}
#   nmad: median 0.81 s (0.78-0.90) over 5 runs
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="" prefix="$ROOT/out/install" np=4 scale=12 runs=5 load=0 timeout=300
while [ $# -gt 0 ]; do
  case "$1" in
    --src) src="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "graph500_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$src" ] && [ -f "$src/src/bfs_reference.c" ] ||
  { echo "graph500_compare: --src must name a Graph500 checkout (src/bfs_reference.c not found)" >&2; exit 2; }
[ -x "$prefix/bin/mpicc" ] || { echo "graph500_compare: $prefix/bin/mpicc not found (tools/install $prefix)" >&2; exit 2; }
# Absolute: the build runs make -C in another directory.
prefix="$(cd "$prefix" && pwd)"
src="$(cd "$src" && pwd)"

work="$(mktemp -d "${TMPDIR:-/tmp}/nmad-graph500.XXXXXX")"
hogs=()
cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# The reference code predates GCC 10's -fno-common default: -fcommon.
CFLAGS="-Drestrict=__restrict__ -O3 -DGRAPH_GENERATOR_MPI -DREUSE_CSR_FOR_VALIDATION -I../aml -fcommon -w"
declare -A launch
impls=()
build() {  # name mpicc launch...
  local name="$1" cc="$2"; shift 2
  command -v "$cc" >/dev/null || { echo "graph500_compare: $cc not found: $name skipped" >&2; return; }
  mkdir -p "$work/$name"
  cp -r "$src/src" "$src/aml" "$src/generator" "$work/$name/"
  if ! make -C "$work/$name/src" MPICC="$cc" CFLAGS="$CFLAGS" graph500_reference_bfs >"$work/$name.build.log" 2>&1; then
    echo "graph500_compare: build with $cc failed: $name skipped ($(tail -1 "$work/$name.build.log"))" >&2
    return
  fi
  launch[$name]="$*"
  impls+=("$name")
}
over=""
[ "$np" -gt "$(nproc)" ] && over="--oversubscribe"
build nmad "$prefix/bin/mpicc" env NMAD_RUN_OVERSUBSCRIBE=1 "$prefix/bin/mpiexec" -n "$np" --timeout "$timeout"
build openmpi mpicc.openmpi mpirun.openmpi --allow-run-as-root $over --mca btl self,vader -np "$np"
build mpich mpicc.mpich mpiexec.mpich -n "$np"

for ((i = 0; i < load; i++)); do
  /bin/sh -c 'while :; do :; done' &
  hogs+=($!)
done

declare -A times
for ((run = 1; run <= runs; run++)); do
  for name in "${impls[@]}"; do
    t0=$(date +%s.%N)
    out=$(timeout "$timeout" ${launch[$name]} "$work/$name/src/graph500_reference_bfs" "$scale" 2>&1)
    rc=$?
    t1=$(date +%s.%N)
    secs=$(python3 -c "print($t1 - $t0)")
    # The reference code aborts on a failed validation; a finished run
    # prints its statistics.
    ok=false
    [ $rc -eq 0 ] && echo "$out" | grep -q "bfs  median_time" && ok=true
    printf '{"impl": "%s", "np": %d, "scale": %d, "load": %d, "run": %d, "seconds": %.3f, "validated": %s}\n' \
      "$name" "$np" "$scale" "$load" "$run" "$secs" "$ok"
    [ "$ok" = true ] && times[$name]+="$secs " || echo "$out" | tail -3 >&2
  done
done
for name in "${impls[@]}"; do
  python3 - "$name" ${times[$name]:-} <<'EOF'
import statistics, sys
name, xs = sys.argv[1], [float(x) for x in sys.argv[2:]]
if xs:
    print("%s: median %.2f s (%.2f-%.2f) over %d runs" % (name, statistics.median(xs), min(xs), max(xs), len(xs)))
else:
    print("%s: no valid run" % name)
EOF
done
