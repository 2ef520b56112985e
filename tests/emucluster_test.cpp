// tools/emucluster: emulated hosts (network namespaces joined by a bridge,
// each with a host name of its own) and MPI jobs across them: shared memory
// inside a host, tcp between hosts, rate shaping, a link going down in the
// middle of a job. Needs root; skips, with `emucluster check`'s message,
// where namespaces cannot be created. Every cluster is removed at the end of
// its test case, also when a check fails.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

using nmad_test::contains;
using nmad_test::count;

std::string tool() { return nmad_test::runfile("tools/emucluster"); }
std::string job_program() { return nmad_test::runfile("tests/emucluster/emu_job"); }

nmad_test::run_result emucluster(std::vector<std::string> args, double timeout = 60) {
  args.insert(args.begin(), tool());
  nmad_test::run_options o;
  o.timeout_s = timeout;
  return nmad_test::run(args, o);
}

// Empty if emulated hosts can be made here, else why not.
const std::string& cannot_emulate() {
  static const std::string why = [] {
    auto r = emucluster({"check"});
    if (r.status == 0) return std::string();
    return "emucluster check (status " + std::to_string(r.status) + "):\n" + r.out + r.err;
  }();
  return why;
}

#define SKIP_UNLESS_EMULATION_WORKS()                                 \
  do {                                                                \
    if (!cannot_emulate().empty()) {                                  \
      MESSAGE("SKIPPED: emulated hosts cannot be created here: " << cannot_emulate()); \
      return;                                                         \
    }                                                                 \
  } while (0)

// A unique cluster prefix for this test program: "et" and up to 6 digits.
std::string prefix() { return "et" + std::to_string(::getpid() % 1000000); }

// iproute2's ip (the test's PATH may lack the sbin directories).
std::string ip_tool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "ip";
}

std::string netns_list() { return nmad_test::run({ip_tool(), "netns", "list"}, nmad_test::run_options().timeout(10)).out; }

// A cluster for the duration of a scope; removed (and checked gone) at its end.
struct cluster {
  std::string p = prefix();
  bool up = false;
  explicit cluster(std::vector<std::string> args) {
    // The prefix is this process's: a cluster under it can only be the
    // remains of a dead run that had the same pid (killed mid-test).
    emucluster({"down", "--prefix", p});
    args.insert(args.begin(), {"up", "2", "--prefix", p});
    auto r = emucluster(args);
    if (r.status != 0) MESSAGE("emucluster up: " << r.out << r.err);
    REQUIRE(r.status == 0);
    up = true;
  }
  ~cluster() {
    auto r = emucluster({"down", "--prefix", p});
    CHECK(r.status == 0);
    CHECK_FALSE(contains(netns_list(), p + "-h"));
  }
  std::string host(int i) const { return p + "-h" + std::to_string(i); }
  // nmad-run through `emucluster run`, 2 ranks on each host.
  std::vector<std::string> job_argv(std::vector<std::string> prog_args, const std::string& hosts = "") const {
    std::vector<std::string> argv = {tool(), "run", "--prefix", p, "--", nmad_test::runfile("tools/nmad-run"),
                                     "--timeout", "90", "--host",
                                     hosts.empty() ? host(0) + ":2," + host(1) + ":2" : hosts, job_program()};
    argv.insert(argv.end(), prog_args.begin(), prog_args.end());
    return argv;
  }
  nmad_test::run_result job(std::vector<std::string> prog_args, std::vector<std::pair<std::string, std::string>> env = {},
                            const std::string& hosts = "") const {
    nmad_test::run_options o;
    o.timeout_s = 120;
    o.env = std::move(env);
    auto r = nmad_test::run(job_argv(std::move(prog_args), hosts), o);
    if (r.status != 0) MESSAGE("job: status " << r.status << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    return r;
  }
  // A byte counter of an interface: in the root namespace (ns empty) or in one.
  long long counter(const std::string& ns, const std::string& dev, const std::string& which) const {
    std::vector<std::string> argv = {ip_tool()};
    if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
    argv.insert(argv.end(), {"-s", "-o", "link", "show", "dev", dev});
    auto r = nmad_test::run(argv, nmad_test::run_options().timeout(10));
    REQUIRE(r.status == 0);
    // "... RX: bytes packets ... \    N ...    TX: bytes ... \    N ..."
    std::smatch m;
    const std::regex re(which + ":[^\\\\]*\\\\\\s+(\\d+)");
    REQUIRE(std::regex_search(r.out, m, re));
    return std::stoll(m[1]);
  }
};

// The set of ranks each rank reports a connection with over `driver` (NMAD_LOG=info).
std::map<int, std::set<int>> tcp_peers(const std::string& err, const std::string& driver = "tcp") {
  std::map<int, std::set<int>> out;
  const std::regex re("nmad\\[(\\d+)\\] " + driver + " info: connected to rank (\\d+)");
  for (std::sregex_iterator i(err.begin(), err.end(), re), e; i != e; ++i)
    out[std::stoi((*i)[1])].insert(std::stoi((*i)[2]));
  return out;
}

}  // namespace

TEST_CASE("emucluster: check, up, refusing an existing cluster, down (idempotent), cleanup of a failed up") {
  auto chk = emucluster({"check"});
  CHECK((chk.status == 0 || chk.status == 77));
  CHECK(contains(chk.out, "emucluster check: emulated hosts ca"));
  SKIP_UNLESS_EMULATION_WORKS();
  const std::string p = prefix();
  {
    cluster c({});
    auto again = emucluster({"up", "2", "--prefix", p});
    CHECK(again.status != 0);
    CHECK(contains(again.err, "cluster '" + p + "' exists already"));
    auto st = emucluster({"status", "--prefix", p});
    CHECK(st.status == 0);
    CHECK(count(st.out, "link up") == 2);
    CHECK(contains(st.out, c.host(1) + " 10."));
    // exec: the host's name, address (NMAD_TCP_HOST) and namespace; ssh-like
    // command lines too; the exit status passes through.
    auto ex = emucluster({"exec", c.host(1), "--", "sh", "-c", "hostname; echo \"addr $NMAD_TCP_HOST\"; ip -o -4 addr show dev eth0; exit 7"});
    CHECK(ex.status == 7);
    CHECK(contains(ex.out, c.host(1) + "\naddr 10."));
    CHECK(contains(ex.out, "eth0"));
    auto ssh_like = emucluster({"exec", c.host(0), "echo", "one", "&&", "hostname"});
    CHECK(ssh_like.status == 0);
    CHECK(ssh_like.out == "one\n" + c.host(0) + "\n");
    auto nohost = emucluster({"exec", p + "-h9", "--", "true"});
    CHECK(nohost.status == 255);
    CHECK(contains(nohost.err, "no emulated host '" + p + "-h9'"));
    CHECK(contains(netns_list(), c.host(0)));
  }
  auto down = emucluster({"down", "--prefix", p});
  CHECK(down.status == 0);
  CHECK(contains(down.out, "no cluster '" + p + "'"));
  // tc refuses the rate: what up had made (bridge, namespaces) is removed.
  auto bad = emucluster({"up", "3", "--prefix", p, "--rate", "fast"});
  CHECK(bad.status != 0);
  CHECK(contains(bad.err, "removing what was created"));
  CHECK_FALSE(contains(netns_list(), p + "-h"));
  CHECK(nmad_test::run({ip_tool(), "link", "show", "dev", p + "-br"}, nmad_test::run_options().timeout(10)).status != 0);
  CHECK(emucluster({"up", "0", "--prefix", p}).status == 2);
  CHECK(emucluster({"up", "2", "--prefix", "Bad-Prefix"}).status == 2);
}

TEST_CASE("4 ranks on 2 emulated hosts: MPI_COMM_TYPE_SHARED per host, shm inside a host, tcp between hosts") {
  SKIP_UNLESS_EMULATION_WORKS();
  cluster c({});
  const long bytes = 4 << 20;
  long long lo_before[2], sent_before[2], recv_before[2];
  for (int h = 0; h < 2; ++h) {
    lo_before[h] = c.counter(c.host(h), "lo", "TX");
    sent_before[h] = c.counter("", c.p + "-v" + std::to_string(h), "RX");  // what host h sent
    recv_before[h] = c.counter("", c.p + "-v" + std::to_string(h), "TX");  // what it received
  }
  auto r = c.job({"hosts", "2", std::to_string(bytes)}, {{"NMAD_LOG", "info"}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "PASS emu_job rank") == 4);
  // Ranks 0, 1 on host 0 and 2, 3 on host 1, each a 2-rank shared communicator.
  CHECK(contains(r.out, "rank 0 host " + c.host(0) + " shared 0 of 2"));
  CHECK(contains(r.out, "rank 1 host " + c.host(0) + " shared 1 of 2"));
  CHECK(contains(r.out, "rank 2 host " + c.host(1) + " shared 0 of 2"));
  CHECK(contains(r.out, "rank 3 host " + c.host(1) + " shared 1 of 2"));
  // tcp connections exactly between ranks of different hosts.
  auto peers = tcp_peers(r.err);
  CHECK(peers[0] == std::set<int>{2, 3});
  CHECK(peers[1] == std::set<int>{2, 3});
  CHECK(peers[2] == std::set<int>{0, 1});
  CHECK(peers[3] == std::set<int>{0, 1});
  CHECK(count(r.err, "over shm+tcp") + count(r.err, "over tcp+shm") == 4);
  // Each host sent its 2 x 2 inter-host messages over its link, and nothing
  // of the 2 x `bytes` between its own ranks went over a socket (they would
  // cross the host's lo).
  for (int h = 0; h < 2; ++h) {
    CAPTURE(h);
    const long long lo = c.counter(c.host(h), "lo", "TX") - lo_before[h];
    const long long sent = c.counter("", c.p + "-v" + std::to_string(h), "RX") - sent_before[h];
    const long long recv = c.counter("", c.p + "-v" + std::to_string(h), "TX") - recv_before[h];
    CHECK(sent >= 4 * bytes);
    CHECK(recv >= 4 * bytes);
    CHECK(sent < 6 * bytes);
    CHECK(lo < bytes / 8);
  }
  // Both ranks on one host: everything through shared memory, no tcp at all.
  const long long lo0 = c.counter(c.host(0), "lo", "TX");
  auto one = c.job({"hosts", "2", std::to_string(bytes)}, {{"NMAD_LOG", "info"}}, c.host(0) + ":2");
  CHECK(one.status == 0);
  CHECK(count(one.out, "PASS emu_job rank") == 2);
  CHECK(tcp_peers(one.err).empty());
  CHECK(count(one.err, "peer(s) over shm,") == 2);
  CHECK(c.counter(c.host(0), "lo", "TX") - lo0 < bytes / 8);
}

TEST_CASE("4 ranks on 2 emulated hosts, NMAD_DRIVER=shm,ofi: shm inside a host, ofi (tcp;ofi_rxm) between hosts") {
  SKIP_UNLESS_EMULATION_WORKS();
  cluster c({});
  const long bytes = 1 << 20;
  long long sent_before[2];
  for (int h = 0; h < 2; ++h) sent_before[h] = c.counter("", c.p + "-v" + std::to_string(h), "RX");
  auto r = c.job({"hosts", "2", std::to_string(bytes)}, {{"NMAD_DRIVER", "shm,ofi"},
                                                         {"NMAD_OFI_PROVIDER", "tcp;ofi_rxm"},
                                                         {"NMAD_OFI_DOMAIN", "eth0"},
                                                         {"NMAD_LOG", "info"}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "PASS emu_job rank") == 4);
  // ofi connections exactly between ranks of different hosts, no tcp driver.
  auto peers = tcp_peers(r.err, "ofi");
  CHECK(peers[0] == std::set<int>{2, 3});
  CHECK(peers[1] == std::set<int>{2, 3});
  CHECK(peers[2] == std::set<int>{0, 1});
  CHECK(peers[3] == std::set<int>{0, 1});
  CHECK(tcp_peers(r.err).empty());
  CHECK(count(r.err, "over shm+ofi") + count(r.err, "over ofi+shm") == 4);
  // The inter-host exchanges crossed each host's link.
  for (int h = 0; h < 2; ++h) {
    CAPTURE(h);
    CHECK(c.counter("", c.p + "-v" + std::to_string(h), "RX") - sent_before[h] >= 4 * bytes);
  }
}

TEST_CASE("4 ranks on 2 emulated hosts under MPICH's hydra (mpiexec.hydra through tools/emucluster-ssh)") {
  SKIP_UNLESS_EMULATION_WORKS();
  const char* hydra = "/usr/bin/mpiexec.hydra";
  REQUIRE_MESSAGE(::access(hydra, X_OK) == 0, "mpiexec.hydra not found: tools/test installs it (Debian package mpich)");
  cluster c({});
  const long bytes = 1 << 20;
  nmad_test::run_options o;
  o.timeout_s = 120;
  o.env = {{"NMAD_LOG", "info"}};
  // hydra's own PMI-1 server connects the ranks, not nmad-run's.
  o.unset_env = {"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NMAD_JOB_KEY"};
  auto r = nmad_test::run({tool(), "run", "--prefix", c.p, "--", hydra, "-hosts", c.host(0) + "," + c.host(1), "-ppn", "2",
                           "-n", "4", job_program(), "hosts", "2", std::to_string(bytes)},
                          o);
  if (r.status != 0) MESSAGE("status " << r.status << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  CHECK(count(r.out, "PASS emu_job rank") == 4);
  CHECK(contains(r.out, "rank 0 host " + c.host(0) + " shared 0 of 2"));
  CHECK(contains(r.out, "rank 1 host " + c.host(0) + " shared 1 of 2"));
  CHECK(contains(r.out, "rank 2 host " + c.host(1) + " shared 0 of 2"));
  CHECK(contains(r.out, "rank 3 host " + c.host(1) + " shared 1 of 2"));
  auto peers = tcp_peers(r.err);
  CHECK(peers[0] == std::set<int>{2, 3});
  CHECK(peers[1] == std::set<int>{2, 3});
  CHECK(peers[2] == std::set<int>{0, 1});
  CHECK(peers[3] == std::set<int>{0, 1});
}

TEST_CASE("--rate shapes the links: 8 MiB between hosts at 200mbit takes at least 0.3 s") {
  SKIP_UNLESS_EMULATION_WORKS();
  const long bytes = 8 << 20;  // 67 Mbit: 0.34 s at 200 Mbit/s
  auto seconds = [&](const nmad_test::run_result& r) {
    std::smatch m;
    const std::regex re("transfer " + std::to_string(bytes) + " to 2 seconds ([0-9.]+)");
    REQUIRE(std::regex_search(r.out, m, re));
    return std::stod(m[1]);
  };
  double unshaped = 0;
  {
    cluster c({});
    auto r = c.job({"transfer", std::to_string(bytes)});
    CHECK(r.status == 0);
    unshaped = seconds(r);
  }
  cluster c({"--rate", "200mbit"});
  auto st = emucluster({"status", "--prefix", c.p});
  CHECK(count(st.out, "rate 200Mbit") == 2);
  auto r = c.job({"transfer", std::to_string(bytes)});
  CHECK(r.status == 0);
  CHECK(count(r.out, "PASS emu_job rank") == 4);
  const double shaped = seconds(r);
  MESSAGE("8 MiB host to host: " << unshaped << " s unshaped, " << shaped << " s at 200mbit");
  CHECK(shaped >= 0.3);
  CHECK(shaped < 30);
}

TEST_CASE("a host's link goes down mid-job: the job fails within seconds, naming the unreachable peer") {
  SKIP_UNLESS_EMULATION_WORKS();
  cluster c({});
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path out = fs::path(tmp ? tmp : "/tmp") / ("emu-loop-" + std::to_string(::getpid()) + ".out");
  const fs::path err = fs::path(out).replace_extension(".err");
  auto argv = c.job_argv({"loop", "120"});
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
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
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    return -1;
  };
  bool looping = false;
  for (int i = 0; i < 600 && !looping; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    looping = contains(read(out), "looping");
    int st;
    if (!looping && ::waitpid(pid, &st, WNOHANG) == pid) {
      pid = -1;
      break;
    }
  }
  if (!looping) {
    if (pid > 0) finish(0);
    FAIL("the job never started looping:\nstdout:\n" << read(out) << "\nstderr:\n" << read(err));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto down = emucluster({"link", c.host(1), "down"});
  CHECK(down.status == 0);
  const auto t0 = clock_type::now();
  const int status = finish(60);
  const double took = std::chrono::duration<double>(clock_type::now() - t0).count();
  const std::string e = read(err);
  MESSAGE("job ended " << took << " s after the link went down, status " << status << "; stderr:\n" << e);
  CHECK(status != -1);   // ended by itself
  CHECK(status != 0);
  CHECK(status != 124);  // not by nmad-run's --timeout
  CHECK(took < 30);
  // A rank of host 0 names a rank of host 1 as failed, and why.
  CHECK(std::regex_search(e, std::regex("rank [01] .*called abort.*MPI_ERR_PROC_FAILED.*rank [23] failed: connection "
                                        "timed out \\(the peer's host stopped answering")));
  CHECK_FALSE(contains(read(out), "FAIL emu_job"));  // not the loop's own time limit
  fs::remove(out);
  fs::remove(err);
}
