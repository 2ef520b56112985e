#!/bin/sh
# Message rate of a tcp stream (64-byte messages, windows of 32, every byte
# checked) between two ranks, with and without HELD idle connections held
# against the receiver's tcp port by a stranger, side by side in one run.
# Prints one JSON object: medians of REPS runs each and their ratio.
#
#   bazel build //tools:nmad-run //tests:workers/ops_worker
#   bench/held_connections.sh [REPS] [HELD] [MSGS]
set -eu
reps=${1:-5}
held=${2:-3000}
msgs=${3:-100000}
bin=${BAZEL_BIN:-bazel-bin}
run=$bin/tools/nmad-run
worker=$bin/tests/workers/ops_worker
one() {
  NMAD_DRIVER=tcp NMAD_TCP_PENDING_PER_HOST=$((held + 100)) NMAD_TCP_PENDING_MAX=$((held + 100)) NMAD_TCP_HANDSHAKE_TIMEOUT_MS=600000 \
    "$run" -n 2 --timeout 300 "$worker" held "$1" "$msgs" 2>/dev/null |
    sed -n 's/.*"msg_per_s":\([0-9.]*\).*/\1/p'
}
without=""
with=""
i=0
while [ "$i" -lt "$reps" ]; do
  without="$without $(one 0)"
  with="$with $(one "$held")"
  i=$((i + 1))
done
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
m0=$(median "$without")
m1=$(median "$with")
awk -v m0="$m0" -v m1="$m1" -v held="$held" -v reps="$reps" -v msgs="$msgs" -v w0="$without" -v w1="$with" 'BEGIN {
  printf "{\"bench\":\"held_connections\",\"msgs\":%d,\"reps\":%d,\"held\":%d,", msgs, reps, held
  printf "\"msg_per_s_without\":%.0f,\"msg_per_s_with\":%.0f,\"ratio_with_over_without\":%.3f,", m0, m1, m1 / m0
  printf "\"runs_without\":\"%s\",\"runs_with\":\"%s\"}\n", w0, w1
}'
