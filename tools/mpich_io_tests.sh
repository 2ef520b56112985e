#!/usr/bin/env bash
# MPICH's MPI-IO test programs (test/mpi/io of its source): tools/mpich_tests.sh
# with --dirs io. Same options (--mpich-src, --work, --mpicc, --mpiexec,
# --timeout); see tools/mpich_tests.sh --help. The -large-count variant of
# rdwrord runs the MPI 4 _c routines.
exec "$(dirname "$0")/mpich_tests.sh" --dirs io "$@"
