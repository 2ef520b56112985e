// engine_worker's request lifetime (`destroy_pending`): destroying a pending
// request cancels it. A destroyed receive never takes a message, a destroyed
// unanswered rendezvous send is withdrawn, a destroyed receive matched to a
// rendezvous has its bytes in before its destructor returns, and once rank 0
// has died, rank 1 destroys requests pending on it before progressing. The
// memory destroyed requests leave is reused at once, so that a stale
// reference to it breaks visibly.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/engine_scenarios.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace nmad_test::engine {

namespace {

// Takes the memory destroyed requests left, filled with a pattern (an
// application reusing it): a stale reference to it then breaks visibly.
std::vector<std::unique_ptr<unsigned char[]>> reuse_freed_requests(std::size_t n = 16) {
  std::vector<std::unique_ptr<unsigned char[]>> blocks;
  for (std::size_t i = 0; i < n; ++i) {
    blocks.emplace_back(new unsigned char[sizeof(request)]);
    std::memset(blocks.back().get(), 0xa5, sizeof(request));
  }
  return blocks;
}

// Rank `from` tells rank `to` it may go on (one byte on `tag`).
void signal_step(session& s, int from, int to, tag_t tag) {
  char c = 1;
  request r;
  if (s.rank() == from) {
    expect_ok(s.isend(to, tag, &c, 1, r), r, "step send");
    expect_ok(s.wait(r), r, "step send");
  } else if (s.rank() == to) {
    expect_ok(s.irecv(from, tag, &c, 1, r), r, "step recv");
    expect_ok(s.wait(r), r, "step recv");
  }
}

bool all_bytes(const std::vector<unsigned char>& v, unsigned char c) {
  return std::all_of(v.begin(), v.end(), [c](unsigned char x) { return x == c; });
}

}  // namespace

int destroy_pending(session& s) {
  if (s.size() != 2) fail("run with 2 ranks");
  const int me = s.rank();
  std::vector<unsigned char> big(4 << 20);
  // 1. A destroyed receive never takes a message: the next receive does.
  std::vector<unsigned char> stale(4096, 0xee);
  if (me == 1) {
    auto r = std::make_unique<request>();
    expect_ok(s.irecv(0, 30, stale.data(), stale.size(), *r), *r, "irecv 30");
    r.reset();
  }
  auto reused = reuse_freed_requests();
  signal_step(s, 1, 0, 31);
  if (me == 0) {
    std::vector<unsigned char> out(4096);
    fill(out, 30);
    request r;
    expect_ok(s.isend(1, 30, out.data(), out.size(), r), r, "isend 30");
    expect_ok(s.wait(r), r, "send 30");
  } else {
    std::vector<unsigned char> in(4096), want(4096);
    fill(want, 30);
    request r;
    expect_ok(s.irecv(0, 30, in.data(), in.size(), r), r, "irecv 30 again");
    expect_ok(s.wait(r), r, "receive 30");
    expect(in == want, "message 30 went to the later receive intact");
    expect(all_bytes(stale, 0xee), "the destroyed receive's buffer was written");
  }
  // 2. A destroyed unanswered rendezvous send is withdrawn: the receiver
  //    gets the next message on its tag instead.
  if (me == 1) {
    fill(big, 32);
    auto r = std::make_unique<request>();
    expect_ok(s.isend(0, 32, big.data(), big.size(), *r), *r, "isend 32 (rendezvous)");
    r.reset();  // rank 0 is waiting in step 33 meanwhile: it answers the withdrawal
    reused = reuse_freed_requests();
    std::fill(big.begin(), big.end(), 0);
    std::uint64_t v = 0x3232;
    request r2;
    expect_ok(s.isend(0, 32, &v, sizeof v, r2), r2, "isend 32 (8 bytes)");
    expect_ok(s.wait(r2), r2, "send 32");
  }
  signal_step(s, 1, 0, 33);
  if (me == 0) {
    request r;
    expect_ok(s.irecv(1, 32, big.data(), big.size(), r), r, "irecv 32");
    expect_ok(s.wait(r), r, "receive 32");
    std::uint64_t v = 0;
    std::memcpy(&v, big.data(), sizeof v);
    expect(r.status().length == 8 && v == 0x3232,
           "the withdrawn rendezvous was received (length " + std::to_string(r.status().length) + ")");
    recv_status st;
    expect(!s.iprobe(1, 32, st), "a withdrawn message is still there");
  }
  // 3. A destroyed receive matched to a rendezvous: its bytes are in before
  //    the destructor returns; the next message goes to the next receive.
  if (me == 0) {
    fill(big, 34);
    request r;
    expect_ok(s.isend(1, 34, big.data(), big.size(), r), r, "isend 34");
    expect_ok(s.wait(r), r, "send 34");
    std::uint64_t v = 0x3434;
    expect_ok(s.isend(1, 34, &v, sizeof v, r), r, "isend 34 (8 bytes)");
    expect_ok(s.wait(r), r, "send 34 (8 bytes)");
  } else {
    // The rendezvous request is here first: the receive matches it at once.
    expect(s.probe(0, 34).length == big.size(), "probe 34");
    auto r = std::make_unique<request>();
    expect_ok(s.irecv(0, 34, big.data(), big.size(), *r), *r, "irecv 34");
    r.reset();
    std::vector<unsigned char> want(big.size());
    fill(want, 34);
    expect(big == want, "a matched receive destroyed before its bytes were in");
    std::uint64_t v = 0;
    request r2;
    expect_ok(s.irecv(0, 34, &v, sizeof v, r2), r2, "irecv 34 (8 bytes)");
    expect_ok(s.wait(r2), r2, "receive 34 (8 bytes)");
    expect(v == 0x3434, "the message after the destroyed receive's");
  }
  std::printf("rank %d: destroyed live requests cancelled, withdrawn or completed\n", me);
  std::fflush(stdout);
  // 4. Rank 0 dies; rank 1 destroys requests pending on it before any call
  //    noticed, then progresses (no progress thread: NMAD_PROGRESS=none).
  std::vector<unsigned char> small(64, 0xee);
  std::vector<std::unique_ptr<request>> pending;
  for (int i = 0; i < 5; ++i) pending.push_back(std::make_unique<request>());
  signal_step(s, 1, 0, 35);
  // Rank 1 says it posted everything through a file (rank 0 must make no
  // call meanwhile: a call would answer the ready-to-receive).
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string posted_flag = std::string(tmp && *tmp ? tmp : "/tmp") + "/nmad-destroy-pending-" +
                                  std::to_string(::getppid());
  if (me == 0) {
    fill(big, 36);
    request r;
    expect_ok(s.isend(1, 36, big.data(), big.size(), r), r, "isend 36");
    // The request goes out when posted; no more calls: its ready-to-receive
    // is never answered.
    for (int i = 0; i < 6000 && ::access(posted_flag.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::raise(SIGKILL);
  }
  // Receive 36 matched at once (its request is here) and asked for.
  expect(s.probe(0, 36).length == big.size(), "probe 36");
  expect_ok(s.irecv(0, 36, big.data(), big.size(), *pending[0]), *pending[0], "irecv 36");
  std::vector<unsigned char> big2(4 << 20, 0x39);
  expect_ok(s.irecv(0, 37, small.data(), small.size(), *pending[1]), *pending[1], "irecv 37");
  expect_ok(s.irecv(any_source, 38, small.data(), small.size(), *pending[2]), *pending[2], "irecv any 38");
  expect_ok(s.isend(0, 39, big2.data(), big2.size(), *pending[3]), *pending[3], "isend 39 (rendezvous)");
  std::uint64_t v = 40;
  const errc e40 = s.isend(0, 40, &v, sizeof v, *pending[4]);
  expect(e40 == errc::ok, "isend 40");
  if (FILE* f = std::fopen(posted_flag.c_str(), "w")) std::fclose(f);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // rank 0 is dead; nobody noticed yet
  std::remove(posted_flag.c_str());
  expect(s.peer_alive(0), "the failure was noticed without a call");
  pending.clear();
  reused = reuse_freed_requests(64);
  std::fill(big.begin(), big.end(), 0x11);
  std::fill(big2.begin(), big2.end(), 0x22);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.peer_alive(0)) {
    s.progress();
    expect(std::chrono::steady_clock::now() < deadline, "rank 0's death was never noticed");
  }
  for (int i = 0; i < 10; ++i) s.progress();
  expect(all_bytes(small, 0xee), "a destroyed receive's buffer was written");
  expect(all_bytes(big, 0x11), "a destroyed rendezvous receive's buffer was written after its destruction");
  request r;
  expect(s.irecv(0, 41, small.data(), small.size(), r) == errc::peer_failed, "a receive from the dead rank fails");
  std::printf("rank 1: pending requests destroyed after rank 0 failed; the session went on\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace nmad_test::engine
