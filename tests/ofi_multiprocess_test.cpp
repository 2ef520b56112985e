// The ofi driver carrying real jobs: processes started by nmad-run with
// NMAD_DRIVER=ofi over the libfabric providers tcp;ofi_rxm and shm, running
// the engine's random-traffic and ping-pong scenarios (tests/workers/
// engine_stress.cpp, engine_exchanges.cpp), MPI test programs (tests/mpi/),
// and ofi as one rail of two next to the built-in drivers
// (tests/workers/strategy_worker.cpp). The workers check every byte and the
// order themselves; here we check exit statuses, what they report, and
// that the ofi driver really carried the job (its connection lines at
// NMAD_LOG=info).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/test_paths.hpp"
#include "tests/workers/shm_hold_report.hpp"

namespace {

using nmad_test::contains;
using nmad_test::count;

using env_list = std::vector<std::pair<std::string, std::string>>;

const char* const kProviders[] = {"tcp;ofi_rxm", "shm"};

// Under the sanitizers (slow) the jobs are smaller.
bool slow() { return std::getenv("NMAD_TEST_ONE_LEVEL") != nullptr; }

nmad_test::run_result run(const std::string& program, int nprocs, std::vector<std::string> args, env_list env,
                          int timeout_s = 150) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(nprocs), "--timeout",
                                   std::to_string(timeout_s), nmad_test::runfile(program)};
  argv.insert(argv.end(), args.begin(), args.end());
  nmad_test::run_options o;
  o.timeout_s = timeout_s + 30;
  o.env = std::move(env);
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE(program << ": status " << r.status << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

env_list over_ofi(const char* provider, env_list more = {}) {
  env_list e = {{"NMAD_DRIVER", "ofi"}, {"NMAD_OFI_PROVIDER", provider}, {"NMAD_LOG", "info"}};
  e.insert(e.end(), more.begin(), more.end());
  return e;
}

// Every pair of an n-process job connected over ofi with `provider`: each
// process logs one line per peer.
void check_connected_over(const nmad_test::run_result& r, const char* provider, int nprocs) {
  CHECK(count(r.err, std::string("ofi info: connected to rank")) == nprocs * (nprocs - 1));
  CHECK(count(r.err, std::string("(") + provider + ")") >= nprocs * (nprocs - 1));
}

}  // namespace

TEST_CASE("ofi: 3 processes exchange random messages of random sizes and tags (eager and rendezvous)") {
  for (const char* prov : kProviders) {
    INFO("prov: ", prov);
    auto r = run("tests/workers/engine_worker", 3, {"stress", slow() ? "300" : "1200", "5"},
                 over_ofi(prov, {{"NMAD_STRATEGY", "aggreg"}}));
    CHECK(r.status == 0);
    CHECK(count(r.out, "in order") == 3);
    check_connected_over(r, prov, 3);
  }
}

TEST_CASE("ofi: 4 processes, small rendezvous threshold: mostly rendezvous data") {
  for (const char* prov : kProviders) {
    INFO("prov: ", prov);
    auto r = run("tests/workers/engine_worker", 4, {"stress", slow() ? "150" : "600", "3"},
                 over_ofi(prov, {{"NMAD_RDV_THRESHOLD", "512"}}));
    CHECK(r.status == 0);
    CHECK(count(r.out, "in order") == 4);
    check_connected_over(r, prov, 4);
  }
}

TEST_CASE("ofi: 2 processes ping-pong, and pack/unpack request/answer") {
  for (const char* prov : kProviders) {
    INFO("prov: ", prov);
    auto r = run("tests/workers/engine_worker", 2, {"pingpong", "2000"}, over_ofi(prov));
    CHECK(r.status == 0);
    CHECK(count(r.out, "round trips ok") == 2);
    auto p = run("tests/workers/engine_worker", 2, {"pack", "20"}, over_ofi(prov, {{"NMAD_RDV_THRESHOLD", "64"}}));
    CHECK(p.status == 0);
    CHECK(contains(p.out, "20 calls answered correctly"));
  }
}

TEST_CASE("ofi: a 4 MiB rendezvous arrives whole (receiver posts first, sender computes meanwhile)") {
  for (const char* prov : kProviders) {
    INFO("prov: ", prov);
    auto r = run("tests/workers/engine_worker", 2, {"pull", "0"}, over_ofi(prov));
    CHECK(r.status == 0);
    CHECK(contains(r.out, "pull: 4194304 bytes verified"));
  }
}

// Rendezvous data by RMA read (the receiver fi_read()s the sender's
// registered buffer) and, forced off, by tagged messages: the same random
// traffic checked byte by byte; each process's closing line counts its
// reads and its registration cache.
TEST_CASE("ofi: rendezvous by RMA read (NMAD_OFI_RMA=on) and by messages (off), 3 processes") {
  const std::regex line("ofi info: RMA reads (\\d+), registration cache: (\\d+) hits, (\\d+) misses");
  for (const char* prov : kProviders) {
    for (const char* rma : {"on", "off"}) {
      INFO("prov: ", prov);
      INFO("rma: ", rma);
      auto r = run("tests/workers/engine_worker", 3, {"stress", slow() ? "150" : "500", "9"},
                   over_ofi(prov, {{"NMAD_OFI_RMA", rma}, {"NMAD_RDV_THRESHOLD", "1024"}}));
      CHECK(r.status == 0);
      CHECK(count(r.out, "in order") == 3);
      int lines = 0;
      for (std::sregex_iterator i(r.err.begin(), r.err.end(), line), e; i != e; ++i) {
        ++lines;
        CHECK(std::stoull((*i)[1]) > 0);  // reads
        CHECK(std::stoull((*i)[3]) > 0);  // misses: each buffer registered once at least
      }
      CHECK(lines == (std::string(rma) == "on" ? 3 : 0));
    }
  }
  // A pulled 4 MiB rendezvous arrives whole.
  for (const char* prov : kProviders) {
    INFO("prov: ", prov);
    auto r = run("tests/workers/engine_worker", 2, {"pull", "0"}, over_ofi(prov, {{"NMAD_OFI_RMA", "on"}}));
    CHECK(r.status == 0);
    CHECK(contains(r.out, "pull: 4194304 bytes verified"));
    CHECK(contains(r.err, "ofi info: RMA reads 1,"));
  }
}

TEST_CASE("ofi: MPI programs (point-to-point modes, ordering, pair types, collectives) over each provider") {
  struct prog {
    const char* name;
    int nprocs;
  };
  const prog progs[] = {{"send_modes", 2}, {"ordering", 4}, {"p2p_pair_types", 2}, {"type_rendezvous", 2},
                        {"coll_basic", 3}};
  for (const char* prov : kProviders) {
    for (const prog& p : progs) {
      INFO("prov: ", prov);
      INFO("p.name: ", p.name);
      auto r = run(std::string("tests/mpi/") + p.name, p.nprocs, {}, over_ofi(prov));
      CHECK(r.status == 0);
      CHECK(count(r.out, std::string("PASS ") + p.name + " rank") == p.nprocs);
      CHECK_FALSE(contains(r.out, "FAIL"));
      check_connected_over(r, prov, p.nprocs);
    }
  }
}

// 300 messages a flow each way posted at once: with the shm provider that
// burst used to stall (packets arriving while no buffer was posted were
// lost inside the provider; see drivers/ofi/README.md, packet buffers).
TEST_CASE("ofi as a rail next to a built-in driver (ofi+tcp, shm+ofi): random flows, every byte and order checked") {
  struct rails {
    const char* drivers;
    const char* provider;
    int messages;
  };
  for (const rails& rl : {rails{"ofi+tcp", "tcp;ofi_rxm", 300}, rails{"shm+ofi", "tcp;ofi_rxm", 300},
                          rails{"shm+ofi", "shm", 300}}) {
    for (const char* strat : {"default", "split_balance"}) {
      INFO("rl.drivers: ", rl.drivers);
      INFO("rl.provider: ", rl.provider);
      INFO("strat: ", strat);
      auto r = run("tests/workers/strategy_worker", 2, {"flows", "4", std::to_string(slow() ? 100 : rl.messages)},
                   {{"NMAD_DRIVERS", rl.drivers},
                    {"NMAD_OFI_PROVIDER", rl.provider},
                    {"NMAD_STRATEGY", strat},
                    {"NMAD_RDV_THRESHOLD", "16384"},
                    {"NMAD_LOG", "info"}});
      CHECK(r.status == 0);
      CHECK(count(r.out, std::string("flows ok with strategy ") + strat) == 2);
      // Both rails on each gate (the profile sampling at start-up opens
      // drivers of its own, so the session's line is what counts).
      CHECK(count(r.err, std::string("peer(s) over ") + rl.drivers) == 2);
    }
  }
}

// Bursts over libfabric's shm provider used to hang (one rank in MPI_Wait,
// the other in finalize) or fail with "fi_trecv (data) failed: Cannot
// allocate memory" blaming the live peer: more messages than the provider's
// receive queue holds arrived unexpected, and once the queue was full the
// provider stopped reading at the message it could not place. Now packets
// wait for credit and data receives for room (drivers/ofi/README.md). Each
// run: 2000 8-byte messages each way, 4 rounds alternating receives first
// and sends first, every message's contents and order checked (most of
// them go as rendezvous once the engine's credit is spent); 3 runs a
// provider.
TEST_CASE("ofi: bursts of 2000 small messages each way, 4 rounds, 3 runs over each provider") {
  for (const char* prov : kProviders) {
    for (int run_no = 0; run_no < (slow() ? 1 : 3); ++run_no) {
      INFO("provider ", std::string(prov), ", run ", run_no);
      auto r = run("tests/mpi/burst", 2, {slow() ? "500" : "2000", "8", "8", "4"}, over_ofi(prov), 120);
      CHECK(r.status == 0);
      CHECK(count(r.out, "PASS burst rank") == 2);
      CHECK_FALSE(contains(r.err, "failed"));
    }
  }
}

// 1000 messages of 64 KiB to 1 MiB each way at once: rendezvous data by RMA
// read (auto) and by tagged messages (NMAD_OFI_RMA=off, which used to abort
// the rank with an uncaught std::runtime_error: a packet buffer refused
// with FI_ENOMEM). More data receives than the shm provider holds: the
// driver answers retry and the engine asks for the rest as room comes.
TEST_CASE("ofi: 1000 messages of 64 KiB-1 MiB each way, RMA read and tagged rendezvous") {
  struct setting {
    const char* provider;
    const char* rma;
  };
  for (const setting st : {setting{"shm", "auto"}, setting{"shm", "off"}, setting{"tcp;ofi_rxm", "auto"}}) {
    INFO("provider ", std::string(st.provider), ", NMAD_OFI_RMA=", std::string(st.rma));
    auto r = run("tests/mpi/burst", 2, {slow() ? "600" : "1000", "65536", "1048576", "1"},
                 over_ofi(st.provider, {{"NMAD_OFI_RMA", st.rma}}), 150);
    CHECK(r.status == 0);
    CHECK(count(r.out, "PASS burst rank") == 2);
    CHECK_FALSE(contains(r.err, "terminate called"));
    CHECK_FALSE(contains(r.err, "failed"));
  }
}

namespace {

using nmad_test::held_lines;  // the ranks' pids; every rank must report 0 names held

// The ofi driver's segments of these pids still in /dev/shm.
std::vector<std::string> segments_left(const std::vector<int>& pids) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    for (int pid : pids) {
      const std::string suffix = "_" + std::to_string(pid);
      if (name.rfind("nmad_", 0) == 0 && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(name);
    }
  }
  return out;
}

}  // namespace

// Every rank that died abnormally used to leave its 16 MiB segment in
// /dev/shm. Now no rank holds a name once the job is wired up, a rank
// killed with SIGKILL is noticed by the others over shm (its segment is no
// longer held), and nothing of the job remains.
TEST_CASE("ofi over shm: a rank killed with SIGKILL is noticed, and nothing stays in /dev/shm") {
  auto r = run("tests/workers/shm_hold_worker", 3, {"die"}, over_ofi("shm"), 60);
  CHECK(r.status != 0);
  int held = -1;
  const auto pids = held_lines(r.out, &held);
  CHECK(pids.size() == 3);
  CHECK(held == 0);
  // The survivors saw the dead rank fail (not the launcher's SIGTERM).
  CHECK(count(r.out, "receive from the killed rank ended: peer failed") == 2);
  CHECK(contains(r.err, "peer process died"));
  const auto left = segments_left(pids);
  for (const auto& name : left) MESSAGE("left behind: /dev/shm/" << name);
  CHECK(left.empty());
}

// libfabric used to be linked into every program, and with it libinfinipath
// (the psm provider's library), whose constructor took over SIGINT, SIGTERM,
// SIGSEGV, SIGBUS and SIGABRT with a handler that calls exit(): a rank the
// launcher stopped ran its destructors inside a signal handler and ended
// with status 1. Now libfabric is loaded only by the ofi driver, which puts
// back whatever the providers' libraries change.
TEST_CASE("ofi: the providers leave the application's signals alone, and libfabric is loaded only by the ofi driver") {
  for (const char* prov : {"tcp;ofi_rxm", "shm"}) {
    CAPTURE(prov);
    auto r = run("tests/workers/shm_hold_worker", 2, {"term"}, over_ofi(prov), 60);
    CHECK(r.status != 0);
    CHECK(count(r.out, "libfabric loaded: yes") == 2);
    CHECK(count(r.out, "libinfinipath") == 0);
    // The shm provider's handlers (they remove its segment, then pass the
    // signal on) are the only ones allowed.
    if (std::string(prov) == "shm") CHECK(count(r.out, "handler of SIGTERM: libfabric.so.1") == 2);
    else CHECK(count(r.out, "handler of SIGTERM: default") == 2);
    CHECK(contains(r.err, "rank 1 (pid"));
    CHECK(contains(r.err, "was killed by signal 15"));
  }
  auto r = run("tests/workers/shm_hold_worker", 2, {"term"}, {{"NMAD_DRIVER", "shm"}}, 60);
  CHECK(count(r.out, "libfabric loaded: no") == 2);
  CHECK(count(r.out, "handler of SIGTERM: default") == 2);
  CHECK(contains(r.err, "was killed by signal 15"));
}
