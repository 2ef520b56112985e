#!/usr/bin/env bash
# MPICH's MPI-IO test programs (test/mpi/io of its source) built with an
# MPI's mpicc and run with its launcher at the process counts of MPICH's
# testlist.in: the same programs for nmad, Open MPI and MPICH. Run by hand;
# MPICH's source is not part of nmad (a git clone or an unpacked release).
#
#   tools/mpich_io_tests.sh --mpich-src /path/to/mpich --work /tmp/mio-nmad \
#       --mpicc out/install/bin/mpicc --mpiexec "out/install/bin/mpiexec --oversubscribe"
#   tools/mpich_io_tests.sh --mpich-src ... --work /tmp/mio-ompi --mpicc mpicc.openmpi \
#       --mpiexec "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi --oversubscribe"
#   tools/mpich_io_tests.sh --mpich-src ... --work /tmp/mio-mpich --mpicc mpicc.mpich --mpiexec mpiexec.mpich
#
# --mpich-src may be a source tree or a git directory (its HEAD is used).
# --timeout S per program (default 90). The suite's configure-generated
# headers are replaced by small stand-ins (mpitestconf.h, mtest_mpix.h);
# async.c uses ROMIO's old MPIO_Request/MPIO_Wait/MPIO_Test names, mapped
# to the standard ones. The -large-count variant of rdwrord runs the MPI 4
# _c routines (an MPI 3.1 library has none: see what the program prints).
# A program passes when it exits 0 and prints "No Errors". Prints one line
# per entry and "N passed, M failed" last.
set -u
src= work= mpicc= mpiexec= timeout=90
while (($#)); do
  case "$1" in
    --mpich-src) src=$2; shift ;;
    --work) work=$2; shift ;;
    --mpicc) mpicc=$2; shift ;;
    --mpiexec) mpiexec=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "mpich_io_tests.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $src && -n $work && -n $mpicc && -n $mpiexec ]] || { echo "mpich_io_tests.sh: see --help" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
if [[ -d $src/test/mpi/io ]]; then
  cp -r "$src/test/mpi/io" "$src/test/mpi/util" "$src/test/mpi/include" "$work/"
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" archive HEAD test/mpi/io test/mpi/util test/mpi/include | tar -x -C "$work" --strip-components=2
else
  echo "mpich_io_tests.sh: no test/mpi/io under '$src'" >&2
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
# mtest.c with the single-threaded hooks (as MPICH's Makefile_single.mtest).
"$mpicc" -Iinclude -c util/mtest.c -o mtest.o >build.log 2>&1 &&
  "$mpicc" -Iinclude -c util/mtest_single.c -o mtest_single.o >>build.log 2>&1 &&
  "$mpicc" -Iinclude -c util/mtest_common.c -o mtest_common.o >>build.log 2>&1 ||
  { tail -20 build.log; exit 1; }

pass=0 fail=0
printf '%-28s %5s  %-10s %s\n' program ranks result note
while read -r prog np extra; do
  [[ -z $prog || $prog == \#* ]] && continue
  name=$prog args=() defs=() note=
  case "$extra" in
    *-large-count*) name=$prog-large-count; args+=(-large-count) ;;
  esac
  [[ $extra == *arg=* ]] && args+=("${extra##*arg=}")
  [[ $prog == async ]] && defs+=(-DMPIO_Request=MPI_Request -DMPIO_Wait=MPI_Wait -DMPIO_Test=MPI_Test)
  exe=bin.$name
  if ! "$mpicc" -Iinclude "${defs[@]}" "io/$prog.c" mtest.o mtest_single.o mtest_common.o -o "$exe" -lm >"$name.build.log" 2>&1; then
    printf '%-28s %5s  %-10s %s\n' "$name" "$np" "not-built" "$(grep -m1 -i error "$name.build.log" | cut -c1-100)"
    fail=$((fail + 1))
    continue
  fi
  timeout -k 5 "$timeout" $mpiexec -n "$np" "./$exe" "${args[@]}" >"$name.log" 2>&1 </dev/null
  rc=$?
  if ((rc == 124 || rc == 137)); then res=timeout
  elif ((rc == 0)) && grep -q "No Errors" "$name.log"; then res=pass
  else res=fail; note=$(grep -v "^\s*$" "$name.log" | head -2 | tr '\n' ' ' | cut -c1-120)
  fi
  [[ $res == pass ]] && pass=$((pass + 1)) || fail=$((fail + 1))
  printf '%-28s %5s  %-10s %s\n' "$name" "$np" "$res" "$note"
done <io/testlist.in
echo "$pass passed, $fail failed"
