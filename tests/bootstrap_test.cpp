// Tests of the PMI-1 bootstrap client (core/bootstrap): singleton, protocol
// errors against a scripted fake launcher, and real jobs under nmad-run
// (PMI_FD and PMI_PORT) and MPICH's hydra when installed.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/bootstrap/bootstrap.hpp"
#include "core/bootstrap/pmi_wire.hpp"
#include "tests/test_paths.hpp"
#include "tools/launcher/launcher.hpp"

namespace {

// Environment variables the bootstrap looks at, cleared around each case.
const char* const kPmiVars[] = {"PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE", "NMAD_JOB_KEY",
                                "NMAD_PMI_TIMEOUT"};

struct clean_env {
  clean_env() {
    for (const char* v : kPmiVars) ::unsetenv(v);
  }
  ~clean_env() {
    for (const char* v : kPmiVars) ::unsetenv(v);
  }
};

std::vector<std::string> lines_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

bool is_hex32(const std::string& s) {
  return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// key -> value of the `KEY=value` words of a line.
std::map<std::string, std::string> words(const std::string& line) {
  std::map<std::string, std::string> m;
  std::istringstream in(line);
  std::string w;
  while (in >> w)
    if (auto eq = w.find('='); eq != std::string::npos) m[w.substr(0, eq)] = w.substr(eq + 1);
  return m;
}

// A fake launcher: the test writes the launcher's replies in advance into
// its end of a socketpair whose other end is PMI_FD.
struct fake_launcher {
  int fds[2] = {-1, -1};
  fake_launcher() {
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    ::setenv("PMI_FD", std::to_string(fds[1]).c_str(), 1);
    ::setenv("PMI_RANK", "0", 1);
    ::setenv("PMI_SIZE", "1", 1);
    ::setenv("NMAD_PMI_TIMEOUT", "0.5", 1);
  }
  ~fake_launcher() {
    if (fds[0] >= 0) ::close(fds[0]);
    // fds[1] is owned (and closed) by the bootstrap, or must be closed here
    // if the bootstrap failed before taking it: closing twice is harmless
    // for a socketpair number nobody reuses within the test.
  }
  void say(const std::string& s) { REQUIRE(::write(fds[0], s.data(), s.size()) == (ssize_t)s.size()); }
  std::string heard() {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fds[0], buf, sizeof buf, MSG_DONTWAIT)) > 0) s.append(buf, n);
    return s;
  }
  void say_ready() {
    say("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
    say("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n");
    say("cmd=my_kvsname kvsname=kvs_test\n");
  }
};

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("pmi wire: escaping round-trips any bytes and parse_line splits tokens") {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (std::string s : {std::string(), std::string("a b=c%d\n"), all}) {
    std::string e = nmad::pmi::escape(s);
    CHECK(e.find_first_of(" =\n\r\t") == std::string::npos);
    auto d = nmad::pmi::unescape(e);
    REQUIRE(d);
    CHECK(*d == s);
  }
  CHECK_FALSE(nmad::pmi::unescape("%4"));
  CHECK_FALSE(nmad::pmi::unescape("%zz"));
  std::string err;
  auto c = nmad::pmi::parse_line("cmd=get_result rc=0 msg=success value=a=b\r", &err);
  REQUIRE(c);
  CHECK(c->cmd == "get_result");
  CHECK(*c->find("rc") == "0");
  CHECK(*c->find("value") == "a=b");
  CHECK_FALSE(nmad::pmi::parse_line("garbage", &err));
  CHECK_FALSE(nmad::pmi::parse_line("key=v cmd=x", &err));
  CHECK_FALSE(nmad::pmi::parse_line("", &err));
}

TEST_CASE("singleton bootstrap: rank 0 of 1 with a local store and a job key") {
  clean_env env;
  auto b = nmad::bootstrap::from_environment();
  CHECK(b->rank() == 0);
  CHECK(b->size() == 1);
  b->put("a key", "a value = with spaces");
  b->fence();
  CHECK(b->get("a key") == "a value = with spaces");
  CHECK_THROWS_AS(b->get("missing"), std::runtime_error);
  std::string k = b->job_key();
  CHECK(is_hex32(k));
  CHECK(b->job_key() == k);
  CHECK(nmad::bootstrap::singleton()->job_key() != k);  // fresh random key
  b->finalize();
  b->finalize();

  ::setenv("NMAD_JOB_KEY", "key-from-env", 1);
  CHECK(nmad::bootstrap::singleton()->job_key() == "key-from-env");

  // PMI_SIZE > 1 without a way to reach the launcher is an error, not a singleton.
  ::unsetenv("NMAD_JOB_KEY");
  ::setenv("PMI_SIZE", "4", 1);
  CHECK(error_of([] { nmad::bootstrap::from_environment(); }).find("PMI_SIZE=4") != std::string::npos);
}

TEST_CASE("bootstrap client against a scripted launcher: protocol and errors") {
  clean_env env;
  SUBCASE("speaks PMI-1 and encodes keys and values") {
    fake_launcher f;
    f.say_ready();
    f.say("cmd=put_result rc=0 msg=success\n");
    f.say("cmd=barrier_out\n");
    f.say("cmd=get_result rc=0 msg=success value=vx%20%3Dy\n");
    f.say("cmd=put_result rc=-1 msg=duplicate_key\n");
    f.say("cmd=finalize_ack\n");
    auto b = nmad::bootstrap::from_environment();
    CHECK(b->rank() == 0);
    CHECK(b->size() == 1);
    b->put("my key", "v=1 2");
    b->fence();
    CHECK(b->get("other") == "x =y");
    std::string e;
    try {
      b->put("again", "v");
    } catch (const std::runtime_error& ex) {
      e = ex.what();
    }
    CHECK(e.find("rc=-1") != std::string::npos);
    b->finalize();
    std::string sent = f.heard();
    CHECK(sent.find("cmd=init pmi_version=1 pmi_subversion=1\n") == 0);
    CHECK(sent.find("cmd=get_maxes\n") != std::string::npos);
    CHECK(sent.find("cmd=get_my_kvsname\n") != std::string::npos);
    CHECK(sent.find("cmd=put kvsname=kvs_test key=my%20key value=vv%3D1%202\n") != std::string::npos);
    CHECK(sent.find("cmd=barrier_in\n") != std::string::npos);
    CHECK(sent.find("cmd=get kvsname=kvs_test key=other\n") != std::string::npos);
    CHECK(sent.find("cmd=finalize\n") != std::string::npos);
  }
  SUBCASE("launcher closes the connection (EOF)") {
    fake_launcher f;
    ::close(f.fds[0]);
    f.fds[0] = -1;
    std::string e = error_of([] { nmad::bootstrap::from_environment(); });
    CHECK(e.find("closed the connection") != std::string::npos);
  }
  SUBCASE("rc != 0") {
    fake_launcher f;
    f.say("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n");
    std::string e = error_of([] { nmad::bootstrap::from_environment(); });
    CHECK(e.find("rc=-1") != std::string::npos);
  }
  SUBCASE("malformed line") {
    fake_launcher f;
    f.say("this is not pmi\n");
    std::string e = error_of([] { nmad::bootstrap::from_environment(); });
    CHECK(e.find("malformed") != std::string::npos);
  }
  SUBCASE("unexpected reply") {
    fake_launcher f;
    f.say("cmd=barrier_out\n");
    std::string e = error_of([] { nmad::bootstrap::from_environment(); });
    CHECK(e.find("unexpected reply") != std::string::npos);
  }
  SUBCASE("missing key") {
    fake_launcher f;
    f.say_ready();
    f.say("cmd=get_result rc=-1 msg=key_x_not_found value=unknown\n");
    auto b = nmad::bootstrap::from_environment();
    CHECK_THROWS_WITH_AS(b->get("x"), doctest::Contains("no value was published under key 'x'"), std::runtime_error);
  }
  SUBCASE("silent launcher: timeout") {
    fake_launcher f;
    auto t0 = std::chrono::steady_clock::now();
    std::string e = error_of([] { nmad::bootstrap::from_environment(); });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(e.find("timed out") != std::string::npos);
    CHECK(s >= 0.4);
    CHECK(s < 10);
  }
  SUBCASE("PMI_FD that is not a socket / missing PMI_RANK") {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    ::setenv("PMI_FD", std::to_string(p[0]).c_str(), 1);
    ::setenv("PMI_RANK", "0", 1);
    ::setenv("PMI_SIZE", "1", 1);
    CHECK(error_of([] { nmad::bootstrap::from_environment(); }).find("not a socket") != std::string::npos);
    ::close(p[0]);
    ::close(p[1]);
    fake_launcher f;
    ::unsetenv("PMI_RANK");
    CHECK(error_of([] { nmad::bootstrap::from_environment(); }).find("PMI_RANK") != std::string::npos);
    ::close(f.fds[1]);
  }
}

TEST_CASE("4 ranks under nmad-run: put / fence / get of tricky values") {
  auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "4", "--timeout", "60",
                           nmad_test::runfile("tests/pmi_worker"), "exchange"},
                          nmad_test::run_options().timeout(90));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 0);
  auto ok = lines_with(r.out, "EXCHANGE_OK");
  CHECK(ok.size() == 4);
  std::set<std::string> ranks;
  for (const auto& l : ok) {
    ranks.insert(words(l)["rank"]);
    CHECK(words(l)["size"] == "4");
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2", "3"});
}

TEST_CASE("PMI_PORT mode, and long values split under a small vallen_max") {
  SUBCASE("nmad-run --pmi-port") {
    auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "--pmi-port", "-n", "3", "--timeout", "60",
                             nmad_test::runfile("tests/pmi_worker"), "exchange"},
                            nmad_test::run_options().timeout(90));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 0);
    CHECK(lines_with(r.out, "EXCHANGE_OK").size() == 3);
  }
  SUBCASE("launcher library, vallen_max=40") {
    nmad::launcher::job_options o;
    o.nprocs = 2;
    o.argv = {nmad_test::runfile("tests/pmi_worker"), "exchange"};
    o.vallen_max = 40;
    o.keylen_max = 64;
    o.timeout_s = 60;
    std::vector<std::string> reports;
    o.report = [&](const std::string& s) { reports.push_back(s); };
    auto res = nmad::launcher::run_job(o);
    for (const auto& s : reports) MESSAGE(s);
    CHECK(res.exit_code == 0);
    CHECK(reports.empty());
  }
}

TEST_CASE("job_key: identical on all ranks, fresh per job, NMAD_JOB_KEY wins") {
  auto jobkeys = [](std::vector<std::string> extra) {
    std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", "4", "--timeout", "60"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(nmad_test::runfile("tests/pmi_worker"));
    argv.push_back("jobkey");
    auto r = nmad_test::run(argv, nmad_test::run_options().timeout(90));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 0);
    std::set<std::string> keys;
    auto lines = lines_with(r.out, "JOBKEY");
    CHECK(lines.size() == 4);
    for (const auto& l : lines) keys.insert(words(l)["key"]);
    CHECK(keys.size() == 1);
    return keys.empty() ? std::string() : *keys.begin();
  };
  std::string k1 = jobkeys({});
  std::string k2 = jobkeys({});
  CHECK(is_hex32(k1));
  CHECK(is_hex32(k2));
  CHECK(k1 != k2);
  CHECK(jobkeys({"-x", "NMAD_JOB_KEY=chosen-by-user"}) == "chosen-by-user");
  // Without NMAD_JOB_KEY, rank 0 draws it and publishes it through the KVS.
  std::string drawn = jobkeys({"-x", "NMAD_JOB_KEY="});
  CHECK(is_hex32(drawn));
}

TEST_CASE("interoperability with MPICH hydra (mpiexec.hydra)") {
  std::string hydra;
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/bin:/usr/local/bin";
  std::istringstream in(dirs);
  std::string d;
  while (std::getline(in, d, ':'))
    if (!d.empty() && ::access((d + "/mpiexec.hydra").c_str(), X_OK) == 0) {
      hydra = d + "/mpiexec.hydra";
      break;
    }
  if (hydra.empty()) {
    MESSAGE("mpiexec.hydra not found: skipping the hydra interoperability test");
    return;
  }
  auto o = nmad_test::run_options().timeout(90).unset("NMAD_JOB_KEY").unset("PMI_FD").unset("PMI_PORT");
  auto r = nmad_test::run({hydra, "-n", "2", nmad_test::runfile("tests/pmi_worker"), "exchange"}, o);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 0);
  CHECK(lines_with(r.out, "EXCHANGE_OK").size() == 2);

  auto k = nmad_test::run({hydra, "-n", "2", nmad_test::runfile("tests/pmi_worker"), "jobkey"}, o);
  INFO("stdout: " << k.out << "\nstderr: " << k.err);
  CHECK(k.status == 0);
  auto lines = lines_with(k.out, "JOBKEY");
  REQUIRE(lines.size() == 2);
  CHECK(words(lines[0])["key"] == words(lines[1])["key"]);
  CHECK(is_hex32(words(lines[0])["key"]));
}
