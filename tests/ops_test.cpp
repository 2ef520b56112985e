// Operations robustness, with real processes under nmad-run: strangers on
// the tcp port (junk, held connections) while ranks exchange checked
// messages, logging to a stderr pipe that nobody reads, a full one, or one
// whose reader is gone (tests/workers/ops_worker.cpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::count;

enum class stderr_mode { unread, full, closed };

struct result {
  int status = -1;
  bool timed_out = false;
  std::string out;
  std::string err;  // unread mode: what the pipe held at the end
};

// Runs argv with stdout read by us and stderr going to a pipe in `mode`.
result run_with_stderr(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                       stderr_mode mode, double timeout_s = 180) {
  int outp[2], errp[2];
  REQUIRE(::pipe2(outp, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(errp, O_CLOEXEC) == 0);
  if (mode == stderr_mode::full) {  // no room left at all
    ::fcntl(errp[1], F_SETFL, O_NONBLOCK);
    std::string filler(4096, 'x');
    while (::write(errp[1], filler.data(), filler.size()) > 0) {
    }
    ::fcntl(errp[1], F_SETFL, 0);
  }
  if (mode == stderr_mode::closed) {
    ::close(errp[0]);
    errp[0] = -1;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(outp[1], STDOUT_FILENO);
    ::dup2(errp[1], STDERR_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(outp[1]);
  ::close(errp[1]);
  result r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{outp[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(outp[0], buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  ::close(outp[0]);
  if (errp[0] >= 0) {
    ::fcntl(errp[0], F_SETFL, O_NONBLOCK);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(errp[0], buf, sizeof buf)) > 0) r.err.append(buf, static_cast<std::size_t>(n));
    ::close(errp[0]);
  }
  return r;
}

std::vector<std::string> job(int n, std::vector<std::string> args) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(n), "--timeout", "150",
                                   nmad_test::runfile("tests/workers/ops_worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

const std::vector<std::pair<std::string, std::string>> kTcp = {{"NMAD_DRIVER", "tcp"}};

}  // namespace

TEST_CASE("2000 junk connections while stderr goes to a pipe nobody reads: the job completes, refusals rate-limited") {
  auto r = run_with_stderr(job(2, {"junk", "2000", "2000"}), kTcp, stderr_mode::unread);
  INFO("stdout: " << r.out << "\nstderr: " << r.err.substr(0, 4000));
  CHECK_FALSE(r.timed_out);
  CHECK(r.status == 0);
  CHECK(count(r.out, "JUNK_OK rank=") == 2);
  CHECK(r.out.find("JUNK_OK rank=1 connections=2000") != std::string::npos);
  // The first 5 refusals, then one summary of the others (written when the
  // session closed), not 2000 lines.
  const int refusals = count(r.err, "tcp warning: refused connection from 127.0.0.1:");
  CHECK(refusals >= 1);
  CHECK(refusals <= 10);
  CHECK(r.err.find("suppressed") != std::string::npos);
}

TEST_CASE("stderr to a pipe that is already full, or whose reader is gone: junk connections neither block nor kill") {
  for (auto mode : {stderr_mode::full, stderr_mode::closed}) {
    auto r = run_with_stderr(job(2, {"junk", "1000", "1000"}), kTcp, mode);
    INFO("mode " << (mode == stderr_mode::full ? "full" : "closed") << "\nstdout: " << r.out);
    CHECK_FALSE(r.timed_out);
    CHECK(r.status == 0);  // not 141 (SIGPIPE)
    CHECK(count(r.out, "JUNK_OK rank=") == 2);
  }
}

TEST_CASE("3000 held connections during a message stream: every message correct, the per-address cap enforced") {
  auto env = kTcp;
  env.emplace_back("NMAD_TCP_PENDING_PER_HOST", "1000");
  env.emplace_back("NMAD_TCP_PENDING_MAX", "4000");  // the per-address cap is what is checked here
  env.emplace_back("NMAD_TCP_HANDSHAKE_TIMEOUT_MS", "600000");  // held for the whole stream
  auto r = run_with_stderr(job(2, {"held", "3000", "20000"}), env, stderr_mode::unread);
  INFO("stdout: " << r.out << "\nstderr: " << r.err.substr(0, 4000));
  CHECK_FALSE(r.timed_out);
  CHECK(r.status == 0);
  CHECK(count(r.out, "HELD_OK rank=") == 2);
  // Rank 0 kept 1000 (the cap) and closed the other 2000.
  CHECK(r.out.find("\"held\":3000,\"refused\":2000,") != std::string::npos);
  CHECK(r.err.find("handshakes already pending from that address (NMAD_TCP_PENDING_PER_HOST)") != std::string::npos);
  CHECK(count(r.err, "handshakes already pending") <= 10);
}

TEST_CASE("exit without finalize: an MPI rank returning 0 without MPI_Finalize, a native rank not closing its session") {
  SUBCASE("MPI") {
    std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", "3", "--timeout", "60",
                                     nmad_test::runfile("tests/mpi/no_finalize")};
    auto r = run_with_stderr(argv, {}, stderr_mode::unread, 90);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(count(r.out, "NO_FINALIZE_STARTED rank ") == 3);
    CHECK(r.err.find("nmad-run: rank 1 (pid ") != std::string::npos);
    CHECK(r.err.find("exited with status 0 without calling MPI_Finalize") != std::string::npos);
    CHECK(count(r.err, "without calling MPI_Finalize") == 1);
  }
  SUBCASE("native session") {
    auto r = run_with_stderr(job(2, {"no_finalize", "1"}), {}, stderr_mode::unread, 90);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("nmad-run: rank 1 (pid ") != std::string::npos);
    CHECK(r.err.find("without calling MPI_Finalize (nor closing its nmad session)") != std::string::npos);
  }
  SUBCASE("every session closed: status 0") {
    auto r = run_with_stderr(job(2, {"no_finalize", "5"}), {}, stderr_mode::unread, 90);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 0);
  }
}
