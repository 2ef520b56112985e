#!/usr/bin/env bash
# HDF5's parallel tests (testpar/) built with an MPI's mpicc and run with its
# launcher: how MPI-IO holds up under a real parallel I/O library. Run by
# hand (a build takes 10-20 minutes on 2 cores; testphdf5 and t_shapesame
# run for many minutes). HDF5's source is not part of nmad: get it yourself
# (a release tarball, or `git archive hdf5-1_14_0` of HDFGroup/hdf5) and
# point --src at the unpacked tree (one with a `configure`).
#
#   tools/hdf5_testpar.sh --src /tmp/hdf5-1.14.0 --build /tmp/h5-nmad \
#       --mpicc out/install/bin/mpicc --mpiexec out/install/bin/mpiexec
#   tools/hdf5_testpar.sh --src /tmp/hdf5-1.14.0 --build /tmp/h5-ompi --mpicc mpicc.openmpi \
#       --mpiexec "mpiexec.openmpi --oversubscribe"          # as root: OMPI_ALLOW_RUN_AS_ROOT=1 ...
#   tools/hdf5_testpar.sh --src /tmp/hdf5-1.14.0 --build /tmp/h5-mpich --mpicc mpicc.mpich --mpiexec mpiexec.mpich
#
# Options:
#   --np N          processes per program (default 4)
#   --timeout S     seconds per program (default 900); a program killed by it
#                   is reported TIMEOUT
#   --tests "a b"   programs to run (default: every program of testpar/ that
#                   this build makes, t_pflush1 then t_pflush2 as HDF5's
#                   testpflush.sh runs them)
#   --no-build      run what --build holds
# Prints one line per program: name, PASS/FAIL/TIMEOUT, exit status, seconds,
# and the program's log file (under --build/testpar/nmad-logs/); a summary
# line "N passed, M failed" last.
set -u
src= build= mpicc= mpiexec= np=4 timeout=900 tests= do_build=1
while (($#)); do
  case "$1" in
    --src) src=$2; shift ;;
    --build) build=$2; shift ;;
    --mpicc) mpicc=$2; shift ;;
    --mpiexec) mpiexec=$2; shift ;;
    --np) np=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    --tests) tests=$2; shift ;;
    --no-build) do_build=0 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "hdf5_testpar.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $build && -n $mpiexec ]] || { echo "hdf5_testpar.sh: --build and --mpiexec are needed (see --help)" >&2; exit 2; }

if ((do_build)); then
  [[ -x $src/configure ]] || { echo "hdf5_testpar.sh: no configure in --src '$src'" >&2; exit 2; }
  [[ -n $mpicc ]] || { echo "hdf5_testpar.sh: --mpicc is needed to build" >&2; exit 2; }
  mkdir -p "$build"
  src=$(cd "$src" && pwd)
  cd "$build" || exit 2
  if [[ ! -f config.status ]]; then
    # Static only (one compilation per file instead of two), no Fortran,
    # C++, high-level library or tools: testpar needs none of them.
    echo "== configure (log: $build/configure.log)"
    CC=$mpicc "$src/configure" --enable-parallel --disable-fortran --disable-cxx --disable-hl --disable-tools \
      --disable-shared --enable-static --enable-tests --disable-doxygen-doc >configure.log 2>&1 ||
      { tail -20 configure.log; exit 1; }
  fi
  echo "== build (log: $build/build.log)"
  { make -j2 -C src && make -j2 -C test libh5test.la && make -j2 -C testpar \
      $(cd "$src/testpar" && sed -n 's/^TEST_PROG_PARA *= *//p' Makefile.am) t_pflush1 t_pflush2; } >build.log 2>&1 ||
    { tail -30 build.log; exit 1; }
fi

cd "$build/testpar" || exit 2
mkdir -p nmad-logs
if [[ -z $tests ]]; then
  for p in t_mpi t_init_term t_pshutdown t_prestart t_pflush1 t_pflush2 t_pread t_vfd t_bigio t_2Gio \
           t_pmulti_dset t_cache_image t_filters_parallel t_cache testphdf5 t_shapesame; do
    [[ -x $p ]] && tests+=" $p"
  done
fi
pass=0 fail=0
printf '%-20s %-8s %6s %8s  %s\n' program result status seconds log
for p in $tests; do
  log="nmad-logs/$p.log"
  t0=$(date +%s.%N)
  # HDF5_PARAPREFIX: where the parallel tests put their files (the build tree).
  HDF5_PARAPREFIX=$PWD timeout -k 10 "$timeout" $mpiexec -n "$np" "./$p" >"$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  if ((rc == 124 || rc == 137)); then res=TIMEOUT
  elif [[ $p == t_pflush1 ]]; then
    # It always exits with a failure code, by design (it leaves without
    # MPI_Finalize so that HDF5 flushes nothing; t_pflush2 then reads the
    # files): its verdict is its PASSED line and no "*** ERROR".
    grep -q PASSED "$log" && ! grep -q '\*\*\* ERROR' "$log" && res=PASS || res=FAIL
  elif ((rc == 0)); then res=PASS
  else res=FAIL
  fi
  [[ $res == PASS ]] && pass=$((pass + 1)) || fail=$((fail + 1))
  printf '%-20s %-8s %6d %8.1f  %s\n' "$p" "$res" "$rc" "$(echo "$t1 - $t0" | bc)" "$PWD/$log"
done
echo "$pass passed, $fail failed"
