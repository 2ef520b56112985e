// Driver conformance, the ofi driver: start-up errors (a provider libfabric
// does not offer, bad NMAD_OFI_* values) stop open naming them; shm reaches
// this host only and providers do not mix; RMA read rendezvous on and off
// with the registration cache's hits, misses and evictions; and over the
// shm provider, the segments it leaves in /dev/shm: a peer killed by
// SIGKILL is noticed and its segment removed, and leftovers of gone
// processes are cleaned at open.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <string>
#include <vector>

#include "core/common/random.hpp"
#include "drivers/ofi/ofi_shm_segment.hpp"
#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;

// ---- ofi: start-up errors and reach -------------------------------------------

TEST_CASE("ofi: a forced provider libfabric does not offer stops open, naming it") {
  recorder ev;
  {
    auto d = nmad::make_ofi_driver_for("no-such-provider");
    std::string what;
    try {
      d->open({0, 2, kKey, &ev});
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    CHECK(what.find("provider 'no-such-provider'") != std::string::npos);
    CHECK(what.find("not available") != std::string::npos);
  }
  {
    env_guard g("NMAD_OFI_PROVIDER", "bogus;ofi_rxm");
    auto d = nmad::find_driver("ofi")->create();
    std::string what;
    try {
      d->open({0, 2, kKey, &ev});
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    CHECK(what.find("'bogus;ofi_rxm' (NMAD_OFI_PROVIDER)") != std::string::npos);
  }
  {
    env_guard g("NMAD_OFI_CONNECT_TIMEOUT_MS", "soon");
    auto d = nmad::make_ofi_driver_for("tcp;ofi_rxm");
    CHECK_THROWS_WITH_AS(d->open({0, 2, kKey, &ev}), doctest::Contains("NMAD_OFI_CONNECT_TIMEOUT_MS=\"soon\""),
                         std::runtime_error);
  }
  CHECK(ev.total() == 0);
}

TEST_CASE("ofi: shm reaches this host only; providers do not mix") {
  recorder ea, eb;
  auto shm = nmad::make_ofi_driver_for("shm");
  auto tcp = nmad::make_ofi_driver_for("tcp;ofi_rxm");
  shm->open({1, 2, kKey, &ea});
  tcp->open({0, 2, kKey, &eb});
  CHECK(shm->caps().node_local);
  CHECK_FALSE(tcp->caps().node_local);
  const std::string addr = shm->local_address();
  CHECK(shm->reachable(addr));
  // The same endpoint name published from another host.
  const auto c2 = addr.find(':', 4), c3 = addr.find(':', c2 + 1);
  REQUIRE(c3 != std::string::npos);
  const std::string elsewhere = addr.substr(0, c2 + 1) + "some-other-host" + addr.substr(c3);
  CHECK_FALSE(shm->reachable(elsewhere));
  CHECK_FALSE(shm->reachable(tcp->local_address()));
  CHECK_FALSE(tcp->reachable(addr));
  CHECK_FALSE(shm->reachable("127.0.0.1:5000"));
  connection_id c = shm->connect(0, elsewhere);
  REQUIRE(poll_until({shm.get()}, [&] { return !ea.failed.empty(); }));
  CHECK(ea.failed[0].first == c);
  CHECK(ea.failed[0].second.find("another host") != std::string::npos);
}

// RMA read rendezvous over ofi, forced on and off, and the registration
// cache (NMAD_OFI_MR_CACHE=2): a range inside a registered region is a hit,
// a new one a miss; unused regions beyond 2 are closed, least recently used
// first, once their exposures are released (applied by the next poll).
TEST_CASE("ofi: RMA read on and off (NMAD_OFI_RMA), registration cache hits, misses and evictions") {
  for (const auto& d : network_drivers()) {
    if (d.name != "ofi" || d.description == "udp;ofi_rxd") continue;
    INFO("driver ", label(d));
    {
      env_guard on("NMAD_OFI_RMA", "on");
      env_guard cache("NMAD_OFI_MR_CACHE", "2");
      pair_fixture p(d);
      REQUIRE(p.a->caps().rdma_get);
      REQUIRE(p.b->caps().rdma_get);
      const std::size_t n = 8 << 20;
      auto src = make_bytes(n, 31);
      // The whole buffer, then 1 MiB inside it (a hit on the same region).
      struct read_case {
        std::size_t offset, len;
      };
      for (const read_case rc : {read_case{0, n}, read_case{4096 + 3, 1 << 20}}) {
        CAPTURE(rc.offset);
        std::uint64_t remote = 0;
        std::uint32_t key = 0;
        REQUIRE(p.b->expose(src.data() + rc.offset, rc.len, remote, key));
        std::vector<std::byte> dst(rc.len);
        iovec riov = iov_of(dst.data(), rc.len);
        const std::size_t before = p.ea.recvs_done.size(), peer_events = p.eb.total();
        REQUIRE(p.a->post_get(p.a2b, remote, key, {&riov, 1}, tok(40 + rc.offset)) == post_result::posted);
        REQUIRE(poll_until(p.both(), [&] { return p.ea.recvs_done.size() > before; }));
        CHECK(p.ea.recvs_done.back() == std::pair<void*, std::size_t>(tok(40 + rc.offset), rc.len));
        CHECK(std::equal(dst.begin(), dst.end(), src.begin() + static_cast<std::ptrdiff_t>(rc.offset)));
        CHECK(p.eb.total() == peer_events);
      }
      auto st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.rma);
      CHECK(st.misses == 1);
      CHECK(st.hits == 1);
      CHECK(st.exposed == 2);
      CHECK(nmad::ofi_driver_rma_stats(*p.a).reads == 2);
      p.b->unexpose(src.data(), n);
      p.b->unexpose(src.data() + 4096 + 3, 1 << 20);
      p.b->poll();
      st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.exposed == 0);
      CHECK(st.cached == 1);  // kept for the next send from that buffer
      // Three more buffers exposed at once, then released: 4 unused regions,
      // the 2 least recently used go (the first buffer's, then the second's).
      std::vector<std::byte> more[3] = {make_bytes(1 << 16, 1), make_bytes(1 << 16, 2), make_bytes(1 << 16, 3)};
      for (auto& m : more) {
        std::uint64_t remote = 0;
        std::uint32_t key = 0;
        REQUIRE(p.b->expose(m.data(), m.size(), remote, key));
      }
      st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.misses == 4);
      CHECK(st.cached == 4);  // in use: never closed
      CHECK(st.evictions == 0);
      for (auto& m : more) p.b->unexpose(m.data(), m.size());
      p.b->poll();
      st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.cached == 2);
      CHECK(st.evictions == 2);
      // The most recent survive: exposing the last buffer again is a hit.
      std::uint64_t remote = 0;
      std::uint32_t key = 0;
      REQUIRE(p.b->expose(more[2].data(), more[2].size(), remote, key));
      CHECK(nmad::ofi_driver_rma_stats(*p.b).hits == 2);
      p.b->unexpose(more[2].data(), more[2].size());
      CHECK(p.ea.failed.empty());
      CHECK(p.eb.failed.empty());
    }
    {
      env_guard off("NMAD_OFI_RMA", "off");
      pair_fixture p(d);
      CHECK_FALSE(p.a->caps().rdma_get);
      std::vector<std::byte> buf(4096);
      std::uint64_t remote = 0;
      std::uint32_t key = 0;
      CHECK_FALSE(p.b->expose(buf.data(), buf.size(), remote, key));
      iovec riov = iov_of(buf.data(), buf.size());
      CHECK(p.a->post_get(p.a2b, 4096, 1, {&riov, 1}, tok(5)) == post_result::failed);
      CHECK_FALSE(nmad::ofi_driver_rma_stats(*p.a).rma);
      // Large data still moves, as tagged messages.
      const std::size_t n = 4 << 20;
      auto src = make_bytes(n, 8);
      std::vector<std::byte> dst(n);
      iovec s = iov_of(src.data(), n), r = iov_of(dst.data(), n);
      REQUIRE(p.a->post_recv_data(p.a2b, 7, {&r, 1}, tok(1)) == post_result::posted);
      REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, 7, {&s, 1}, tok(2)); }));
      REQUIRE(poll_until(p.both(), [&] { return !p.ea.recvs_done.empty(); }));
      CHECK(dst == src);
    }
  }
}

TEST_CASE("ofi: bad NMAD_OFI_RMA and NMAD_OFI_MR_CACHE values stop open, naming them") {
  recorder ev;
  {
    env_guard g("NMAD_OFI_RMA", "maybe");
    auto d = nmad::make_ofi_driver_for("tcp;ofi_rxm");
    CHECK_THROWS_WITH_AS(d->open({0, 2, kKey, &ev}), doctest::Contains("NMAD_OFI_RMA=\"maybe\""), std::runtime_error);
  }
  {
    env_guard g("NMAD_OFI_MR_CACHE", "-1");
    auto d = nmad::make_ofi_driver_for("shm");
    CHECK_THROWS_WITH_AS(d->open({0, 2, kKey, &ev}), doctest::Contains("NMAD_OFI_MR_CACHE=\"-1\""), std::runtime_error);
  }
  CHECK(ev.total() == 0);
}

// ---- ofi over shm: the provider's segments in /dev/shm ------------------------

namespace {

// The segment file behind an ofi shm address ("ofi:shm:<host>:<hex name>").
std::string segment_of(const std::string& address) {
  const std::string hexname = address.substr(address.rfind(':') + 1);
  std::string name;
  for (std::size_t i = 0; i + 1 < hexname.size(); i += 2)
    name += static_cast<char>(std::stoi(hexname.substr(i, 2), nullptr, 16));
  return nmad::ofi_shm::segment_file(name);
}

bool in_dev_shm(const std::string& file) {
  struct stat st{};
  return !file.empty() && ::stat(("/dev/shm/" + file).c_str(), &st) == 0;
}

// A pid no process has any more (a child that ended and was reaped).
int dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return static_cast<int>(p);
}

// A file in /dev/shm like a segment, last written `age` ago.
void plant(const std::string& file, std::chrono::seconds age) {
  const int fd = ::shm_open(("/" + file).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  ::close(fd);
  const timespec when[2] = {{std::time(nullptr) - age.count(), 0}, {std::time(nullptr) - age.count(), 0}};
  REQUIRE(::utimensat(AT_FDCWD, ("/dev/shm/" + file).c_str(), when, 0) == 0);
}

}  // namespace

// The shm provider leaves its segment (16 MiB) in /dev/shm when its process
// dies by a signal it cannot catch. The driver withdraws its own name once
// wire-up is over (wireup_complete), and a peer killed before that is
// noticed by the survivor (nobody holds its segment's lock any more), which
// reports the connection failed and removes the name. The peer runs in a
// child process, killed with SIGKILL.
TEST_CASE("ofi over shm: a peer killed by SIGKILL is noticed and its segment removed; wireup_complete withdraws ours") {
  recorder ea;
  auto a = nmad::make_ofi_driver_for("shm");
  a->open({0, 2, kKey, &ea});
  const std::string mine = segment_of(a->local_address());
  REQUIRE(nmad::ofi_shm::is_driver_segment(mine));
  CHECK(in_dev_shm(mine));
  CHECK(nmad::ofi_driver_flow_stats(*a).segment_held);
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const std::string a_address = a->local_address();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The peer: connects, tells its address, then serves until killed
    // (never withdrawing its name). No doctest here.
    ::close(pipefd[0]);
    try {
      recorder eb;
      auto b = nmad::make_ofi_driver_for("shm");
      b->open({1, 2, kKey, &eb});
      b->connect(0, a_address);
      const auto end = steady::now() + kLimit;
      while (eb.connected.empty() && eb.failed.empty() && steady::now() < end) b->poll();
      if (eb.connected.empty()) ::_exit(3);
      const std::string addr = b->local_address() + "\n";
      if (::write(pipefd[1], addr.data(), addr.size()) != static_cast<ssize_t>(addr.size())) ::_exit(4);
      for (;;) b->poll();
    } catch (...) {
      ::_exit(2);
    }
  }
  ::close(pipefd[1]);
  REQUIRE(poll_until({a.get()}, [&] { return !ea.connected.empty() || !ea.failed.empty(); }));
  REQUIRE(ea.connected.size() == 1);
  std::string b_address;
  char c = 0;
  while (::read(pipefd[0], &c, 1) == 1 && c != '\n') b_address += c;
  ::close(pipefd[0]);
  const std::string theirs = segment_of(b_address);
  REQUIRE(nmad::ofi_shm::is_driver_segment(theirs));
  CHECK(in_dev_shm(theirs));
  poll_for({a.get()}, 100ms);
  CHECK(ea.failed.empty());  // alive: its segment is held
  REQUIRE(::kill(child, SIGKILL) == 0);
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  CHECK(WIFSIGNALED(st));
  REQUIRE(poll_until({a.get()}, [&] { return !ea.failed.empty(); }, 2s));
  CHECK(ea.failed[0].first == ea.connected[0].first);
  CHECK(ea.failed[0].second.find("peer process died") != std::string::npos);
  CHECK_FALSE(in_dev_shm(theirs));  // the survivor removed it
  // Our own name goes at wireup_complete; the endpoint lives on.
  CHECK(in_dev_shm(mine));
  a->wireup_complete();
  CHECK_FALSE(in_dev_shm(mine));
  CHECK_FALSE(nmad::ofi_driver_flow_stats(*a).segment_held);
  CHECK(a->poll() >= 0);
  a.reset();
  CHECK_FALSE(in_dev_shm(mine));
}

// What processes killed before they withdrew their names left: removed by
// the next ofi shm driver to open, but only files of our pattern that no
// live process holds, whose pid is gone, and not written for 2 s.
TEST_CASE("ofi over shm: at open, segments of gone processes are removed; held, recent or other files stay") {
  const std::string gone = std::to_string(dead_pid());
  const std::string stale = "nmad_" + nmad::random_hex(16) + "_" + gone;
  const std::string held = "nmad_" + nmad::random_hex(16) + "_" + gone;
  const std::string recent = "nmad_" + nmad::random_hex(16) + "_" + gone;
  const std::string alive = "nmad_" + nmad::random_hex(16) + "_" + std::to_string(::getppid());
  const std::string other = "nmad_" + nmad::random_hex(15) + "_" + gone;  // not our pattern
  plant(stale, std::chrono::hours(1));
  plant(held, std::chrono::hours(1));
  plant(recent, std::chrono::seconds(0));
  plant(alive, std::chrono::hours(1));
  plant(other, std::chrono::hours(1));
  // Held as its owner would: a shared lock on an open descriptor.
  const int hold = ::shm_open(("/" + held).c_str(), O_RDONLY, 0);
  REQUIRE(hold >= 0);
  REQUIRE(::flock(hold, LOCK_SH) == 0);
  {
    recorder ev;
    auto d = nmad::make_ofi_driver_for("shm");
    d->open({0, 2, kKey, &ev});
    CHECK_FALSE(in_dev_shm(stale));
    CHECK(in_dev_shm(held));
    CHECK(in_dev_shm(recent));
    CHECK(in_dev_shm(alive));
    CHECK(in_dev_shm(other));
    CHECK(in_dev_shm(segment_of(d->local_address())));  // its own, of course
  }
  // Without the age limit the recent one goes too; the held one never.
  const auto removed = nmad::ofi_shm::reap_abandoned_segments(std::chrono::seconds(0));
  CHECK(std::find(removed.begin(), removed.end(), recent) != removed.end());
  CHECK(std::find(removed.begin(), removed.end(), held) == removed.end());
  CHECK(in_dev_shm(held));
  ::close(hold);
  for (const std::string& f : {held, recent, alive, other}) ::shm_unlink(("/" + f).c_str());
}
