#!/usr/bin/env bash
# One-sided benchmarks, nmad against Open MPI 4.1 and MPICH 4.0:
# bench/mpi/rma_lat.c (put/get latency, put/get bandwidth, fetch_and_op and
# compare_and_swap latency in a lock_all epoch) and bench/mpi/rma_passive.c
# (lock/put/unlock while the target computes without calling MPI), built
# with each MPI's mpicc, launches interleaved (run 1 of every case with
# every MPI, then run 2, ...), idle or under --load.
#
#   bench/rma_compare.sh [--prefix out/install] [--runs 5] [--load N] [--out DIR]
#                        [--impls nmad,nmad-thread,ompi,mpich] [--np 2]
#                        [--cases lat,lat-create,passive,passive-create]
#                        [--lat-args "..."] [--passive-args "..."] [--timeout 300]
#   --prefix P   nmad's install prefix (tools/install P), default out/install
#   --impls      nmad (NMAD_PROGRESS as the environment says), nmad-thread
#                (NMAD_PROGRESS=thread), ompi (mpiexec.openmpi --oversubscribe
#                --mca btl self,vader), mpich (mpiexec.mpich)
#   --cases      lat: rma_lat with MPI_Win_allocate, lat-create: with
#                MPI_Win_create; passive / passive-create: rma_passive alike
#   --lat-args, --passive-args   extra arguments of rma_lat / rma_passive
#   --load N     N busy processes (spinning shell loops) during every run,
#                started and ended by this script (by their PIDs)
#   --out DIR    writes DIR/results.json (every launch's lines and every
#                failure, plus the medians) and DIR/results.md (the table)
#   --report DIR no launch: the table again from DIR/results.json
# A launch that fails (an MPI without one-sided communication: nmad today
# answers MPI_ERR_UNSUPPORTED_OPERATION; a crash; a timeout) is recorded
# with its error (the benchmark's JSON error line, else the launcher's last
# words) and its lines printed before the failure are kept; the table shows
# what was measured and lists the failures.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmdline="$*"
prefix="$ROOT/out/install" runs=5 load=0 out="" np=2 timeout=300
impls_req="nmad,nmad-thread,ompi,mpich" cases_req="lat,lat-create,passive,passive-create"
lat_args="" passive_args="" report=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --impls) impls_req="$2"; shift 2 ;;
    --cases) cases_req="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --lat-args) lat_args="$2"; shift 2 ;;
    --passive-args) passive_args="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --report) report="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "rma_compare: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$runs$load$np$timeout" in *[!0-9]*) echo "rma_compare: --runs, --load, --np, --timeout take numbers" >&2; exit 2 ;; esac
[ "$runs" -ge 1 ] && [ "$np" -ge 2 ] || { echo "rma_compare: --runs >= 1 and --np >= 2" >&2; exit 2; }
[[ $prefix == /* ]] || prefix="$PWD/$prefix"
work="$(mktemp -d "${TMPDIR:-/tmp}/nmad-rma.XXXXXX")"
hogs=()
cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$report" ]; then
  # The launches of an earlier run, and its command line, summarized again.
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [print(json.dumps(r)) for r in d["launches"]]; print(d["runs"], d["load"], d["np"], file=sys.stderr)' \
    "$report/results.json" >"$work/results.jsonl" 2>"$work/meta" || exit 1
  read -r runs load np <"$work/meta"
  cmdline=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["command"].replace("bench/rma_compare.sh ", "", 1))' "$report/results.json")
  out=$report
fi
declare -A launch cc
impls=()
[ -n "$report" ] && impls_req=""
IFS=, read -r -a req <<<"$impls_req"
for name in "${req[@]}"; do
  case "$name" in
    nmad) cc[$name]="$prefix/bin/mpicc"; launch[$name]="$prefix/bin/mpiexec -n $np" ;;
    nmad-thread) cc[$name]="$prefix/bin/mpicc"; launch[$name]="env NMAD_PROGRESS=thread $prefix/bin/mpiexec -n $np" ;;
    ompi) cc[$name]=mpicc.openmpi
      launch[$name]="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi --oversubscribe --mca btl self,vader -n $np" ;;
    mpich) cc[$name]=mpicc.mpich; launch[$name]="mpiexec.mpich -n $np" ;;
    *) echo "rma_compare: unknown implementation '$name' (nmad, nmad-thread, ompi, mpich)" >&2; exit 2 ;;
  esac
  # One build per compiler (nmad and nmad-thread share theirs).
  tag=$(basename "$(dirname "$(dirname "${cc[$name]}")")")-$(basename "${cc[$name]}")
  ok=1
  for b in rma_lat rma_passive; do
    bin="$work/$b.$tag"
    [ -x "$bin" ] && continue
    if ! command -v "${cc[$name]}" >/dev/null; then
      echo "rma_compare: ${cc[$name]} not found: $name skipped" >&2; ok=0; break
    fi
    if ! "${cc[$name]}" -O2 -std=gnu11 -I"$ROOT/bench/mpi" -o "$bin" "$ROOT/bench/mpi/$b.c" -lpthread >"$bin.log" 2>&1; then
      echo "rma_compare: building $b with ${cc[$name]} failed: $name skipped ($(grep -m1 -i error "$bin.log"))" >&2; ok=0; break
    fi
  done
  ((ok)) || continue
  cc[$name]=$tag
  impls+=("$name")
done
[ ${#impls[@]} -gt 0 ] || [ -n "$report" ] || { echo "rma_compare: no MPI to run" >&2; exit 1; }

declare -A prog args
cases=()
IFS=, read -r -a creq <<<"$cases_req"
for c in "${creq[@]}"; do
  case "$c" in
    lat) prog[$c]=rma_lat; args[$c]="--win allocate $lat_args" ;;
    lat-create) prog[$c]=rma_lat; args[$c]="--win create $lat_args" ;;
    passive) prog[$c]=rma_passive; args[$c]="--win allocate $passive_args" ;;
    passive-create) prog[$c]=rma_passive; args[$c]="--win create $passive_args" ;;
    *) echo "rma_compare: unknown case '$c' (lat, lat-create, passive, passive-create)" >&2; exit 2 ;;
  esac
  cases+=("$c")
done

[ -n "$report" ] && cases=() && runs_to_do=0 || runs_to_do=$runs
for ((i = 0; i < load && runs_to_do > 0; i++)); do
  /bin/sh -c 'while :; do :; done' &
  hogs+=($!)
done
results="$work/results.jsonl"
[ -n "$report" ] || : >"$results"
for ((run = 1; run <= runs_to_do; run++)); do
  for c in "${cases[@]}"; do
    for name in "${impls[@]}"; do
      tag="\"impl\": \"$name\", \"case\": \"$c\", \"run\": $run, \"load\": $load"
      # shellcheck disable=SC2086 # launch and args are word lists
      timeout -k 10 "$timeout" ${launch[$name]} "$work/${prog[$c]}.${cc[$name]}" ${args[$c]} \
        >"$work/out" 2>"$work/err" </dev/null
      rc=$?
      grep '"verified"' "$work/out" | sed "s/^{/{$tag, /" | tee -a "$results"
      if [ $rc -ne 0 ] || ! grep -q '"done": true' "$work/out"; then
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then msg="timeout after ${timeout} s"
        else
          msg=$(grep -m1 '"error"' "$work/out" | sed 's/.*"error": "\(.*\)"}$/\1/')
          [ -n "$msg" ] || msg="exit $rc: $(grep -v '^\s*$' "$work/err" | grep -v -- '^-*$' | head -3 | tr '\n' ' ' | cut -c1-200)"
        fi
        echo "rma_compare: $name $c run $run failed: $msg" >&2
        python3 -c 'import json,sys; print(json.dumps(dict(json.loads("{"+sys.argv[1]+"}"), failed=sys.argv[2], exit=int(sys.argv[3]))))' \
          "$tag" "$msg" "$rc" >>"$results"
      fi
    done
  done
done

python3 - "$results" "${out:-}" "$runs" "$load" "$np" "$cmdline" <<'EOF'
import collections, json, os, re, statistics, sys
path, out, runs, load, np = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = [json.loads(l) for l in open(path) if l.strip()]
meas = [r for r in rows if "failed" not in r]
fails = [r for r in rows if "failed" in r]
impls, keys = [], []
by = collections.defaultdict(list)
# One row of the table per (case, op or phase, size, metric).
def metrics(r):
    if r["bench"] == "rma_passive":
        return [(r["phase"], 8, m) for m in ("median_us", "p90_us", "max_us", "epochs")]
    if r["op"].endswith("_bw"):
        return [(r["op"], r["size"], "mbps")]
    return [(r["op"], r["size"], "median_us")]
for r in meas:
    if r["impl"] not in impls: impls.append(r["impl"])
    if not r.get("verified", False):
        fails.append(dict(r, failed="data check failed (verified false)"))
    for (what, size, m) in metrics(r):
        k = (r["case"], what, size, m)
        if k not in keys: keys.append(k)
        by[(r["impl"],) + k].append(r[m])
for r in fails:
    if r["impl"] not in impls: impls.append(r["impl"])
summary = []
for k in keys:
    row = {"case": k[0], "what": k[1], "size": k[2], "metric": k[3]}
    for i in impls:
        xs = by.get((i,) + k, [])
        if xs:
            row[i] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}
    summary.append(row)
peers = [p for p in ("ompi", "mpich") if p in impls]
mine = [i for i in impls if i not in ("ompi", "mpich")]
def cell(row, i):
    v = row.get(i)
    if not v: return "-"
    f = "%.0f" if v["median"] >= 1000 or all(float(x).is_integer() for x in (v["median"], v["min"], v["max"])) else "%.2f"
    return (f + " (" + f + "-" + f + ")") % (v["median"], v["min"], v["max"])
lines = ["| case | op / phase | size | metric | " + " | ".join(impls) + "".join(" | %s/%s" % (i, p) for i in mine for p in peers) + " |",
         "|---|---|---|---|" + "---|" * (len(impls) + len(mine) * len(peers))]
for row in summary:
    ratios = []
    for i in mine:
        for p in peers:
            a, b = row.get(i), row.get(p)
            ratios.append("%.2f" % (a["median"] / b["median"]) if a and b and b["median"] else "-")
    lines.append("| %s | %s | %s | %s | %s%s |" % (row["case"], row["what"], row["size"], row["metric"],
                 " | ".join(cell(row, i) for i in impls), "".join(" | " + x for x in ratios)))
lines.append("")
lines.append("Medians over the launches (%d per MPI and case, %d ranks, load %d), range in parentheses; "
             "latencies in µs, bandwidths in MB/s (10^6 B/s); epochs = lock/put/unlock epochs completed while "
             "the target computed. Ratios: median over median (for MB/s above 1 is better, for µs below 1)." % (runs, np, load))
if fails:
    lines.append("")
    lines.append("Failed launches:")
    seen = collections.defaultdict(set)
    for r in fails:
        # Without the process ids and host names of the launchers' messages.
        msg = re.sub(r"\[[\w.-]+:\d+\] ", "", r["failed"])
        seen[(r["impl"], r["case"], msg)].add(r["run"])
    for (i, c, msg), rs in seen.items():
        lines.append("- %s, %s: %s (%d of %d launches)" % (i, c, msg, len(rs), runs))
table = "\n".join(lines)
print(table)
if out:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": "bench/rma_compare.sh " + sys.argv[6], "runs": runs, "load": load, "np": np,
                   "launches": rows, "summary": summary}, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("`bench/rma_compare.sh %s`\n\n%s\n" % (sys.argv[6], table))
EOF
