// Ping-pong between ranks 0 and 1 with the native API.
//   nmad-run -n 2 ./pingpong [ITERATIONS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nmad/nmad.hpp>

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 1000;
  auto s = nmad::session::create();
  if (s->size() < 2) {
    std::fprintf(stderr, "pingpong needs 2 processes: nmad-run -n 2 %s\n", argv[0]);
    return 2;
  }
  if (s->rank() > 1) return 0;
  const int peer = 1 - s->rank();
  long value = 0;
  nmad::request req;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (s->rank() == 0) {
      value = i;
      s->isend(peer, 1, &value, sizeof value, req);
      s->wait(req);
      s->irecv(peer, 1, &value, sizeof value, req);
      if (s->wait(req) != nmad::errc::ok || value != i + 1) {
        std::fprintf(stderr, "pingpong: bad answer %ld (%s)\n", value, req.error_message().c_str());
        return 1;
      }
    } else {
      s->irecv(peer, 1, &value, sizeof value, req);
      if (s->wait(req) != nmad::errc::ok) return 1;
      ++value;
      s->isend(peer, 1, &value, sizeof value, req);
      s->wait(req);
    }
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (s->rank() == 0)
    std::printf("pingpong: %d round trips of %zu bytes over %s, %.2f us one-way\n", iters, sizeof value,
                s->driver_name().c_str(), us / iters / 2);
  return 0;
}
