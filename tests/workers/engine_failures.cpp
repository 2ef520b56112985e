// engine_worker's failures: a rank that dies (killed), dies with a
// rendezvous matched and another unexpected (killed_rdv), or between two
// unpacks of its packed message (killed_unpack), and the others see errors
// naming it; strangers knocking on a rank's tcp port (intruder) and idle
// connections flooding it beyond its descriptor limit (flood) leave the
// job unaffected.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "drivers/tcp/tcp_wire.hpp"
#include "tests/workers/engine_scenarios.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace nmad_test::engine {

namespace {

int knock(const std::string& address, const std::string& bytes) {
  const auto colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("intruder could not connect");
  (void)!::write(fd, bytes.data(), bytes.size());
  // The engine must close on us; wait (bounded) for EOF.
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  ssize_t n;
  do {
    n = ::read(fd, &c, 1);
  } while (n > 0);
  const int err = errno;
  ::close(fd);
  // Closed on us: EOF, or a reset when our unread bytes were discarded.
  return (n == 0 || err == ECONNRESET) ? 0 : -1;
}

std::string hello_with_key(int rank, const std::string& key) {
  tcp_wire::hello h;
  h.rank = rank;
  h.key_len = static_cast<std::uint32_t>(key.size());
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  return bytes + key;
}

}  // namespace

int killed(session& s) {
  const int me = s.rank();
  int token = 0;
  request r;
  // Everybody says hello to everybody first, so the failure happens mid-run.
  for (int p = 0; p < s.size(); ++p) {
    if (p == me) continue;
    request a, b;
    int in = -1;
    expect_ok(s.isend(p, 1, &me, sizeof me, a), a, "hello");
    expect_ok(s.irecv(p, 1, &in, sizeof in, b), b, "hello");
    expect_ok(s.wait(a), a, "hello");
    expect_ok(s.wait(b), b, "hello");
  }
  if (me == 1) {
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  std::vector<unsigned char> big(4 << 20);
  request rs, rr;
  s.irecv(1, 2, &token, sizeof token, rr);
  s.isend(1, 3, big.data(), big.size(), rs);  // rendezvous: waits for rank 1
  const errc er = s.wait(rr);
  const errc es = s.wait(rs);
  expect(er == errc::peer_failed, "pending receive from the dead rank must fail");
  expect(es == errc::peer_failed, "pending send to the dead rank must fail");
  expect(rr.error_message().find("rank 1") != std::string::npos, "error names the peer: " + rr.error_message());
  expect(rs.error_message().find("rank 1") != std::string::npos, "error names the peer: " + rs.error_message());
  expect(!s.peer_alive(1), "peer_alive(1) must be false");
  // New operations towards the dead rank fail at once.
  expect(s.isend(1, 4, &token, sizeof token, r) == errc::peer_failed, "isend to a dead rank");
  expect(s.probe(1, 77).error == errc::peer_failed, "a blocking probe of a dead rank returns an error");
  std::printf("rank %d saw: %s\n", me, rr.error_message().c_str());
  // The survivors can still talk to each other.
  if (s.size() > 2 && me != 1) {
    const int other = me == 0 ? 2 : 0;
    int v = 99, got = 0;
    request a, b;
    expect_ok(s.isend(other, 5, &v, sizeof v, a), a, "survivor send");
    expect_ok(s.irecv(other, 5, &got, sizeof got, b), b, "survivor recv");
    expect_ok(s.wait(a), a, "survivor send");
    expect_ok(s.wait(b), b, "survivor recv");
    expect(got == 99, "survivors exchange");
    std::printf("rank %d: survivors still exchange messages\n", me);
  }
  std::fflush(stdout);
  return 0;
}

// Rank 1 announces two rendezvous messages to rank 0, then stops calling
// the library and dies. Rank 0's receive of the first is matched (its
// ready-to-receive is never answered); the second waits unexpected. Every
// receive and probe involving rank 1 must fail, naming it, once it is dead.
int killed_rdv(session& s) {
  const int me = s.rank();
  std::vector<unsigned char> big(4 << 20, 0x5a);
  if (me == 1) {
    request a, b;
    expect_ok(s.isend(0, 8, big.data(), big.size(), a), a, "rendezvous send 8");
    expect_ok(s.isend(0, 9, big.data(), big.size(), b), b, "rendezvous send 9");
    // Both drivers write a packet out when it is posted: no progress call
    // here, so the ready-to-receives are never seen.
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // never answers the ready-to-receive
    ::raise(SIGKILL);
  }
  if (me != 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  request r8;
  expect_ok(s.irecv(1, 8, big.data(), big.size(), r8), r8, "irecv 8");
  const errc e8 = s.wait(r8);
  expect(e8 == errc::peer_failed, "matched rendezvous receive from a dead rank must fail, got " +
                                      std::string(to_string(e8)));
  expect(r8.error_message().find("rank 1") != std::string::npos, "error names the peer: " + r8.error_message());
  request r9;
  s.irecv(1, 9, big.data(), big.size(), r9);
  const errc e9 = s.wait(r9);
  expect(e9 == errc::peer_failed, "receive of an unexpected rendezvous from a dead rank must fail, got " +
                                      std::string(to_string(e9)));
  request ra;
  s.irecv(any_source, 10, big.data(), 8, ra);
  expect(s.wait(ra) == errc::peer_failed, "any-source receive with every other rank dead must fail");
  expect(s.probe(any_source, 10).error == errc::peer_failed, "any-source probe with every other rank dead");
  expect(s.probe(1, 10).error == errc::peer_failed, "probe of a dead rank");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank 0 saw every failure (%s) after %.2f s\n", r8.error_message().c_str(), secs);
  std::fflush(stdout);
  return 0;
}

// Rank 1 packs an express length and a 4 MiB cheaper body (a rendezvous)
// to rank 0 and dies while blocked in end(). Rank 0 unpacks the length,
// then, once rank 1 is dead, the body: its rendezvous had no destination
// until that unpack, so it waited on no list but its gate's; the unpack
// and end() must fail naming rank 1, not wait.
int killed_unpack(session& s) {
  const int me = s.rank();
  std::vector<unsigned char> big(4 << 20, 0x3c);
  if (me == 1) {
    std::thread killer([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::raise(SIGKILL);
    });
    killer.detach();
    pack_connection p(s, 0, 11);
    const std::uint64_t n = big.size();
    p.pack(&n, sizeof n, pack_mode::express);
    p.pack(big.data(), big.size(), pack_mode::cheaper);
    p.end();  // the body is never asked for before the kill
    return 1;
  }
  if (me != 0) return 0;
  unpack_connection u(s, 1, 11);
  std::uint64_t n = 0;
  expect(u.unpack(&n, sizeof n, pack_mode::express) == errc::ok && n == big.size(), "express length");
  while (s.peer_alive(1)) {
    s.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const errc e = u.unpack(big.data(), big.size(), pack_mode::express);
  const errc end = u.end();
  expect(e == errc::peer_failed, "unpack of a dead rank's rendezvous piece must fail, got " +
                                     std::string(to_string(e)));
  expect(end == errc::peer_failed, "end() of a dead rank's message must fail, got " + std::string(to_string(end)));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank 0: unpack from the dead rank failed after %.2f s\n", secs);
  std::fflush(stdout);
  return 0;
}

int intruder(session& s) {
  if (s.rank() > 1) return 0;
  char addr[256] = {};
  request r;
  if (s.rank() == 1) {
    std::string a = s.local_address("tcp");
    std::snprintf(addr, sizeof addr, "%s", a.c_str());
    expect_ok(s.isend(0, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
  } else {
    expect_ok(s.irecv(1, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
    std::string garbage(4096, '\0');
    std::mt19937 rng(7);
    for (auto& c : garbage) c = static_cast<char>(rng());
    const char* key = std::getenv("NMAD_JOB_KEY");
    expect(knock(addr, hello_with_key(0, "not-the-job-key")) == 0, "wrong key must be refused (closed)");
    expect(knock(addr, garbage) == 0, "random bytes must be refused (closed)");
    // The right key, but claiming a rank that is already connected.
    if (key) expect(knock(addr, hello_with_key(0, key)) == 0, "duplicate rank must be refused");
    std::printf("intruder: three foreign connections were refused\n");
  }
  // The job itself is unaffected.
  for (int i = 0; i < 100; ++i) {
    int v = i, got = -1;
    request a, b;
    expect_ok(s.isend(1 - s.rank(), 2, &v, sizeof v, a), a, "after intrusion");
    expect_ok(s.irecv(1 - s.rank(), 2, &got, sizeof got, b), b, "after intrusion");
    expect_ok(s.wait(a), a, "after intrusion");
    expect_ok(s.wait(b), b, "after intrusion");
    expect(got == i, "exchange after intrusion");
  }
  std::printf("intruder rank %d: job unaffected\n", s.rank());
  return 0;
}

// Idle connections to rank 1's tcp listener from 5 loopback addresses
// (each bound to 127.0.0.k before connecting), more than rank 1 has
// descriptors; rank 1 meanwhile waits for one message and measures the
// CPU time it spends waiting.
int flood(session& s, int per_addr, int hold_ms) {
  if (s.rank() > 1) return 0;
  char addr[256] = {};
  request r;
  if (s.rank() == 1) {
    std::string a = s.local_address("tcp");
    std::snprintf(addr, sizeof addr, "%s", a.c_str());
    expect_ok(s.isend(0, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
    int go = 0;
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    expect_ok(s.irecv(0, 2, &go, sizeof go, r), r, "irecv go");
    expect_ok(s.wait(r), r, "go");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::getrusage(RUSAGE_SELF, &after);
    auto secs = [](const timeval& a, const timeval& b) { return (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) / 1e6; };
    const double cpu = secs(before.ru_utime, after.ru_utime) + secs(before.ru_stime, after.ru_stime);
    expect(go == 77, "go message");
    std::printf("flood: rank 1 waited %.3f s using %.3f s of CPU\n", wall, cpu);
    std::fflush(stdout);
  } else {
    expect_ok(s.irecv(1, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < static_cast<rlim_t>(5 * per_addr + 64)) {
      rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 5 * per_addr + 64);
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    const std::string a(addr);
    const auto colon = a.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(a.substr(colon + 1))));
    ::inet_pton(AF_INET, a.substr(0, colon).c_str(), &to.sin_addr);
    std::vector<int> held;
    for (int k = 1; k <= 5; ++k)
      for (int i = 0; i < per_addr; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl(0x7f000000u + static_cast<std::uint32_t>(k));
        if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
            (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
          ::close(fd);
          continue;
        }
        held.push_back(fd);
      }
    std::printf("flood: %zu idle connections held for %d ms\n", held.size(), hold_ms);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    const int go = 77;
    expect_ok(s.isend(1, 2, &go, sizeof go, r), r, "isend go");
    expect_ok(s.wait(r), r, "go");
    for (int fd : held) ::close(fd);
  }
  // The job itself goes on.
  for (int i = 0; i < 100; ++i) {
    int v = i, got = -1;
    request a, b;
    expect_ok(s.isend(1 - s.rank(), 3, &v, sizeof v, a), a, "after the flood");
    expect_ok(s.irecv(1 - s.rank(), 3, &got, sizeof got, b), b, "after the flood");
    expect_ok(s.wait(a), a, "after the flood");
    expect_ok(s.wait(b), b, "after the flood");
    expect(got == i, "exchange after the flood");
  }
  std::printf("flood rank %d: job unaffected\n", s.rank());
  return 0;
}

}  // namespace nmad_test::engine
