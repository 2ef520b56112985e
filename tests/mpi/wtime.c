/* MPI_Wtime is monotonic and measures a sleep; MPI_Wtick is a sane tick. */
#include <time.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("wtime", &argc, &argv);
  double tick = MPI_Wtick();
  CHECK(tick > 0 && tick < 0.01, "Wtick %g", tick);
  double t0 = MPI_Wtime(), last = t0;
  for (int i = 0; i < 100000; ++i) {
    double t = MPI_Wtime();
    CHECK(t >= last, "Wtime went back: %.9f then %.9f", last, t);
    last = t;
  }
  struct timespec ts = {0, 100 * 1000000L};
  double a = MPI_Wtime();
  nanosleep(&ts, NULL);
  double b = MPI_Wtime();
  CHECK(b - a >= 0.099 && b - a < 5.0, "100 ms sleep measured as %g s", b - a);
  return mt_pass();
}
