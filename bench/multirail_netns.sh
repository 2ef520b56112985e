#!/usr/bin/env bash
# Multirail over two shaped links (docs/MULTIRAIL.md, docs/BENCHMARKS.md
# "Multirail over two shaped links"): two hosts made by tools/railpair
# (network namespaces joined by two veth links, link 1 at RATE1 and link 2
# at RATE2), one rank in each, native ping-pong (bench/nmad_pingpong) in
# four set-ups per repetition, side by side:
#   rail1   one tcp rail on link 1
#   rail2   one tcp rail on link 2
#   split   tcp+tcp, split_balance, NMAD_RAIL_BANDWIDTH = the bandwidths
#           rail1 and rail2 reached at 8 MiB in this same repetition
#   equal   tcp+tcp, aggreg: rendezvous cut in equal halves
# Prints one JSON object on stdout (medians over REPS of each run's median
# one-way latency; bandwidth = size / that latency) and a table on stderr.
# Needs root; exits 77 saying why where namespaces cannot be created.
#
#   bazel build //tools:nmad-run //bench:nmad_pingpong
#   bench/multirail_netns.sh [REPS] [RATE1,RATE2] [PINGPONG_REPS]
set -euo pipefail
reps=${1:-3}
rates=${2:-400mbit,100mbit}
ppreps=${3:-5}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin=${BAZEL_BIN:-$here/bazel-bin}
bin="$(cd "$bin" && pwd -P)"
railpair="$here/tools/railpair"
run="$bin/tools/nmad-run"
pp="$bin/bench/nmad_pingpong"
[[ -x $run && -x $pp ]] || { echo "build first: bazel build //tools:nmad-run //bench:nmad_pingpong" >&2; exit 2; }
sizes=32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608
prefix="mrb$((RANDOM % 10000))"

if ! why="$("$railpair" check 2>&1)"; then
  echo "multirail_netns: skipped: $why" >&2
  exit 77
fi
"$railpair" up --prefix "$prefix" --rate "$rates" >&2
trap '"$railpair" down --prefix "$prefix"' EXIT
out="$(mktemp)"
trap '"$railpair" down --prefix "$prefix"; rm -f "$out"' EXIT

one() {  # one NAME ENV...: a ping-pong run, its JSON line tagged with NAME
  local name="$1"
  shift
  local line
  line="$(env "$@" NMAD_PROFILE=off "$railpair" run --prefix "$prefix" -- \
    "$run" --host "$prefix-a,$prefix-b" -n 2 --timeout 240 "$pp" --json --sizes "$sizes" --reps "$ppreps")"
  printf '{"setup":"%s","run":%s}\n' "$name" "$line" >>"$out"
  printf '%s' "$line"
}
bw8() {  # bandwidth at 8 MiB in MB/s from a ping-pong JSON line
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%.2f" % [p["bandwidth_MBps"] for p in r["results"] if p["size"]==8388608][0])' "$1"
}

for ((i = 1; i <= reps; i++)); do
  l1="$(one rail1 RAILPAIR_RAILS=1 NMAD_DRIVER=tcp)"
  l2="$(one rail2 RAILPAIR_RAILS=2 NMAD_DRIVER=tcp)"
  b1="$(bw8 "$l1")"
  b2="$(bw8 "$l2")"
  one split NMAD_DRIVERS=tcp+tcp NMAD_STRATEGY=split_balance NMAD_RAIL_BANDWIDTH="$b1,$b2" >/dev/null
  sed -i '$ s/^{"setup":"split"/{"setup":"split","rail_bandwidth":"'"$b1,$b2"'"/' "$out"
  one equal NMAD_DRIVERS=tcp+tcp NMAD_STRATEGY=aggreg >/dev/null
  echo "repetition $i of $reps done (rail bandwidths at 8 MiB: $b1, $b2 MB/s)" >&2
done

python3 - "$out" "$rates" "$reps" "$ppreps" <<'EOF'
import json, statistics, sys
path, rates, reps, ppreps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
runs = {}
fed = []
for line in open(path):
    o = json.loads(line)
    runs.setdefault(o["setup"], []).append({p["size"]: p["latency_us"]["median"] for p in o["run"]["results"]})
    if "rail_bandwidth" in o:
        fed.append(o["rail_bandwidth"])
sizes = sorted(runs["rail1"][0])
lat = {s: {n: statistics.median(r[n] for r in runs[s]) for n in sizes} for s in runs}
big = 8388608
bw = {s: big / lat[s][big] for s in lat}
res = {
    "bench": "multirail_netns",
    "rates": rates,
    "repetitions": reps,
    "pingpong_reps": ppreps,
    "bandwidth_8MiB_MBps": {s: round(bw[s], 2) for s in bw},
    "split_over_sum_alone": round(bw["split"] / (bw["rail1"] + bw["rail2"]), 3),
    "equal_over_sum_alone": round(bw["equal"] / (bw["rail1"] + bw["rail2"]), 3),
    "rail_bandwidth_fed": fed,
    "latency_us": [],
}
for n in sizes:
    h = n // 2
    row = {"size": n, "split": round(lat["split"][n], 1), "equal": round(lat["equal"][n], 1),
           "rail1": round(lat["rail1"][n], 1), "rail2": round(lat["rail2"][n], 1)}
    if h in lat["rail1"]:
        row["max_rail_half"] = round(max(lat["rail1"][h], lat["rail2"][h]), 1)
    res["latency_us"].append(row)
print(json.dumps(res))
t = sys.stderr
print(f"rates {rates}; medians of {reps} runs; bandwidth at 8 MiB (MB/s): " +
      ", ".join(f"{s} {bw[s]:.1f}" for s in ("rail1", "rail2", "split", "equal")), file=t)
print(f"split/(rail1+rail2) = {res['split_over_sum_alone']}, equal/(rail1+rail2) = {res['equal_over_sum_alone']}", file=t)
print("size      split_us  max(r1(N/2),r2(N/2))  equal_us  rail1_us  rail2_us", file=t)
for r in res["latency_us"]:
    print(f"{r['size']:>8} {r['split']:>10} {r.get('max_rail_half', '-'):>20} {r['equal']:>9} {r['rail1']:>9} {r['rail2']:>9}", file=t)
EOF
