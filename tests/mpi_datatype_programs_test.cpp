// The MPI layer end to end: derived datatypes, MPI_Pack. Each program of tests/mpi/
// runs under nmad-run at the process counts it supports (see mpi_run.hpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;
