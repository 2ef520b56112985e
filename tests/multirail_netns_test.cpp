// Multirail as a cluster sees it: two hosts (network namespaces made by
// tools/railpair) joined by two links shaped to different rates, one rank
// per host with a tcp rail per link (NMAD_DRIVERS=tcp+tcp, NMAD_TCP_HOSTS).
// split_balance, told the links' rates (NMAD_RAIL_BANDWIDTH), sends the
// rendezvous data over both links in their ratio: the interfaces' byte
// counters and the engine's per-rail counters both show it, and every byte
// and the order arrive right (tests/workers/strategy_worker.cpp). A link
// taken down mid-job ends the job within seconds, each rank naming the
// failed rail (docs/MULTIRAIL.md). Needs root; skips, saying why, where
// namespaces cannot be created. Every pair of hosts is removed at the end of
// its test case, also when a check fails.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

using nmad_test::count;

std::string tool() { return nmad_test::runfile("tools/railpair"); }
std::string worker() { return nmad_test::runfile("tests/workers/strategy_worker"); }

nmad_test::run_result railpair(std::vector<std::string> args, double timeout = 60) {
  args.insert(args.begin(), tool());
  return nmad_test::run(args, nmad_test::run_options().timeout(timeout));
}

// Empty if the two hosts can be made here, else why not.
const std::string& cannot_make_hosts() {
  static const std::string why = [] {
    auto r = railpair({"check"});
    if (r.status == 0) return std::string();
    return "railpair check (status " + std::to_string(r.status) + "): " + r.out + r.err;
  }();
  return why;
}

#define SKIP_UNLESS_NAMESPACES()                                                             \
  do {                                                                                       \
    if (!cannot_make_hosts().empty()) {                                                      \
      MESSAGE("SKIPPED: network namespaces cannot be created here: " << cannot_make_hosts()); \
      return;                                                                                \
    }                                                                                        \
  } while (0)

std::string ip_tool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "ip";
}

// Two hosts for the duration of a scope; removed (and checked gone) at its end.
struct host_pair {
  std::string prefix = "mr" + std::to_string(::getpid() % 1000000);
  explicit host_pair(const std::string& rates) {
    auto r = railpair({"up", "--prefix", prefix, "--rate", rates});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
  }
  ~host_pair() {
    auto r = railpair({"down", "--prefix", prefix});
    CHECK(r.status == 0);
    const std::string left = nmad_test::run({ip_tool(), "netns", "list"}, nmad_test::run_options().timeout(10)).out;
    CHECK(left.find(prefix + "-a") == std::string::npos);
    CHECK(left.find(prefix + "-b") == std::string::npos);
  }
  std::string host(char side) const { return prefix + "-" + side; }
  // Bytes host `side` sent on links 1 and 2.
  std::pair<double, double> tx(char side) const {
    auto r = railpair({"counters", "--prefix", prefix, host(side)});
    REQUIRE(r.status == 0);
    unsigned long long t1 = 0, r1 = 0, t2 = 0, r2 = 0;
    REQUIRE(std::sscanf(r.out.c_str(), "link1 %llu %llu link2 %llu %llu", &t1, &r1, &t2, &r2) == 4);
    return {static_cast<double>(t1), static_cast<double>(t2)};
  }
  // The command line of a 2-rank job, one rank per host.
  std::vector<std::string> job(std::vector<std::string> args, int timeout_s) const {
    std::vector<std::string> argv = {tool(), "run", "--prefix", prefix, "--",
                                     nmad_test::runfile("tools/nmad-run"), "--host", host('a') + "," + host('b'),
                                     "-n", "2", "--timeout", std::to_string(timeout_s), worker()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

// Link 1 at 4 times link 2's rate; split_balance told so.
const char* const kRates = "400mbit,100mbit";
const char* const kRailBandwidth = "50,12.5";  // MB/s

nmad_test::run_options job_options(double timeout) {
  nmad_test::run_options o;
  o.timeout_s = timeout;
  o.env = {{"NMAD_DRIVERS", "tcp+tcp"},
           {"NMAD_STRATEGY", "split_balance"},
           {"NMAD_RAIL_BANDWIDTH", kRailBandwidth},
           {"NMAD_PROFILE", "off"}};
  return o;
}

}  // namespace

TEST_CASE("two shaped links: split_balance spreads the data in their ratio, every byte and the order right") {
  SKIP_UNLESS_NAMESPACES();
  host_pair p(kRates);
  const auto a0 = p.tx('a'), b0 = p.tx('b');
  auto r = nmad_test::run(p.job({"ratio", "5", "60"}, 240), job_options(300));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "ratio ok with strategy split_balance") == 2);
  // The engine's own count (rank 0's sequential phase, one message at a time).
  unsigned long long x0 = 0, x1 = 0;
  const auto at = r.out.find("rail bytes ");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::sscanf(r.out.c_str() + at, "rail bytes %llu %llu", &x0, &x1) == 2);
  const double engine = static_cast<double>(x0) / static_cast<double>(x0 + x1);
  // The wires: everything each host sent on each link (data, headers,
  // acknowledgements of the other direction, the bootstrap on link 1).
  const auto a1 = p.tx('a'), b1 = p.tx('b');
  const double l1 = (a1.first - a0.first) + (b1.first - b0.first);
  const double l2 = (a1.second - a0.second) + (b1.second - b0.second);
  const double wire = l1 / (l1 + l2);
  MESSAGE("link 1 carried " << l1 / 1e6 << " MB, link 2 " << l2 / 1e6 << " MB (link 1: " << wire
                            << " of the bytes; rank 0's rendezvous bytes on rail 1: " << engine
                            << "; the rates give 0.8)");
  CHECK(l2 > 1e6);  // both links really carried data
  CHECK(wire > 0.72);
  CHECK(wire < 0.88);
  CHECK(engine > 0.75);
  CHECK(engine < 0.85);
}

TEST_CASE("the ranks use one address per rail: a job over rail 2 alone crosses link 2 only") {
  SKIP_UNLESS_NAMESPACES();
  host_pair p(kRates);
  const auto a0 = p.tx('a');
  // A single tcp rail on link 2's address: NMAD_TCP_HOSTS's first entry is
  // what a lone tcp driver takes, so give it link 2's addresses.
  auto o = job_options(120);
  o.env = {{"NMAD_DRIVER", "tcp"}, {"NMAD_PROFILE", "off"}, {"RAILPAIR_RAILS", "2"}};
  auto r = nmad_test::run(p.job({"flows", "3", "60"}, 90), o);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "flows ok") == 2);
  const auto a1 = p.tx('a');
  MESSAGE("rank 0 sent " << (a1.first - a0.first) / 1e3 << " kB on link 1 (bootstrap), "
                         << (a1.second - a0.second) / 1e3 << " kB on link 2");
  CHECK(a1.second - a0.second > 10 * (a1.first - a0.first));
}

TEST_CASE("a rail's link goes down mid-job: the job ends within seconds, naming the failed rail") {
  SKIP_UNLESS_NAMESPACES();
  host_pair p(kRates);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path out = fs::path(tmp ? tmp : "/tmp") / ("multirail-loop-" + std::to_string(::getpid()) + ".out");
  const fs::path err = fs::path(out).replace_extension(".err");
  auto argv = p.job({"loop", "120"}, 150);
  auto o = job_options(180);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fo, 1);
    ::dup2(fe, 2);
    for (auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::setenv("NMAD_TCP_USER_TIMEOUT_MS", "2000", 1);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  auto read = [](const fs::path& f) {
    std::ifstream in(f);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto finish = [&](double limit_s) {  // exit status, or -1 (then killed)
    const auto end = clock_type::now() + std::chrono::duration<double>(limit_s);
    int st = 0;
    while (clock_type::now() < end) {
      if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(-pid, SIGKILL);  // the group this test started
    ::waitpid(pid, &st, 0);
    return -1;
  };
  // Both ranks in their loop (data has crossed both links), then link 2 down.
  const auto start = clock_type::now();
  bool looping = false;
  while (clock_type::now() - start < std::chrono::seconds(60)) {
    if (count(read(out), "looping") == 2) {
      looping = true;
      break;
    }
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      pid = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO("stdout:\n" << read(out) << "\nstderr:\n" << read(err));
  if (!looping && pid > 0) finish(0);
  REQUIRE(looping);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto down = railpair({"link", "--prefix", p.prefix, p.host('b'), "2", "down"});
  CHECK(down.status == 0);
  const auto cut = clock_type::now();
  const int status = finish(30);
  const double after = std::chrono::duration<double>(clock_type::now() - cut).count();
  const std::string e = read(err);
  INFO("stderr after the cut:\n" << e);
  MESSAGE("the job ended " << after << " s after link 2 went down (status " << status << ")");
  CHECK(status > 0);   // failed, and not killed by this test
  CHECK(after < 30);
  CHECK(e.find("rail 2 of 2 (tcp) failed") != std::string::npos);
  CHECK(e.find("FAILED") != std::string::npos);
  fs::remove(out);
  fs::remove(err);
}
