// nmad-run across hosts: --host/--hostfile placement, and ranks started on
// "remote" hosts through a real ssh. The remote hosts are 127.0.0.2 and
// 127.0.0.3, served by an sshd this test starts on a loopback port with
// keys it generates.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "tests/test_paths.hpp"
#include "tools/launcher/hosts.hpp"
#include "tools/launcher/launcher.hpp"

namespace fs = std::filesystem;
using namespace nmad::launcher;

namespace {

using nmad_test::contains;
using nmad_test::count;

// An sshd on 127.0.0.2 and 127.0.0.3 for the duration of the test program.
struct ssh_server {
  fs::path dir;
  int port = 0;
  pid_t pid = -1;
  std::string ssh_command;
  std::string error;

  ssh_server() {
    if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/ssh-keygen")) {
      error = "sshd is not installed";
      return;
    }
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir = fs::path(tmp ? tmp : "/tmp") / ("nmad-sshd-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::error_code ec;
    fs::create_directories("/run/sshd", ec);  // privilege separation directory
    for (const char* k : {"hostkey", "userkey"}) {
      auto r = nmad_test::run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", (dir / k).string()});
      if (r.status != 0) {
        error = "ssh-keygen failed: " + r.err;
        return;
      }
    }
    fs::copy_file(dir / "userkey.pub", dir / "authorized_keys");
    std::mt19937 rng(static_cast<unsigned>(::getpid()));
    for (int attempt = 0; attempt < 5 && pid < 0; ++attempt) {
      port = 20000 + static_cast<int>(rng() % 30000);
      std::ofstream cfg(dir / "sshd_config");
      cfg << "Port " << port << "\nListenAddress 127.0.0.2\nListenAddress 127.0.0.3\n"
          << "HostKey " << (dir / "hostkey").string() << "\nAuthorizedKeysFile " << (dir / "authorized_keys").string()
          << "\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
          << "UsePAM no\nStrictModes no\nPidFile " << (dir / "sshd.pid").string() << "\n";
      cfg.close();
      pid_t p = ::fork();
      if (p == 0) {
        ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-f", (dir / "sshd_config").c_str(), "-E", (dir / "log").c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
      }
      ssh_command = "ssh -p " + std::to_string(port) + " -i " + (dir / "userkey").string() +
                    " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR";
      // Ready once a command goes through.
      for (int i = 0; i < 50; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        int st;
        if (::waitpid(p, &st, WNOHANG) == p) break;  // sshd died (port taken?)
        std::vector<std::string> argv;
        std::string w;
        for (char c : ssh_command + " ") {
          if (c == ' ') {
            if (!w.empty()) argv.push_back(w);
            w.clear();
          } else {
            w += c;
          }
        }
        argv.push_back("127.0.0.2");
        argv.push_back("true");
        nmad_test::run_options o;
        o.timeout_s = 10;
        o.search_path = true;
        if (nmad_test::run(argv, o).status == 0) {
          pid = p;
          break;
        }
      }
      if (pid < 0 && p > 0) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
    }
    if (pid < 0) {
      std::ifstream log(dir / "log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      error = "could not start sshd on 127.0.0.2/127.0.0.3: " + text;
    }
  }
  ~ssh_server() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

ssh_server& server() {
  static ssh_server s;
  return s;
}

nmad_test::run_result nmad_run(std::vector<std::string> args, double timeout = 120) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run")};
  argv.insert(argv.end(), args.begin(), args.end());
  nmad_test::run_options o;
  o.timeout_s = timeout;
  o.env = {{"NMAD_RUN_SSH", server().ssh_command}};
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// tools/test installs openssh-server, so an sshd that does not start is a
// failure, not a skip.
#define REQUIRE_SSHD()                                              \
  do {                                                              \
    if (!server().error.empty()) FAIL("no test sshd: " << server().error); \
  } while (0)

}  // namespace

TEST_CASE("host lists and hostfiles: slots fill in order, then wrap") {
  auto h = parse_host_list("a:2,b,c:3");
  REQUIRE(h.size() == 3);
  CHECK(total_slots(h) == 6);
  CHECK(place_ranks(h, 4) == std::vector<std::string>{"a", "a", "b", "c"});
  CHECK(place_ranks(h, 8) == std::vector<std::string>{"a", "a", "b", "c", "c", "c", "a", "a"});
  CHECK_THROWS_AS(parse_host_list("a:0"), usage_error);
  CHECK_THROWS_AS(parse_host_list(","), usage_error);
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path f = fs::path(tmp ? tmp : "/tmp") / "hosts.txt";
  std::ofstream(f) << "# cluster\nnode1 slots=2\n\nnode2:1  # one\nnode3\n";
  auto hf = parse_hostfile(f.string());
  REQUIRE(hf.size() == 3);
  CHECK(hf[0].name == "node1");
  CHECK(hf[0].slots == 2);
  CHECK(hf[1].slots == 1);
  std::ofstream(f) << "node1 cores=2\n";
  CHECK_THROWS_AS(parse_hostfile(f.string()), usage_error);
  CHECK_THROWS_AS(parse_hostfile("/nonexistent/hosts"), usage_error);
  CHECK(is_local_host("localhost"));
  CHECK(is_local_host("127.0.0.1"));
  CHECK_FALSE(is_local_host("127.0.0.2"));
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("nmad-run --host without -n starts one rank per slot; bad specs are usage errors") {
  auto r = nmad_run({"--host", "localhost:3", "/bin/true"});
  CHECK(r.status == 0);
  auto bad = nmad_run({"--host", "a:x", "/bin/true"});
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "slot count"));
}

TEST_CASE("ranks on two remote hosts (over ssh) and this one exchange 10,800 messages over tcp") {
  REQUIRE_SSHD();
  auto r = nmad_run({"--host", "127.0.0.2:2,127.0.0.3,localhost", "--timeout", "100", "-x", "NMAD_DRIVER=tcp",
                     nmad_test::runfile("tests/workers/engine_worker"), "stress", "900", "7"});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 4);
}

TEST_CASE("a failing remote rank is named with its host, and the job's status is its status") {
  REQUIRE_SSHD();
  auto r = nmad_run({"--host", "127.0.0.2,127.0.0.3", "--timeout", "60", "/bin/sh", "-c",
                     "[ \"$PMI_RANK\" = 1 ] && exit 3; sleep 30"});
  CHECK(r.status == 3);
  CHECK(contains(r.err, "rank 1 on 127.0.0.3"));
  CHECK(contains(r.err, "exited with status 3"));
}

namespace {
// Processes running `sleep MARKER` (on this machine, which is the remote
// host too).
int sleeps_with(const std::string& marker) {
  int n = 0;
  for (const auto& p : fs::directory_iterator("/proc")) {
    std::ifstream cmd(p.path() / "cmdline");
    std::string c;
    std::getline(cmd, c, '\0');
    std::string arg;
    std::getline(cmd, arg, '\0');
    if (c.find("sleep") != std::string::npos && arg == marker) ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("a timeout ends remote ranks too: nothing is left running on the remote host") {
  REQUIRE_SSHD();
  const std::string marker = "12345" + std::to_string(::getpid() % 1000);
  auto r = nmad_run({"--host", "127.0.0.2,127.0.0.3", "--timeout", "2", "/bin/sleep", marker}, 30);
  CHECK(r.status == 124);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(sleeps_with(marker) == 0);
  // Behind a wrapper, with a process in the background: the whole group.
  const std::string marker2 = "23456" + std::to_string(::getpid() % 1000);
  r = nmad_run({"--host", "127.0.0.2,127.0.0.3", "--timeout", "2", "/bin/sh", "-c",
                "sleep " + marker2 + " & sleep " + marker2 + "; echo after"},
               30);
  CHECK(r.status == 124);
  CHECK_FALSE(contains(r.out, "after"));
  for (int i = 0; i < 30 && sleeps_with(marker2) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(sleeps_with(marker2) == 0);
}

TEST_CASE("remote ranks get the job key, their PMI token and the PMI address on stdin, not on a command line") {
  REQUIRE_SSHD();
  // The remote shell ($PPID) and ssh on this side (its parent's parent,
  // since the remote host is this machine: found by its command line).
  auto r = nmad_run({"--host", "127.0.0.2", "/bin/sh", "-c",
                     "for v in \"$NMAD_JOB_KEY\" \"$NMAD_PMI_AUTH\" \"$PMI_PORT\"; do [ -n \"$v\" ] || exit 3; "
                     "grep -q -- \"$v\" /proc/$PPID/cmdline && exit 4; "
                     "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- \"$v\" && exit 5; done; "
                     "done; echo secrets-ok"});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "secrets-ok"));
}
