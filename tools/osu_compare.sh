#!/usr/bin/env bash
# The OSU Micro-Benchmarks (Ohio State University's MPI benchmarks) built
# with an MPI's mpicc and run with its launcher, N launches per benchmark,
# then a table of the median and the range (min-max) over the launches per
# message size: the same benchmark sources for nmad, Open MPI and MPICH. Run
# by hand; OSU's source is not part of nmad (a release tarball unpacked, or
# a git mirror of it: --osu-src takes a tree or a git directory, whose HEAD
# is used). Both layouts are understood: c/mpi/<dir> + c/util (OMB 6, 7)
# and mpi/<dir> + util (OMB 5).
#
#   tools/osu_compare.sh --osu-src /path/to/osu-micro-benchmarks --build /tmp/osu-nmad \
#       --mpicc out/install/bin/mpicc --mpiexec out/install/bin/mpiexec
#   tools/osu_compare.sh ... --build /tmp/osu-ompi --mpicc mpicc.openmpi --mpiexec \
#       "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi --oversubscribe --mca btl self,vader"
#   tools/osu_compare.sh ... --build /tmp/osu-mpich --mpicc mpicc.mpich --mpiexec mpiexec.mpich
#
# Options:
#   --osu-src P     OSU's source (tree or git directory; OMB 7.4 and 6.1 were
#                   tried: github sherrywong1220/osu-micro-benchmarks-7.4,
#                   whose one-sided and pt2pt files are 7.4's, and
#                   paklui/osu-micro-benchmarks at v6.1)
#   --build DIR     where the programs are built (and found with --no-build)
#   --mpicc CC      the MPI's C compiler wrapper
#   --mpiexec "L"   the MPI's launcher with its options (one string)
#   --runs N        launches per benchmark (default 5)
#   --np N          processes (default 2)
#   --benchmarks L  comma-separated (default: the one-sided set, osu_put_latency,
#                   osu_get_latency, osu_put_bw, osu_get_bw, osu_put_bibw,
#                   osu_acc_latency, osu_get_acc_latency, osu_fop_latency,
#                   osu_cas_latency); pt2pt programs (osu_latency, osu_bw,
#                   osu_bibw, ...) are built too and may be named here
#   --args "A"      extra arguments for every benchmark (e.g. "-m 1:4096 -i 1000",
#                   or one-sided "-w create -s lock")
#   --timeout S     seconds per launch (default 300)
#   --raw FILE      also write every measurement: benchmark run size value
#   --no-build      run what --build holds
#   --report-only   no launch: the table again from the logs of the last runs
#                   in --build (DIR/<benchmark>.run<N>.log)
# Validation (-c) is passed to a benchmark whose --help offers it (OMB 7.4:
# pt2pt, osu_acc_latency, osu_fop_latency, osu_cas_latency; OMB 6.1: pt2pt
# only); a failed validation is named under the table. A benchmark whose
# launch fails or times out is reported with the first lines of its output
# (e.g. an MPI error class) instead of numbers, and the others still run.
set -u
src= build= mpicc= mpiexec= runs=5 np=2 extra= timeout=300 raw= do_build=1 report_only=0
benchmarks=osu_put_latency,osu_get_latency,osu_put_bw,osu_get_bw,osu_put_bibw,osu_acc_latency,osu_get_acc_latency,osu_fop_latency,osu_cas_latency
while (($#)); do
  case "$1" in
    --osu-src) src=$2; shift ;;
    --build) build=$2; shift ;;
    --mpicc) mpicc=$2; shift ;;
    --mpiexec) mpiexec=$2; shift ;;
    --runs) runs=$2; shift ;;
    --np) np=$2; shift ;;
    --benchmarks) benchmarks=$2; shift ;;
    --args) extra=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    --raw) raw=$2; shift ;;
    --no-build) do_build=0 ;;
    --report-only) report_only=1; do_build=0 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "osu_compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $build && -n $mpiexec ]] || { echo "osu_compare.sh: --build and --mpiexec are needed (see --help)" >&2; exit 2; }
# Relative paths of the compiler and the launcher are taken from here: the
# programs are built and run inside $build.
[[ $mpicc == */* && $mpicc != /* ]] && mpicc=$PWD/$mpicc
read -r launcher launcher_args <<<"$mpiexec"
[[ $launcher == */* && $launcher != /* ]] && mpiexec="$PWD/$launcher $launcher_args"
[[ -n $raw && $raw != /* ]] && raw=$PWD/$raw
mkdir -p "$build" && build=$(cd "$build" && pwd) || exit 2

if ((do_build)); then
  [[ -n $mpicc && -n $src ]] || { echo "osu_compare.sh: --mpicc and --osu-src are needed to build" >&2; exit 2; }
  rm -rf "$build/src" && mkdir -p "$build/src" || exit 2
  if [[ -d $src/c/util || -d $src/util ]]; then
    cp -r "$src/." "$build/src/" || exit 2
  elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" archive HEAD | tar -x -C "$build/src" || exit 2
  else
    echo "osu_compare.sh: no OSU source under '$src'" >&2
    exit 2
  fi
  top=$build/src
  [[ -d $top/c/util ]] && top=$top/c
  [[ -d $top/util && -d $top/mpi/one-sided ]] || { echo "osu_compare.sh: no util/ and mpi/one-sided/ in '$src'" >&2; exit 2; }
  version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' "$build/src/configure.ac" 2>/dev/null | head -1)
  # The utilities every MPI benchmark links (configure's defines they read
  # given on the command line: no configure run, so no C++ compiler or
  # autotools are needed, only the MPI's mpicc).
  utils=()
  for u in osu_util.c osu_util_mpi.c osu_util_validation.c osu_util_graph.c osu_util_papi.c; do
    [[ -f $top/util/$u ]] && utils+=("$top/util/$u")
  done
  defs=(-DPACKAGE_VERSION="\"${version:-unknown}\"" -DFIELD_WIDTH=18 -DFLOAT_PRECISION=2)
  "$mpicc" -O2 "${defs[@]}" -I"$top/util" -c "${utils[@]}" >"$build/build.log" 2>&1 ||
    { tail -20 "$build/build.log"; exit 1; }
  objs=()
  for u in "${utils[@]}"; do objs+=("$(basename "${u%.c}").o"); done
  built=0 failed=0
  # pt2pt sits in pt2pt/ (OMB <= 7.0) or pt2pt/standard/ (7.1 and later).
  for f in "$top"/mpi/one-sided/osu_*.c "$top"/mpi/pt2pt/osu_*.c "$top"/mpi/pt2pt/standard/osu_*.c; do
    [[ -f $f ]] || continue
    p=$(basename "${f%.c}")
    if "$mpicc" -O2 "${defs[@]}" -I"$top/util" "$f" "${objs[@]}" -o "$build/$p" -lm -lpthread >"$build/$p.build.log" 2>&1; then
      built=$((built + 1))
    else
      failed=$((failed + 1))
      echo "osu_compare.sh: $p not built: $(grep -m1 -i error "$build/$p.build.log" | cut -c1-120)" >&2
    fi
  done
  echo "# OSU ${version:-?} from $src: $built programs built in $build ($failed not built)"
fi
cd "$build" || exit 2

[[ -n $raw ]] && : >"$raw"
echo "# mpiexec: $mpiexec -n $np; runs: $runs; args: ${extra:-none}"
IFS=, read -r -a blist <<<"$benchmarks"
for b in "${blist[@]}"; do
  if [[ ! -x ./$b ]]; then
    echo "== $b: not built"
    continue
  fi
  args=()
  read -r -a args <<<"$extra"
  # The benchmark's own usage says whether it validates (the binary's text
  # would not: it holds every benchmark kind's usage of OSU's utilities).
  ((report_only)) ||
    timeout -k 5 60 $mpiexec -n "$np" "./$b" -h 2>&1 </dev/null | grep -qE -- '-c,? +--validation' && args+=(-c)
  data=$build/$b.data
  : >"$data"
  err= badruns=
  for ((r = 1; r <= runs; r++)); do
    log=$build/$b.run$r.log
    if ((report_only)); then
      [[ -f $log ]] || break
      rc=0
    else
      timeout -k 5 "$timeout" $mpiexec -n "$np" "./$b" "${args[@]}" >"$log" 2>&1 </dev/null
      rc=$?
    fi
    if ((rc == 124 || rc == 137)); then err="timeout after ${timeout}s (run $r)"; break; fi
    # Measurement lines: a size then one or more numbers (the value first).
    awk -v r="$r" '!/^#/ && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ { print r, $1, $2, $3 }' "$log" >>"$data"
    if ((rc != 0)) || ! awk -v r="$r" '$1 == r { n++ } END { exit !n }' "$data"; then
      err="exit $rc (run $r): $(grep -v '^\s*$' "$log" | grep -v '^#' | head -2 | tr '\n' ' ' | cut -c1-160)"
      break
    fi
    # Validation: pt2pt prints Pass/Fail after the value, the one-sided
    # atomics of OMB 7 print "FAILED: ..." lines. The numbers are kept,
    # the runs named under the table.
    grep -qE '[[:space:]]Fail[[:space:]]*$|^FAILED' "$log" && badruns+=" $r"
  done
  unit=$(grep -m1 "^# Size" "$build/$b.run1.log" 2>/dev/null | sed "s/^# Size *//; s/ *Validation *$//")
  [[ -n $raw ]] && awk -v b="$b" '{ print b, $1, $2, $3 }' "$data" >>"$raw"
  if [[ -n $err ]]; then
    echo "== $b: FAILED: $err"
    continue
  fi
  echo "== $b (${unit:-value}; median and min-max of $runs launches)"
  printf '%10s %12s %25s\n' size median range
  # Per size: the values of all launches sorted, median, min, max.
  awk '{ v[$2] = v[$2] " " $3 } END { for (s in v) print s, v[s] }' "$data" | sort -n |
    while read -r size vals; do
      read -r -a a <<<"$(tr ' ' '\n' <<<"$vals" | sed '/^$/d' | sort -g | tr '\n' ' ')"
      n=${#a[@]}
      if ((n % 2)); then med=${a[n / 2]}; else med=$(awk -v x="${a[n / 2 - 1]}" -v y="${a[n / 2]}" 'BEGIN { printf "%.2f", (x + y) / 2 }'); fi
      printf '%10s %12s %25s\n' "$size" "$med" "${a[0]}-${a[n - 1]}"
    done
  if [[ -n $badruns ]]; then
    echo "   VALIDATION FAILED in run(s)$badruns: $(grep -hE '^FAILED|Fail[[:space:]]*$' $(for r in $badruns; do echo "$build/$b.run$r.log"; done) | sort -u | head -3 | tr '\n' ' ' | cut -c1-200)"
  fi
done
