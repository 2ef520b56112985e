// Test worker for the bootstrap and nmad-run tests: `pmi_worker SCENARIO
// [args...]`. Prints machine-checkable lines on stdout; exits non-zero with a
// WORKER_ERROR line on any unexpected exception.
//
// If $WORKER_PID_DIR is set, writes its pid to $WORKER_PID_DIR/pid.<PMI_RANK>
// first (tests use it to check that no rank outlives the job).
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/bootstrap/bootstrap.hpp"

namespace {

int arg_int(int argc, char** argv, int i, int dflt) { return i < argc ? std::atoi(argv[i]) : dflt; }

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

void say(const std::string& line) {
  std::string l = line + "\n";
  ssize_t r = ::write(STDOUT_FILENO, l.data(), l.size());
  (void)r;
}

// Values that PMI cannot carry as such, plus long ones (chunked).
std::string tricky_value(int rank, int which) {
  switch (which) {
    case 0: return "rank " + std::to_string(rank) + " says: a=b c==d %41 100% \t tab\nnewline ~ caf\xc3\xa9 ;&|";
    case 1: return "";
    case 2: {
      std::string s;
      for (int i = 0; s.size() < 5000; ++i) s += std::to_string(rank * 100000 + i) + (i % 7 ? " " : "=");
      return s;
    }
    default: return std::string("nul\0inside", 10) + std::to_string(rank);
  }
}

std::string tricky_key(int rank, int which) {
  return which == 0 ? "key with spaces=and equals " + std::to_string(rank) : "k" + std::to_string(which) + "." + std::to_string(rank);
}

int exchange(nmad::bootstrap& b) {
  const int r = b.rank(), n = b.size();
  for (int w = 0; w < 4; ++w) b.put(tricky_key(r, w), tricky_value(r, w));
  b.fence();
  for (int q = 0; q < n; ++q)
    for (int w = 0; w < 4; ++w) {
      std::string got = b.get(tricky_key(q, w));
      if (got != tricky_value(q, w)) {
        say("MISMATCH rank=" + std::to_string(r) + " key='" + tricky_key(q, w) + "' got '" + got.substr(0, 80) + "'");
        return 1;
      }
    }
  // A missing key must throw.
  try {
    b.get("no such key");
    say("MISSING_KEY_DID_NOT_THROW rank=" + std::to_string(r));
    return 1;
  } catch (const std::runtime_error&) {
  }
  // Second round: fences can be repeated.
  b.put("round2." + std::to_string(r), std::to_string(r * r));
  b.fence();
  for (int q = 0; q < n; ++q)
    if (b.get("round2." + std::to_string(q)) != std::to_string(q * q)) {
      say("MISMATCH2 rank=" + std::to_string(r));
      return 1;
    }
  b.finalize();
  b.finalize();  // idempotent
  say("EXCHANGE_OK rank=" + std::to_string(r) + " size=" + std::to_string(n));
  return 0;
}

// Connects to $PMI_PORT as an impostor, sends `line`, and returns what the
// launcher answered before closing ("" when it just closed).
std::string knock_pmi(const std::string& line) {
  const std::string spec = std::getenv("PMI_PORT") ? std::getenv("PMI_PORT") : "";
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("impostor: no PMI_PORT");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(spec.substr(0, colon).c_str(), spec.substr(colon + 1).c_str(), &hints, &res) != 0 || !res)
    throw std::runtime_error("impostor: cannot resolve PMI_PORT");
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) throw std::runtime_error("impostor: connect");
  ::freeaddrinfo(res);
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("impostor: send");
  std::string got;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) throw std::runtime_error("impostor: the launcher neither answered nor closed");
    char buf[256];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return got;
}

// `impostor DIR`: rank 0 first tries to take rank 1's place on the PMI port
// (a guessed token, no token, junk), then lets rank 1 start (DIR/go); every
// rank must then get its own rank and the job complete.
int impostor(int argc, char** argv) {
  const std::string dir = argc > 2 ? argv[2] : ".";
  const std::string rank_env = std::getenv("PMI_RANK") ? std::getenv("PMI_RANK") : "?";
  if (rank_env == "0") {
    const char* tries[] = {"cmd=initack pmiid=1 auth=0123456789abcdef0123456789abcdef\n", "cmd=initack pmiid=1\n",
                           "cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=initack pmiid=0\n"};
    for (const char* t : tries) {
      std::string got = knock_pmi(t);
      if (got.find("cmd=set rank=") != std::string::npos) {
        say("IMPOSTOR_ACCEPTED: " + std::string(t));
        return 1;
      }
    }
    say("IMPOSTORS_REFUSED");
    std::ofstream(dir + "/go") << "go\n";
  } else if (rank_env == "1") {
    for (int i = 0; i < 3000 && !std::ifstream(dir + "/go"); ++i) sleep_s(0.01);
  }
  auto b = nmad::bootstrap::from_environment();
  const std::string rs = std::to_string(b->rank());
  if (rs != rank_env) {
    say("WRONG_RANK env=" + rank_env + " got=" + rs);
    return 1;
  }
  b->put("who." + rs, "pid " + std::to_string(::getpid()));
  b->fence();
  for (int q = 0; q < b->size(); ++q) (void)b->get("who." + std::to_string(q));
  b->finalize();
  say("IMPOSTOR_JOB_OK rank=" + rs + " size=" + std::to_string(b->size()));
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pmi_worker SCENARIO [args]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  if (const char* dir = std::getenv("WORKER_PID_DIR")) {
    // Written under a temporary name and renamed, so a rank killed while
    // writing (a job timing out during start-up) never leaves a file that
    // exists but is empty.
    const char* rk = std::getenv("PMI_RANK");
    const std::string name = std::string(dir) + "/pid." + (rk ? rk : "0");
    { std::ofstream(name + ".tmp") << ::getpid() << "\n"; }
    std::rename((name + ".tmp").c_str(), name.c_str());
  }
  if (scenario == "env") {  // no PMI at all
    for (int i = 2; i < argc; ++i) {
      const char* v = std::getenv(argv[i]);
      say(std::string("ENV rank=") + (std::getenv("PMI_RANK") ? std::getenv("PMI_RANK") : "?") + " " + argv[i] +
          "=" + (v ? v : "(unset)"));
    }
    return 0;
  }
  if (scenario == "plain_exit") return arg_int(argc, argv, 2, 0);
  if (scenario == "impostor") return impostor(argc, argv);

  auto b = nmad::bootstrap::from_environment();
  const int r = b->rank();
  const std::string rs = std::to_string(r);

  if (scenario == "hello") {
    say("HELLO rank=" + rs + " size=" + std::to_string(b->size()));
    b->finalize();
    return 0;
  }
  if (scenario == "exchange") return exchange(*b);
  if (scenario == "no_finalize") {  // no_finalize TARGET: TARGET exits 0 without PMI finalize
    const int target = arg_int(argc, argv, 2, 1);
    say("NO_FINALIZE rank=" + rs);
    if (r != target) b->finalize();
    return 0;
  }
  if (scenario == "jobkey") {
    std::string k = b->job_key();
    if (b->job_key() != k) throw std::runtime_error("job_key() changed between calls");
    say("JOBKEY rank=" + rs + " key=" + k);
    b->finalize();
    return 0;
  }
  if (scenario == "exit") {  // exit CODE TARGET: TARGET exits CODE, the others fence
    int code = arg_int(argc, argv, 2, 3), target = arg_int(argc, argv, 3, 1);
    if (r == target) std::exit(code);
    try {
      b->fence();
      say("FENCE_DONE rank=" + rs);
      return 0;
    } catch (const std::exception& e) {
      say("FENCE_FAILED rank=" + rs + ": " + e.what());
      return 1;
    }
  }
  if (scenario == "kill9") {  // kill9 TARGET [fence|sleep]
    int target = arg_int(argc, argv, 2, 1);
    std::string others = argc > 3 ? argv[3] : "sleep";
    b->fence();  // everyone is up (and has written its pid file)
    if (r == target) ::kill(::getpid(), SIGKILL);
    if (others == "fence") {
      try {
        b->fence();
      } catch (const std::exception& e) {
        say("FENCE_FAILED rank=" + rs + ": " + e.what());
        return 1;
      }
    }
    sleep_s(60);
    say("SURVIVED rank=" + rs);
    return 0;
  }
  if (scenario == "abort") {  // abort TARGET CODE
    int target = arg_int(argc, argv, 2, 0), code = arg_int(argc, argv, 3, 5);
    b->fence();  // everyone is up (and has written its pid file)
    if (r == target) {
      b->abort(code, "worker gave up: x=y and z");
      std::exit(code);
    }
    sleep_s(60);
    say("SURVIVED rank=" + rs);
    return 0;
  }
  if (scenario == "sleep") {  // sleep SECONDS
    sleep_s(std::atof(argc > 2 ? argv[2] : "60"));
    b->finalize();
    say("SLEPT rank=" + rs);
    return 0;
  }
  if (scenario == "ignore_term") {  // ignores SIGTERM, so only SIGKILL ends it
    ::signal(SIGTERM, SIG_IGN);
    say("IGNORING_TERM rank=" + rs);
    sleep_s(60);
    return 0;
  }
  if (scenario == "signal_launcher") {  // signal_launcher [TERM|KILL]: rank 0 signals its launcher, all sleep
    const bool kill9 = argc > 2 && std::string(argv[2]) == "KILL";
    b->fence();  // everyone is up (and has written its pid file)
    if (r == 0) ::kill(::getppid(), kill9 ? SIGKILL : SIGTERM);
    sleep_s(60);
    say("SURVIVED rank=" + rs);
    return 0;
  }
  if (scenario == "early_exit0") {  // TARGET exits 0 before the fence the others enter
    int target = arg_int(argc, argv, 2, 0);
    if (r == target) return 0;
    try {
      b->fence();
      say("FENCE_DONE rank=" + rs);
      return 0;
    } catch (const std::exception& e) {
      say("FENCE_FAILED rank=" + rs + ": " + e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "pmi_worker: unknown scenario '%s'\n", scenario.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    say(std::string("WORKER_ERROR rank=") + (std::getenv("PMI_RANK") ? std::getenv("PMI_RANK") : "?") + ": " +
        e.what());
    return 1;
  }
}
