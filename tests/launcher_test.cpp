// Tests of nmad-run (tools/nmad-run, tools/launcher): jobs, failures,
// abort, timeout, signals, usage errors, environment, and the PMI server.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/nmad/services/topology.hpp"
#include "tests/test_paths.hpp"
#include "tools/launcher/binding.hpp"
#include "tools/launcher/hosts.hpp"
#include "tools/launcher/launcher.hpp"
#include "tools/launcher/pmi_server.hpp"

namespace {

std::string nmad_run() { return nmad_test::runfile("tools/nmad-run"); }
std::string worker() { return nmad_test::runfile("tests/pmi_worker"); }

std::vector<std::string> lines_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// True if `text` has the line "nmad-run: rank R (pid <digits>)<rest>".
bool has_rank_line(const std::string& text, int rank, const std::string& rest) {
  const std::string head = "nmad-run: rank " + std::to_string(rank) + " (pid ";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(head, 0) != 0) continue;
    std::size_t i = head.size(), j = i;
    while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i && line.compare(j, std::string::npos, ")" + rest) == 0) return true;
  }
  return false;
}

nmad_test::run_result launch(std::vector<std::string> args, nmad_test::run_options o = {}) {
  args.insert(args.begin(), nmad_run());
  return nmad_test::run(args, o);
}

// A fresh directory for pid files.
struct temp_dir {
  std::string path;
  temp_dir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nmad_launcher_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(st, line);
  auto close = line.rfind(')');
  return !(close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z');
}

// Every rank that wrote a pid file is gone (or dies within 5 s); at least
// min_files ranks wrote one.
void check_no_survivors(const temp_dir& d, int min_files) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.path)) {
    if (e.path().extension() == ".tmp") continue;  // a rank killed before it had written its pid
    std::ifstream f(e.path());
    pid_t pid = 0;
    f >> pid;
    REQUIRE(pid > 0);
    ++files;
    // A process that has closed its files may still be finishing its exit.
    for (int i = 0; i < 500 && process_alive(pid); ++i) ::usleep(10000);
    CHECK_MESSAGE(!process_alive(pid), "rank process " << pid << " (" << e.path().filename() << ") survived");
  }
  CHECK(files >= min_files);
}

}  // namespace

TEST_CASE("jobs of 1 and of 4 ranks") {
  for (int n : {1, 4}) {
    auto r = launch({"-n", std::to_string(n), "--timeout", "60", "--oversubscribe", worker(), "hello"});
    INFO("n=" << n << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    auto hello = lines_with(r.out, "HELLO");
    CHECK(hello.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      CHECK(r.out.find("HELLO rank=" + std::to_string(i) + " size=" + std::to_string(n) + "\n") != std::string::npos);
  }
  // A program found through PATH, with arguments after --.
  auto r = launch({"-n", "2", "--", "sh", "-c", "exit 0"});
  CHECK(r.status == 0);
}

TEST_CASE("a rank exiting 3: nmad-run exits 3 and names the rank") {
  auto r = launch({"-n", "3", "--timeout", "60", worker(), "exit", "3", "1"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 3);
  CHECK(has_rank_line(r.err, 1, " exited with status 3"));
  // The others were waiting in a fence that could no longer complete: they
  // got an error at once (and reported it themselves) instead of hanging.
  CHECK(lines_with(r.out, "FENCE_FAILED").size() == 2);
  CHECK(r.seconds < 20);
}

TEST_CASE("a rank killed by SIGKILL while the others wait: the others are ended") {
  SUBCASE("others sleeping: SIGTERM after the grace period") {
    temp_dir d;
    auto r = launch({"-n", "4", "--kill-grace", "0.5", "--timeout", "60", worker(), "kill9", "2", "sleep"},
                    nmad_test::run_options().set("WORKER_PID_DIR", d.path));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 137);
    CHECK(has_rank_line(r.err, 2, " was killed by signal 9 (Killed)"));
    CHECK(r.out.find("SURVIVED") == std::string::npos);
    CHECK(r.seconds < 20);
    check_no_survivors(d, 4);
  }
  SUBCASE("others in a fence: they see the failure themselves") {
    auto r = launch({"-n", "3", "--timeout", "60", worker(), "kill9", "0", "fence"});
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 137);
    CHECK(r.err.find("rank 0 (pid") != std::string::npos);
    CHECK(r.err.find("signal 9") != std::string::npos);
    CHECK(lines_with(r.out, "FENCE_FAILED").size() == 2);
  }
}

TEST_CASE("PMI abort ends the job with the abort's exit code") {
  temp_dir d;
  auto r = launch({"-n", "3", "--kill-grace", "0.3", "--timeout", "60", worker(), "abort", "1", "5"},
                  nmad_test::run_options().set("WORKER_PID_DIR", d.path));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 5);
  CHECK(has_rank_line(r.err, 1, " called abort (exit code 5): worker gave up: x=y and z"));
  CHECK(r.out.find("SURVIVED") == std::string::npos);
  CHECK(r.seconds < 20);
  check_no_survivors(d, 3);
}

TEST_CASE("--timeout ends the job with status 124, SIGKILL for ranks ignoring SIGTERM") {
  SUBCASE("--timeout") {
    temp_dir d;
    auto r = launch({"-n", "4", "--timeout", "1", worker(), "sleep", "60"}, nmad_test::run_options().set("WORKER_PID_DIR", d.path));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 124);
    CHECK(r.err.find("nmad-run: job timed out after 1 s; ranks still running: 0 1 2 3") != std::string::npos);
    CHECK(r.seconds < 15);
    check_no_survivors(d, 1);
  }
  SUBCASE("NMAD_RUN_TIMEOUT and a rank that ignores SIGTERM") {
    temp_dir d;
    auto r = launch({"-n", "2", worker(), "ignore_term"},
                    nmad_test::run_options().set("WORKER_PID_DIR", d.path).set("NMAD_RUN_TIMEOUT", "1.5"));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 124);
    CHECK(r.err.find("timed out after 1.5 s") != std::string::npos);
    if (!lines_with(r.out, "IGNORING_TERM").empty())
      CHECK(r.seconds >= 3);  // 1.5 s + 2 s between SIGTERM and SIGKILL
    CHECK(r.seconds < 15);
    check_no_survivors(d, 1);
  }
}

TEST_CASE("nmad-run forwards SIGTERM to the ranks and exits") {
  temp_dir d;
  auto r = launch({"-n", "3", "--timeout", "60", worker(), "signal_launcher"}, nmad_test::run_options().set("WORKER_PID_DIR", d.path));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 128 + SIGTERM);
  CHECK(r.err.find("received SIGTERM") != std::string::npos);
  CHECK(r.out.find("SURVIVED") == std::string::npos);
  CHECK(r.seconds < 20);
  check_no_survivors(d, 3);
}

TEST_CASE("no orphans even if nmad-run itself is SIGKILLed") {
  temp_dir d;
  auto r = launch({"-n", "3", "--timeout", "60", worker(), "signal_launcher", "KILL"},
                  nmad_test::run_options().set("WORKER_PID_DIR", d.path).timeout(30));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 128 + SIGKILL);
  CHECK_FALSE(r.timed_out);  // the ranks died too, closing the output pipes
  CHECK(r.out.find("SURVIVED") == std::string::npos);
  CHECK(r.seconds < 20);
  check_no_survivors(d, 3);
}

TEST_CASE("bad usage: clear message and exit 2") {
  temp_dir d;
  std::string not_exec = d.path + "/not_executable";
  std::ofstream(not_exec) << "#!/bin/sh\nexit 0\n";
  ::chmod(not_exec.c_str(), 0644);
  struct usage_case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<usage_case> cases = {
      {{}, "missing -n"},
      {{"hostname"}, "missing -n"},
      {{"-n", "0", "true"}, "-n needs a number of processes >= 1"},
      {{"-n", "abc", "true"}, "-n needs a number of processes >= 1"},
      {{"-n"}, "needs a value"},
      {{"-n", "2"}, "missing program"},
      {{"-n", "2", "--"}, "missing program"},
      {{"-n", "2", "--bogus", "true"}, "unknown option '--bogus'"},
      {{"-n", "2", "--timeout", "-1", "true"}, "--timeout needs a positive number"},
      {{"-n", "2", "no-such-program-nmad"}, "command not found"},
      {{"-n", "2", "/nonexistent/prog"}, "No such file"},
      {{"-n", "2", not_exec}, "not executable"},
      {{"-n", "2", d.path}, "is a directory"},
  };
  for (const auto& c : cases) {
    auto r = launch(c.args, nmad_test::run_options().timeout(20));
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    INFO("args: " << joined << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("nmad-run: ") == 0);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(r.seconds < 10);
  }
  auto bad_env = launch({"-n", "1", "true"}, nmad_test::run_options().set("NMAD_RUN_KILL_GRACE", "soon"));
  CHECK(bad_env.status == 2);
  CHECK(bad_env.err.find("NMAD_RUN_KILL_GRACE") != std::string::npos);
  auto help = launch({"--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("Usage: nmad-run") != std::string::npos);
}

TEST_CASE("environment: -x, inherited variables and the variables nmad-run sets") {
  auto r = launch({"-n", "2", "-x", "FOO=bar baz=qux", "-x", "FORWARDED", "-x", "NOT_SET_ANYWHERE", "--timeout", "60",
                   worker(), "env", "FOO", "FORWARDED", "INHERITED", "NOT_SET_ANYWHERE", "NMAD_RUN_SIZE", "PMI_SIZE",
                   "PMI_PORT", "NMAD_JOB_KEY"},
                  nmad_test::run_options()
                      .set("FORWARDED", "fwd")
                      .set("INHERITED", "inh")
                      .set("PMI_PORT", "1.2.3.4:5")
                      .unset("NOT_SET_ANYWHERE"));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 0);
  for (std::string rank : {"0", "1"}) {
    std::string p = "ENV rank=" + rank + " ";
    CHECK(r.out.find(p + "FOO=bar baz=qux\n") != std::string::npos);
    CHECK(r.out.find(p + "FORWARDED=fwd\n") != std::string::npos);
    CHECK(r.out.find(p + "INHERITED=inh\n") != std::string::npos);
    CHECK(r.out.find(p + "NOT_SET_ANYWHERE=(unset)\n") != std::string::npos);
    CHECK(r.out.find(p + "NMAD_RUN_SIZE=2\n") != std::string::npos);
    CHECK(r.out.find(p + "PMI_SIZE=2\n") != std::string::npos);
    CHECK(r.out.find(p + "PMI_PORT=(unset)\n") != std::string::npos);  // inherited PMI_* dropped
  }
  auto key0 = lines_with(r.out, "ENV rank=0 NMAD_JOB_KEY=");
  REQUIRE(key0.size() == 1);
  std::string key = key0[0].substr(std::string("ENV rank=0 NMAD_JOB_KEY=").size());
  CHECK(key.size() == 32);
  CHECK(key.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(r.out.find("ENV rank=1 NMAD_JOB_KEY=" + key + "\n") != std::string::npos);
}

TEST_CASE("a rank leaving before a fence fails the fence instead of hanging") {
  auto r = launch({"-n", "3", "--timeout", "60", worker(), "early_exit0", "0"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 1);
  CHECK(lines_with(r.out, "FENCE_FAILED").size() == 2);
  CHECK(r.err.find("PMI barrier cannot complete") != std::string::npos);
  CHECK(r.seconds < 20);
}

TEST_CASE("launcher library: run_job results and exit statuses") {
  nmad::launcher::job_options o;
  o.nprocs = 3;
  o.argv = {worker(), "exit", "7", "2"};
  o.kill_grace_s = 5;
  o.timeout_s = 60;
  std::vector<std::string> reports;
  o.report = [&](const std::string& s) { reports.push_back(s); };
  auto res = nmad::launcher::run_job(o);
  CHECK(res.exit_code == 7);
  CHECK_FALSE(res.timed_out);
  REQUIRE(res.ranks.size() == 3);
  CHECK(res.ranks[2].code() == 7);
  CHECK(res.ranks[0].code() == 1);  // its fence failed, it exited 1 on its own
  CHECK_FALSE(res.ranks[0].ended_by_launcher);
  REQUIRE(reports.size() >= 2);
  CHECK(reports[0].find("rank 2 (pid ") == 0);  // the cause comes first
  CHECK(reports[0].find("exited with status 7") != std::string::npos);
  CHECK(reports[1].find("PMI barrier cannot complete: rank(s) 2 left") == 0);

  o.argv = {"no-such-program-nmad"};
  CHECK_THROWS_AS(nmad::launcher::run_job(o), nmad::launcher::usage_error);

  bool help = false;
  const char* argv[] = {"nmad-run", "-n4", "--timeout=2.5", "--kill-grace", "0", "-x", "A=1", "prog", "-n", "9"};
  auto p = nmad::launcher::parse_command_line(10, argv, &help);
  CHECK_FALSE(help);
  CHECK(p.nprocs == 4);
  CHECK(*p.timeout_s == 2.5);
  CHECK(p.kill_grace_s == 0);
  CHECK(p.env_set == std::vector<std::string>{"A=1"});
  CHECK(p.argv == std::vector<std::string>{"prog", "-n", "9"});
}

TEST_CASE("PMI server: protocol with fake clients over socketpairs") {
  nmad::launcher::pmi_server srv(2, "kvs0", {});
  std::vector<std::string> reports;
  srv.on_report = [&](const std::string& s) { reports.push_back(s); };
  int abort_rank = -1, abort_code = -1;
  std::string abort_msg;
  srv.on_abort = [&](int r, int c, const std::string& m) {
    abort_rank = r;
    abort_code = c;
    abort_msg = m;
  };
  int client[2];
  for (int r = 0; r < 2; ++r) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    srv.add_connection(sv[0], r);
    client[r] = sv[1];
  }
  auto pump = [&] {
    for (int i = 0; i < 5; ++i) {
      std::vector<pollfd> fds;
      srv.fill_pollfds(fds);
      if (::poll(fds.data(), fds.size(), 20) > 0) srv.handle(fds, 0);
    }
  };
  auto send = [&](int r, const std::string& s) { REQUIRE(::write(client[r], s.data(), s.size()) == (ssize_t)s.size()); };
  auto recv = [&](int r) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(client[r], buf, sizeof buf, MSG_DONTWAIT)) > 0) s.append(buf, n);
    return s;
  };
  send(0, "cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\ncmd=get_my_kvsname\n");
  pump();
  CHECK(recv(0) ==
        "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024\n"
        "cmd=my_kvsname kvsname=kvs0\n");
  send(0, "cmd=put kvsname=kvs0 key=a value=1\ncmd=barrier_in\n");
  pump();
  CHECK(recv(0) == "cmd=put_result rc=0 msg=success\n");  // barrier not complete yet
  send(1, "cmd=get kvsname=kvs0 key=zz\ncmd=barrier_in\n");
  pump();
  CHECK(recv(1) == "cmd=get_result rc=-1 msg=key_zz_not_found value=unknown\ncmd=barrier_out\n");
  CHECK(recv(0) == "cmd=barrier_out\n");
  send(1, "cmd=get kvsname=kvs0 key=a\ncmd=spawn foo=bar\ncmd=abort exitcode=9 message=bye%20now\n");
  pump();
  CHECK(recv(1) ==
        "cmd=get_result rc=0 msg=success value=1\ncmd=spawn_result rc=-1 msg=unsupported_command\n");
  CHECK(abort_rank == 1);
  CHECK(abort_code == 9);
  CHECK(abort_msg == "bye now");
  send(0, "this is garbage\n");
  pump();
  char c;
  CHECK(::read(client[0], &c, 1) == 0);  // protocol error: connection closed
  CHECK(reports.size() == 2);           // unsupported command + protocol error
  ::close(client[0]);
  ::close(client[1]);
}

TEST_CASE("--bind-to core gives each local rank one CPU of its own; none keeps them all; bad values are refused") {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  const int cpus = CPU_COUNT(&mine);
  const std::string show = "grep Cpus_allowed_list /proc/self/status; echo cpus=$NMAD_RUN_CPUS";
  auto bound = launch({"--bind-to", "core", "-n", std::to_string(std::min(cpus, 2)), "/bin/sh", "-c", show});
  REQUIRE(bound.status == 0);
  auto lists = lines_with(bound.out, "Cpus_allowed_list:");
  REQUIRE(lists.size() == static_cast<std::size_t>(std::min(cpus, 2)));
  std::set<std::string> distinct;
  for (const auto& l : lists) {
    const std::string v = l.substr(l.find_first_not_of(" \t", std::string("Cpus_allowed_list:").size()));
    CHECK(v.find_first_of(",-") == std::string::npos);  // one CPU
    distinct.insert(v);
  }
  CHECK(distinct.size() == lists.size());  // a different one each
  CHECK(lines_with(bound.out, "cpus=" + std::to_string(cpus)).size() == lists.size());
  auto free = launch({"-n", "1", "/bin/sh", "-c", show});  // auto: one rank is not bound
  REQUIRE(free.status == 0);
  if (cpus > 1) CHECK(lines_with(free.out, "Cpus_allowed_list:").at(0).find_first_of(",-") != std::string::npos);
  if (cpus > 1) {
    // The default (auto): two ranks that fit the CPUs get one each; none keeps them all.
    auto two = launch({"-n", "2", "/bin/sh", "-c", show});
    REQUIRE(two.status == 0);
    for (const auto& l : lines_with(two.out, "Cpus_allowed_list:"))
      CHECK(l.substr(std::string("Cpus_allowed_list:").size()).find_first_of(",-") == std::string::npos);
    auto none = launch({"--bind-to", "none", "-n", "2", "/bin/sh", "-c", show});
    REQUIRE(none.status == 0);
    for (const auto& l : lines_with(none.out, "Cpus_allowed_list:"))
      CHECK(l.find_first_of(",-") != std::string::npos);
  }
  auto bad = launch({"--bind-to", "socket", "-n", "1", "/bin/true"});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("--bind-to") != std::string::npos);
}

TEST_CASE("binding plan: the placement's cores on this machine's shape, nothing when auto does not fit") {
  using nmad::launcher::plan_bindings;
  namespace topo = nmad::topology;
  const auto two = topo::flat_topology({0, 1});  // this machine: 2 cores, 1 NUMA node
  auto b2 = plan_bindings(2, "auto", two);
  REQUIRE(b2.size() == 2);
  CHECK(b2[0].bound);
  CHECK(b2[0].cpus == std::vector<int>{0});
  CHECK(b2[1].cpus == std::vector<int>{1});
  CHECK(b2[1].numa == 0);
  CHECK_FALSE(plan_bindings(1, "auto", two)[0].bound);
  auto b3 = plan_bindings(3, "auto", two);
  for (const auto& b : b3) {
    CHECK_FALSE(b.bound);
    CHECK(b.reason.find("do not fit") != std::string::npos);
  }
  auto c3 = plan_bindings(3, "core", two);  // oversubscribed: CPUs in turn
  CHECK(c3[0].cpus == std::vector<int>{0});
  CHECK(c3[1].cpus == std::vector<int>{1});
  CHECK(c3[2].cpus == std::vector<int>{0});
  CHECK(c3[2].bound);
  CHECK_FALSE(plan_bindings(2, "none", two)[0].bound);
  // A 2-NUMA machine described as this one: scatter by NUMA.
  const auto paper = topo::load_synthetic("numa:2 core:4 pu:1");
  const topo::machine_topology here(paper.pus(), "test", true);
  auto b4 = plan_bindings(4, "auto", here);
  std::vector<int> cpus, numa;
  for (const auto& b : b4) cpus.push_back(b.cpus.at(0)), numa.push_back(b.numa);
  CHECK(cpus == std::vector<int>{0, 4, 2, 6});
  CHECK(numa == std::vector<int>{0, 1, 0, 1});
  CHECK(nmad::launcher::binding_line(1, b4[1]).rfind("rank 1: CPUs 4 (NUMA node 1): scatter by NUMA", 0) == 0);
  // Hyper-threads: a rank takes its whole core, or its first PU under smt.
  const auto ht = topo::load_synthetic("core:4 pu:2");
  const topo::machine_topology ht_here(ht.pus(), "test", true);
  CHECK(plan_bindings(2, "auto", ht_here)[1].cpus == std::vector<int>{4, 5});
  CHECK(plan_bindings(2, "auto", ht_here, "smt")[1].cpus == std::vector<int>{4});
  // Another machine's topology is placed and reported, never applied.
  auto foreign = plan_bindings(4, "core", paper);
  CHECK_FALSE(foreign[1].bound);
  CHECK(foreign[1].cpus == std::vector<int>{4});
  CHECK(foreign[1].reason.find("not applied") != std::string::npos);
  CHECK(nmad::launcher::binding_line(1, foreign[1]).rfind("rank 1: not bound (CPUs 4)", 0) == 0);
}

TEST_CASE("--bind none is --bind-to none; --report-bindings and NMAD_RUN_REPORT_BINDINGS print one line per rank") {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  const int cpus = CPU_COUNT(&mine);
  const std::string show = "grep Cpus_allowed_list /proc/self/status";
  auto rep = launch({"--report-bindings", "-n", "2", "/bin/sh", "-c", show});
  REQUIRE(rep.status == 0);
  auto lines = lines_with(rep.err, "nmad-run: rank ");
  REQUIRE(lines.size() == 2);
  if (cpus > 1) {
    CHECK(lines[0].find("CPUs ") != std::string::npos);
    CHECK(lines[0].find("NUMA node") != std::string::npos);
    CHECK(lines[0].find("scatter by NUMA") != std::string::npos);
  }
  auto env_rep = launch({"-n", "1", "/bin/true"}, nmad_test::run_options().set("NMAD_RUN_REPORT_BINDINGS", "1"));
  REQUIRE(env_rep.status == 0);
  CHECK(lines_with(env_rep.err, "nmad-run: rank 0: not bound").size() == 1);
  auto none = launch({"--bind", "none", "--report-bindings", "-n", "2", "/bin/sh", "-c", show});
  REQUIRE(none.status == 0);
  CHECK(lines_with(none.err, "nmad-run: rank ").size() == 2);
  CHECK(none.err.find("--bind none") != std::string::npos);
  if (cpus > 1) {
    for (const auto& l : lines_with(none.out, "Cpus_allowed_list:")) CHECK(l.find_first_of(",-") != std::string::npos);
    // A synthetic topology is reported, not applied.
    auto syn = launch({"--report-bindings", "-n", "2", "/bin/sh", "-c", show},
                      nmad_test::run_options().set("NMAD_TOPOLOGY", "numa:2 core:4 pu:1"));
    REQUIRE(syn.status == 0);
    CHECK(lines_with(syn.err, "nmad-run: rank 1: not bound (CPUs 4): placed on synthetic:").size() == 1);
    for (const auto& l : lines_with(syn.out, "Cpus_allowed_list:")) CHECK(l.find_first_of(",-") != std::string::npos);
  }
  auto bad = launch({"-n", "1", "/bin/true"}, nmad_test::run_options().set("NMAD_RUN_REPORT_BINDINGS", "yes"));
  CHECK(bad.status == 2);
  CHECK(bad.err.find("NMAD_RUN_REPORT_BINDINGS") != std::string::npos);
}

TEST_CASE("--pmi-port: an impostor connecting first with a guessed pmiid does not take the rank") {
  temp_dir d;
  auto r = launch({"-n", "3", "--pmi-port", "--timeout", "60", worker(), "impostor", d.path});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 0);
  CHECK(lines_with(r.out, "IMPOSTORS_REFUSED").size() == 1);
  for (int i = 0; i < 3; ++i)
    CHECK(r.out.find("IMPOSTOR_JOB_OK rank=" + std::to_string(i) + " size=3\n") != std::string::npos);
  // Each refusal is reported (4 of them: under the rate limit's burst).
  CHECK(lines_with(r.err, "nmad-run: PMI port: refused a connection from 127.0.0.1:").size() == 4);
  CHECK(r.err.find("wrong authentication token for pmiid=1") != std::string::npos);
  CHECK(r.err.find("no authentication token for pmiid=1") != std::string::npos);
  CHECK(r.err.find("'init' before initack") != std::string::npos);
}

TEST_CASE("a rank that initialised PMI and exits 0 without finalize fails the job, named; programs without PMI do not") {
  auto r = launch({"-n", "3", "--timeout", "60", worker(), "no_finalize", "2"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 1);
  CHECK(lines_with(r.out, "NO_FINALIZE rank=").size() == 3);
  CHECK(has_rank_line(r.err, 2,
                      " exited with status 0 without calling MPI_Finalize (nor closing its nmad session) after "
                      "initialising: the job fails"));
  CHECK(r.err.find("rank 0 (pid") == std::string::npos);
  CHECK(r.err.find("rank 1 (pid") == std::string::npos);
  // Everyone finalizes: status 0; never initialised (no PMI at all): status 0.
  CHECK(launch({"-n", "2", "--timeout", "60", worker(), "no_finalize", "7"}).status == 0);
  CHECK(launch({"-n", "2", "--timeout", "60", worker(), "plain_exit", "0"}).status == 0);
}

TEST_CASE("more ranks than CPUs: one warning saying what the wait policy does, silenced by the knob") {
  const int cpus = static_cast<int>(nmad::topology::allowed_cpus().size());
  REQUIRE(cpus >= 1);
  const std::string n = std::to_string(cpus + 2);
  auto r = launch({"-n", n, "--timeout", "60", worker(), "hello"});
  INFO("stderr: " << r.err);
  CHECK(r.status == 0);
  CHECK(lines_with(r.err, "nmad-run: warning: " + n + " ranks on this host for " + std::to_string(cpus) +
                              " CPUs (oversubscribed): a waiting rank polls for at most 20 us")
            .size() == 1);
  CHECK(r.err.find("NMAD_RUN_OVERSUBSCRIBE=1 silences this") != std::string::npos);
  CHECK(launch({"-n", n, "--timeout", "60", "--oversubscribe", worker(), "hello"}).err.empty());
  CHECK(launch({"-n", n, "--timeout", "60", worker(), "hello"}, nmad_test::run_options().set("NMAD_RUN_OVERSUBSCRIBE", "1"))
            .err.empty());
  auto bad = launch({"-n", "1", worker(), "hello"}, nmad_test::run_options().set("NMAD_RUN_OVERSUBSCRIBE", "yes"));
  CHECK(bad.status == 2);
  CHECK(bad.err.find("NMAD_RUN_OVERSUBSCRIBE=\"yes\": expected 0 or 1") != std::string::npos);
  // As many ranks as CPUs: no warning.
  CHECK(launch({"-n", std::to_string(cpus), "--timeout", "60", worker(), "hello"}).err.empty());
}

TEST_CASE("hostfile lines are validated: FILE:LINE and the reason") {
  temp_dir d;
  struct bad_case {
    std::string line, message;
  };
  const std::vector<bad_case> cases = {
      {"node1 slots=2 max_slots=4", "got more after the host"},
      {"node1 slot=2", "expected 'slots=N' after the host"},
      {"node1:", "bad slot count '' for node1"},
      {"node1:0", "bad slot count '0' for node1"},
      {"node1 slots=-3", "bad slot count '-3'"},
      {"node1:99999999999999999999", "bad slot count"},
      {"node1:2x", "bad slot count '2x'"},
      {"-oProxyCommand=touch", "is not a host name"},
      {"no$de", "'no$de' is not a host name"},
      {":4", "empty host name"},
  };
  for (const auto& c : cases) {
    const std::string path = d.path + "/hosts";
    std::ofstream(path) << "# a comment\n\ngood1 slots=2\n" << c.line << "\ngood2\n";
    INFO("line: " << c.line);
    try {
      nmad::launcher::parse_hostfile(path);
      FAIL("accepted");
    } catch (const nmad::launcher::usage_error& e) {
      const std::string what = e.what();
      CHECK(what.find(path + ":4: ") == 0);
      CHECK(what.find(c.message) != std::string::npos);
    }
    auto r = launch({"--hostfile", path, "true"});
    CHECK(r.status == 2);
    CHECK(r.err.find(path + ":4: ") != std::string::npos);
  }
  const std::string path = d.path + "/ok";
  std::ofstream(path) << "a.example-1_x slots=3  # three\nb:2\n  c\t\n";
  auto hosts = nmad::launcher::parse_hostfile(path);
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].name == "a.example-1_x");
  CHECK(hosts[0].slots == 3);
  CHECK(hosts[1].slots == 2);
  CHECK(hosts[2].name == "c");
  CHECK_THROWS_AS(nmad::launcher::parse_host_list("a,-oX=y"), nmad::launcher::usage_error);
}

TEST_CASE("an ssh failure is reported as such, not as the program's exit status") {
  // Nothing listens on port 1: ssh exits 255 with "connect to host ... refused".
  auto r = launch({"--host", "127.0.0.9", "--timeout", "60", worker(), "hello"},
                  nmad_test::run_options().set("NMAD_RUN_SSH", "ssh -o BatchMode=yes -o ConnectTimeout=10 -p 1"));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 255);
  CHECK(r.err.find("nmad-run: rank 0: ssh to 127.0.0.9 failed (ssh exit status 255, see its message above): the rank "
                   "was not started there") != std::string::npos);
  CHECK(r.err.find("exited with status 255") == std::string::npos);
}
