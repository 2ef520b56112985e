// Denial of service from the same host: strangers flooding nmad-run's PMI
// port during start-up, and a rank's tcp listener, with connections that
// never say anything.
//  * PMI server: silent connections, however many, never push out a
//    connection that identifies itself, and the ones past the limits go;
//  * PMI port: three local processes open connections to the port as fast
//    as they can (found as any user finds it, from the listening sockets)
//    while the ranks of a --pmi-port job start; the job must start and end
//    normally, 5 times of 5.
//  * tcp listener: hundreds of idle connections from 5 loopback addresses
//    to a rank whose descriptor table is small; the rank must keep its
//    descriptors, not spin on accept errors (its CPU time is measured
//    while it waits), and go on exchanging messages.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_paths.hpp"
#include "tools/launcher/pmi_server.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using nmad_test::count;
using nmad_test::slurp;

struct temp_dir {
  std::string path;
  temp_dir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nmad_denial_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The TCP ports process `pid` listens on: its socket inodes matched against
// the LISTEN entries of /proc/net/tcp (what `ss -tln` shows every user).
std::vector<int> listening_ports(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code ec2;
    const std::string target = fs::read_symlink(e.path(), ec2).string();
    if (!ec2 && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    in >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (st == "0A" && inodes.count(inode))
      ports.push_back(static_cast<int>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
  }
  return ports;
}

// A process that opens connections to 127.0.0.1:port as fast as it can,
// holding the last `hold` of them, never sending a byte.
pid_t start_flooder(int port, std::size_t hold) {
  const pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p != 0) return p;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::deque<int> held;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd >= 0) {
      (void)::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      held.push_back(fd);
    }
    while (!held.empty() && (held.size() > hold || fd < 0)) {
      ::close(held.front());
      held.pop_front();
    }
  }
}

// Starts argv with stdout/stderr going to files of `dir`; returns the pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& dir,
            const std::vector<std::string>& env_add = {}, rlim_t nofile = 0) {
  const pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p != 0) return p;
  ::setpgid(0, 0);
  const int out = ::open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int err = ::open((dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(out, 1);
  ::dup2(err, 2);
  const int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull, 0);
  for (const auto& e : env_add) ::putenv(const_cast<char*>(e.c_str()));
  if (nofile) {
    rlimit rl{nofile, nofile};
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  ::execv(a[0], a.data());
  ::_exit(127);
}

// Waits for `pid` at most `limit`; kills its process group when it takes
// longer. Returns the exit status (128+signal), or -1 on timeout.
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int st = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > until) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void end_process(pid_t p) {
  ::kill(p, SIGKILL);
  ::waitpid(p, nullptr, 0);
}

}  // namespace

TEST_CASE("PMI port flooded by three local processes during start-up: the job starts, 5 times of 5") {
  const std::string run = nmad_test::runfile("tools/nmad-run");
  const std::string worker = nmad_test::runfile("tests/pmi_worker");
  int started = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    CAPTURE(attempt);
    temp_dir d;
    // The ranks connect once the flood is on (DIR/go).
    const pid_t launcher = spawn({run, "-n", "3", "--pmi-port", "--timeout", "30", "/bin/sh", "-c",
                                  "while [ ! -e \"$1/go\" ]; do sleep 0.01; done; exec \"$0\" hello", worker, d.path},
                                 d.path);
    std::vector<int> ports;
    for (int i = 0; i < 500 && ports.empty(); ++i) {
      ports = listening_ports(launcher);
      if (ports.empty()) std::this_thread::sleep_for(2ms);
    }
    REQUIRE(ports.size() == 1);
    std::vector<pid_t> flooders;
    for (int i = 0; i < 3; ++i) flooders.push_back(start_flooder(ports[0], 200));
    std::this_thread::sleep_for(200ms);
    std::ofstream(d.path + "/go") << "go\n";
    const int status = wait_for(launcher, 40s);
    for (pid_t f : flooders) end_process(f);
    const std::string out = slurp(d.path + "/out"), err = slurp(d.path + "/err");
    INFO("stdout:\n" << out << "\nstderr:\n" << err);
    CHECK(status == 0);
    CHECK(count(out, "HELLO rank=") == 3);
    for (int r = 0; r < 3; ++r) CHECK(count(out, "HELLO rank=" + std::to_string(r) + " size=3\n") == 1);
    // Strangers turned away are reported within a rate limit.
    CHECK(count(err, "PMI port: refused a connection from 127.0.0.1:") <= 10);
    started += status == 0;
  }
  CHECK(started == 5);
}

namespace {

int connect_to(int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  return fd;
}

// What the server sent on fd so far; *closed: it also closed it.
std::string take(int fd, bool* closed) {
  std::string s;
  char buf[4096];
  *closed = false;
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      s.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    *closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    return s;
  }
}

}  // namespace

TEST_CASE("PMI server: silent connections never push out one that identifies itself; past the limits they go") {
  nmad::launcher::pmi_server srv(2, "kvs_d");
  srv.set_auth_tokens({"tok0", "tok1"});
  std::vector<std::string> reports;
  srv.on_report = [&](const std::string& s) { reports.push_back(s); };
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(lfd, 1024) == 0);
  REQUIRE(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int port = ntohs(a.sin_port);
  srv.add_listener(lfd);
  auto pump = [&] {
    for (int i = 0; i < 10; ++i) {
      std::vector<pollfd> fds;
      srv.fill_pollfds(fds);
      if (::poll(fds.data(), fds.size(), 10) > 0) srv.handle(fds, 0);
    }
  };
  auto count_closed = [&](const std::vector<int>& fds) {
    int n = 0;
    bool closed = false;
    for (int fd : fds) n += (take(fd, &closed), closed);
    return n;
  };

  // 40 silent connections from loopback: 32 are held, the 8 newest are
  // turned away (every held one is younger than 500 ms).
  std::vector<int> silent;
  for (int i = 0; i < 40; ++i) silent.push_back(connect_to(port));
  pump();
  CHECK(count_closed(silent) == 8);

  // Rank 0 connects behind them and identifies itself at once: taken.
  const int rank0 = connect_to(port);
  const std::string hello = "cmd=initack pmiid=0 auth=tok0\n";
  REQUIRE(::send(rank0, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size()));
  pump();
  bool closed = false;
  CHECK(take(rank0, &closed) == "cmd=initack\ncmd=set size=2\ncmd=set rank=0\ncmd=set debug=0\n");
  CHECK_FALSE(closed);
  CHECK(srv.connected(0));

  // Once the held ones have been silent for 500 ms, each newcomer pushes
  // out the oldest of them, never rank 0.
  std::this_thread::sleep_for(600ms);
  std::vector<int> late;
  for (int i = 0; i < 5; ++i) late.push_back(connect_to(port));
  pump();
  CHECK(count_closed(late) == 0);
  CHECK(count_closed(silent) == 8 + 5);
  const std::string maxes = "cmd=get_maxes\n";
  REQUIRE(::send(rank0, maxes.data(), maxes.size(), 0) == static_cast<ssize_t>(maxes.size()));
  pump();
  CHECK(take(rank0, &closed).rfind("cmd=maxes ", 0) == 0);
  CHECK_FALSE(closed);

  // A wrong token is told why before the close (the client says so).
  const int wrong = connect_to(port);
  const std::string bad = "cmd=initack pmiid=1 auth=nope\n";
  REQUIRE(::send(wrong, bad.data(), bad.size(), 0) == static_cast<ssize_t>(bad.size()));
  pump();
  CHECK(take(wrong, &closed) == "cmd=initack rc=-1 msg=wrong_token\n");
  CHECK(closed);
  CHECK_FALSE(srv.connected(1));
  CHECK(srv.refused() == 8 + 5 + 1);
  // Reported within the rate limit, each naming the reason.
  REQUIRE(!reports.empty());
  CHECK(reports[0].find("more than 32 unidentified connections from loopback addresses") != std::string::npos);

  for (int fd : silent) ::close(fd);
  for (int fd : late) ::close(fd);
  ::close(rank0);
  ::close(wrong);
  srv.close_all();
}

TEST_CASE("tcp listener: 500 idle connections from 5 addresses against 256 descriptors; the rank sleeps and goes on") {
  // Rank 1 has 256 descriptors; rank 0 holds 100 idle connections from
  // each of 127.0.0.1-5 to its listener for 1.5 s while rank 1 waits.
  auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout", "60",
                           nmad_test::runfile("tests/workers/engine_worker"), "flood", "256", "100", "1500"},
                          nmad_test::run_options().timeout(90).set("NMAD_DRIVER", "tcp"));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  CHECK(count(r.out, "flood: 500 idle connections held") == 1);
  CHECK(count(r.out, "job unaffected") == 2);
  const auto at = r.out.find("flood: rank 1 waited ");
  REQUIRE(at != std::string::npos);
  double wall = 0, cpu = 0;
  REQUIRE(std::sscanf(r.out.c_str() + at, "flood: rank 1 waited %lf s using %lf s of CPU", &wall, &cpu) == 2);
  CHECK(wall >= 1.0);
  CHECK(cpu < 0.2 * wall);  // spinning on accept errors took the whole wait
  // What the rank says about it stays within its rate limits.
  CHECK(count(r.err, "\n") < 40);
}
