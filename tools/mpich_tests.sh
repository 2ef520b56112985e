#!/usr/bin/env bash
# MPICH's test programs (test/mpi/<dir> of its source) built with an MPI's
# mpicc and run with its launcher at the process counts, arguments and
# environment of MPICH's test lists: the same programs for nmad, Open MPI
# and MPICH. Run by hand; MPICH's source is not part of nmad (a git clone or
# an unpacked release).
#
#   tools/mpich_tests.sh --mpich-src /path/to/mpich --dirs part,session,mpi_t \
#       --work /tmp/mt-nmad --mpicc out/install/bin/mpicc \
#       --mpiexec "out/install/bin/mpiexec --oversubscribe"
#   ... --work /tmp/mt-ompi --mpicc mpicc.openmpi --mpiexec \
#       "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi --oversubscribe"
#   ... --work /tmp/mt-mpich --mpicc mpicc.mpich --mpiexec mpiexec.mpich
#
# --dirs      test/mpi subdirectories, comma-separated (io, part, session,
#             mpi_t, coll, pt2pt, datatype, ...)
# --only RE   run only the entries whose program name matches the extended
#             regular expression RE (e.g. '^(p_|coll_large)')
# --timeout S per program (default 90; an entry's timeLimit raises it)
# --max-mem G skip entries whose test list says they need more than G GB
#             (default: the machine's available memory)
# --build-only builds every program of the lists and runs none: "built" or
#             "not-built" per entry (which programs an mpi.h can compile)
# --mpich-src may be a source tree or a git directory (its HEAD is used).
# Programs built from one source with other flags (start_pready_wait from
# start_pready.c with -DTEST_WAIT) are found in the directory's
# Makefile.am. The suite's configure-generated headers are replaced by
# small stand-ins (mpitestconf.h, mtest_mpix.h). An entry passes when the
# program exits 0 and prints "No Errors". One line per entry, then
# "N passed, M failed" last (skipped entries are neither).
set -u
src= work= mpicc= mpiexec= timeout=90 dirs= only= maxmem= build_only=0
while (($#)); do
  case "$1" in
    --mpich-src) src=$2; shift ;;
    --work) work=$2; shift ;;
    --mpicc) mpicc=$2; shift ;;
    --mpiexec) mpiexec=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    --dirs) dirs=$2; shift ;;
    --only) only=$2; shift ;;
    --max-mem) maxmem=$2; shift ;;
    --build-only) build_only=1 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "mpich_tests.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
((build_only)) && : "${mpiexec:=none}"
[[ -n $src && -n $work && -n $mpicc && -n $mpiexec && -n $dirs ]] || { echo "mpich_tests.sh: see --help" >&2; exit 2; }
[[ -n $maxmem ]] || maxmem=$(awk '/MemAvailable/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
IFS=, read -r -a dirlist <<<"$dirs"
mkdir -p "$work"
work=$(cd "$work" && pwd)
# Relative paths of the compiler and the launcher are taken from here: the
# programs are built and run inside $work.
[[ $mpicc == */* && $mpicc != /* ]] && mpicc=$PWD/$mpicc
read -r launcher launcher_args <<<"$mpiexec"
[[ $launcher == */* && $launcher != /* ]] && mpiexec="$PWD/$launcher $launcher_args"
paths=()
for d in "${dirlist[@]}" util include; do paths+=("test/mpi/$d"); done
if [[ -d $src/test/mpi ]]; then
  for p in "${paths[@]}"; do
    rel=${p#test/mpi/}
    mkdir -p "$work/$(dirname "$rel")" && cp -r "$src/$p" "$work/$(dirname "$rel")/" || exit 2
  done
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" archive HEAD "${paths[@]}" | tar -x -C "$work" --strip-components=2 || exit 2
else
  echo "mpich_tests.sh: no test/mpi under '$src'" >&2
  exit 2
fi
cd "$work" || exit 2
cat >include/mpitestconf.h <<'EOF'
/* Stand-in for the configure-generated header of MPICH's test suite. */
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDARG_H 1
#define HAVE_STDINT_H 1
#define HAVE_SYS_TYPES_H 1
#define USE_STDARG 1
#define HAVE_MPI_IO 1
#define HAVE_MPI_WIN_CREATE 1
#define HAVE_MPI_TYPE_CREATE_RESIZED 1
#define HAVE_LONG_LONG 1
#define HAVE_LONG_DOUBLE 1
#define SIZEOF_INT 4
#define SIZEOF_LONG 8
#define SIZEOF_LONG_LONG 8
#define SIZEOF_VOID_P 8
#define SIZEOF_MPI_OFFSET 8
#define POINTERINT_t intptr_t
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
EOF
: >include/mtest_mpix.h
# mtest.c with the single-threaded hooks (as MPICH's Makefile_single.mtest),
# the threaded ones (threads/*), and the driver whose main() calls the run()
# of newer programs.
"$mpicc" -Iinclude -c util/mtest.c -o mtest.o >build.log 2>&1 &&
  "$mpicc" -Iinclude -c util/mtest_single.c -o mtest_single.o >>build.log 2>&1 &&
  "$mpicc" -Iinclude -c util/mtest_common.c -o mtest_common.o >>build.log 2>&1 &&
  "$mpicc" -Iinclude -c util/run_mpitests.c -o run_mpitests.o >>build.log 2>&1 &&
  "$mpicc" -Iinclude -c util/mtest_thread.c -o mtest_thread.o >>build.log 2>&1 ||
  { tail -20 build.log; exit 1; }

# The source and extra flags of program $2 in directory $1, from its
# Makefile.am (<prog>_SOURCES, <prog>_CPPFLAGS); default <prog>.c.
program_source() {
  local mk=$1/Makefile.am prog=$2 line
  line=$(sed -n "s/^[[:space:]]*${prog}_SOURCES[[:space:]]*=[[:space:]]*//p" "$mk" 2>/dev/null | head -1)
  echo "${line:-$prog.c}"
}
program_flags() {
  sed -n "s/^[[:space:]]*${2}_CPPFLAGS[[:space:]]*=[[:space:]]*//p" "$1/Makefile.am" 2>/dev/null |
    head -1 | sed 's/\$(AM_CPPFLAGS)//g'
}

pass=0 fail=0 skip=0
printf '%-34s %5s  %-10s %s\n' program ranks result note
for d in "${dirlist[@]}"; do
  list=$d/testlist
  [[ -f $list ]] || list=$d/testlist.in
  [[ -f $list ]] || { echo "mpich_tests.sh: no test list in $d" >&2; continue; }
  while read -r prog np rest; do
    [[ -z $prog || $prog == \#* || $prog == *@* || -z $np ]] && continue
    [[ -n $only && ! $prog =~ $only ]] && continue
    [[ $np =~ ^[0-9]+$ ]] || continue
    args=() envs=() note= limit=$timeout mem=
    for tok in $rest; do
      case "$tok" in
        arg=*) args+=("${tok#arg=}") ;;
        env=*) envs+=("${tok#env=}") ;;
        timeLimit=*) ((${tok#timeLimit=} > limit)) && limit=${tok#timeLimit=} ;;
        mem=*) mem=${tok#mem=} ;;
        xfail=*) note="(listed xfail) " ;;
        *=*) ;;  # other keys of the test list (strict, mpiversion, ...)
        *) args+=("$tok") ;;  # a bare argument (io's "rdwrord 2 -large-count")
      esac
    done
    name="$d/$prog${args[*]:+ ${args[*]}}"
    if [[ -n $mem ]] && awk -v m="$mem" -v a="$maxmem" 'BEGIN { exit !(m > a) }'; then
      printf '%-34s %5s  %-10s %s\n' "$name" "$np" "skipped" "needs ${mem} GB, ${maxmem} GB available"
      skip=$((skip + 1))
      continue
    fi
    exe=bin.${d//\//.}.$prog
    if [[ ! -x $exe ]]; then
      srcs=() flags=()
      for s in $(program_source "$d" "$prog"); do [[ $s == *.c ]] && srcs+=("$d/$s"); done
      read -r -a flags <<<"$(program_flags "$d" "$prog")"
      # Newer programs define run() and take main() from the suite's driver.
      grep -qE '^int run\(' "${srcs[@]}" && ! grep -qE '^int main' "${srcs[@]}" && srcs+=(run_mpitests.o)
      # ROMIO's old request names, used by io/async.
      [[ $d/$prog == io/async ]] && flags+=(-DMPIO_Request=MPI_Request -DMPIO_Wait=MPI_Wait -DMPIO_Test=MPI_Test)
      hooks=mtest_single.o
      [[ $d == threads* ]] && hooks=mtest_thread.o  # as MPICH's Makefile_threads.mtest
      if ! "$mpicc" -Iinclude "${flags[@]}" "${srcs[@]}" mtest.o "$hooks" mtest_common.o -o "$exe" -lm -lpthread \
          >"$exe.build.log" 2>&1; then
        printf '%-34s %5s  %-10s %s\n' "$name" "$np" "not-built" "$(grep -m1 -i error "$exe.build.log" | cut -c1-110)"
        fail=$((fail + 1))
        continue
      fi
    fi
    if ((build_only)); then
      printf '%-34s %5s  %-10s %s\n' "$name" "$np" "built" ""
      pass=$((pass + 1))
      continue
    fi
    log="$exe.$((pass + fail + skip)).log"
    timeout -k 5 "$limit" env "${envs[@]}" $mpiexec -n "$np" "./$exe" "${args[@]}" >"$log" 2>&1 </dev/null
    rc=$?
    if ((rc == 124 || rc == 137)); then res=timeout
    elif ((rc == 0)) && grep -q "No Errors" "$log"; then res=pass
    else res=fail; note+=$(grep -v "^\s*$" "$log" | head -2 | tr '\n' ' ' | cut -c1-120)
    fi
    [[ $res == pass ]] && pass=$((pass + 1)) || fail=$((fail + 1))
    printf '%-34s %5s  %-10s %s\n' "$name" "$np" "$res" "$note"
  done <"$list"
done
if ((build_only)); then echo "$pass built, $fail not built"; else echo "$pass passed, $fail failed"; fi
