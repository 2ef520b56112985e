// Multi-process scenarios for operations robustness, started by nmad-run from
// tests/ops_test.cpp (and bench/held_connections.sh). Ranks 0 and 1 talk
// over the tcp driver (NMAD_DRIVER=tcp) while rank 1 attacks rank 0's
// listening port; every message's contents are checked.
//
//   ops_worker junk N MSGS        rank 1 opens N connections to rank 0's tcp
//                                 port, each sending junk then closing, while
//                                 MSGS messages stream 0 -> 1
//   ops_worker held N MSGS        rank 1 opens and holds N connections to rank
//                                 0's port (sending nothing) during a stream of
//                                 MSGS messages; then prints how many rank 0
//                                 closed (refused) and the stream's rate as
//                                 JSON: {"held":N,"refused":K,"msgs":M,"msg_per_s":R}
//   ops_worker no_finalize R      rank R exits 0 after creating its session
//                                 without closing it
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"

using namespace nmad;

namespace {

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stdout, "ops_worker rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void expect_ok(errc e, const request& r, const char* what) {
  if (e != errc::ok) fail(std::string(what) + ": " + std::string(to_string(e)) + " " + r.error_message());
}

int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket: " + std::string(std::strerror(errno)));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    fail("connect to " + address + ": " + std::strerror(errno));
  return fd;
}

// Rank 0's tcp address, known to rank 1.
std::string exchange_address(session& s) {
  char addr[256] = {};
  request r;
  if (s.rank() == 0) {
    std::snprintf(addr, sizeof addr, "%s", s.local_address("tcp").c_str());
    expect_ok(s.isend(1, 1, addr, sizeof addr, r), r, "address");
  } else {
    expect_ok(s.irecv(0, 1, addr, sizeof addr, r), r, "address");
  }
  expect_ok(s.wait(r), r, "address");
  return addr;
}

std::uint64_t word(std::uint64_t i, int k) { return i * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(k); }

// Streams `msgs` messages of 64 bytes from rank 0 to rank 1 in windows of 32,
// checking every byte, while `keep_going()` or until `msgs` are done; returns
// how many went and the seconds it took.
std::pair<long, double> stream(session& s, long msgs, const std::function<bool()>& more) {
  constexpr int window = 32;
  std::vector<std::uint64_t> buf(window * 8);
  request reqs[window];
  long done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    // Rank 1 decides whether another window follows (a flag in its ack).
    for (int k = 0; k < window; ++k) {
      std::uint64_t* m = &buf[k * 8];
      if (s.rank() == 0) {
        for (int j = 0; j < 8; ++j) m[j] = word(static_cast<std::uint64_t>(done + k), j);
        expect_ok(s.isend(1, 2, m, 64, reqs[k]), reqs[k], "stream isend");
      } else {
        expect_ok(s.irecv(0, 2, m, 64, reqs[k]), reqs[k], "stream irecv");
      }
    }
    for (int k = 0; k < window; ++k) expect_ok(s.wait(reqs[k]), reqs[k], "stream wait");
    if (s.rank() == 1)
      for (int k = 0; k < window; ++k)
        for (int j = 0; j < 8; ++j)
          if (buf[k * 8 + j] != word(static_cast<std::uint64_t>(done + k), j))
            fail("stream message " + std::to_string(done + k) + " corrupted");
    done += window;
    int go = 0;
    request a;
    if (s.rank() == 1) {
      go = (done < msgs || more()) ? 1 : 0;
      expect_ok(s.isend(0, 3, &go, sizeof go, a), a, "ack");
    } else {
      expect_ok(s.irecv(1, 3, &go, sizeof go, a), a, "ack");
    }
    expect_ok(s.wait(a), a, "ack");
    if (!go) break;
  }
  return {done, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

int junk(session& s, int n, long msgs) {
  if (s.rank() > 1) return 0;
  const std::string addr = exchange_address(s);
  std::atomic<bool> knocking{s.rank() == 1};
  std::thread knocker;
  if (s.rank() == 1)
    knocker = std::thread([&] {
      std::mt19937 rng(11);
      for (int i = 0; i < n; ++i) {
        int fd = connect_to(addr);
        char bytes[32];
        for (auto& b : bytes) b = static_cast<char>(rng());
        (void)!::write(fd, bytes, sizeof bytes);
        ::close(fd);
      }
      knocking = false;
    });
  auto [done, secs] = stream(s, msgs, [&] { return knocking.load(); });
  if (knocker.joinable()) knocker.join();
  std::printf("JUNK_OK rank=%d connections=%d msgs=%ld\n", s.rank(), s.rank() == 1 ? n : 0, done);
  return 0;
}

int held(session& s, int n, long msgs) {
  if (s.rank() > 1) return 0;
  const std::string addr = exchange_address(s);
  std::vector<int> fds;
  if (s.rank() == 1) {
    for (int i = 0; i < n; ++i) fds.push_back(connect_to(addr));
    // Warm up until rank 0 has accepted (or refused) them all: the kernel's
    // backlog empties as rank 0 progresses.
  }
  // First pass: let rank 0 take every connection in.
  stream(s, 64 * 32, [] { return false; });
  auto [done, secs] = stream(s, msgs, [] { return false; });
  int refused = 0;
  if (s.rank() == 1) {
    // A refused connection was closed by rank 0: readable with EOF.
    for (int round = 0; round < 100; ++round) {
      refused = 0;
      for (int fd : fds) {
        pollfd p{fd, POLLIN | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) ++refused;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      int again = 0;
      for (int fd : fds) {
        pollfd p{fd, POLLIN | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) ++again;
      }
      if (again == refused) break;
    }
    std::printf("{\"held\":%d,\"refused\":%d,\"msgs\":%ld,\"seconds\":%.4f,\"msg_per_s\":%.0f}\n", n, refused, done,
                secs, done / secs);
  }
  std::printf("HELD_OK rank=%d\n", s.rank());
  std::fflush(stdout);
  for (int fd : fds) ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ops_worker SCENARIO [ARGS]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  try {
    auto s = session::create(session_options{});
    g_rank = s->rank();
    int rc = 2;
    if (scenario == "junk") rc = junk(*s, static_cast<int>(arg(2, 2000)), arg(3, 2000));
    else if (scenario == "held") rc = held(*s, static_cast<int>(arg(2, 3000)), arg(3, 20000));
    else if (scenario == "no_finalize") {
      if (s->rank() == arg(2, 1)) {
        std::printf("NO_FINALIZE rank=%d\n", s->rank());
        std::fflush(stdout);
        std::_Exit(0);
      }
      rc = 0;
    } else std::fprintf(stderr, "ops_worker: unknown scenario '%s'\n", scenario.c_str());
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::printf("ops_worker: %s\n", e.what());
    return 1;
  }
}
