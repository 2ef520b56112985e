// Knobs as jobs meet them: a bad value stops start-up with one message
// naming the variable (never a hang, never a silent default), whether
// nmad-run sees it first or only the ranks do (hydra, a program run
// alone); a misspelled name is reported once with the knob it resembles;
// 64-bit timeouts do not wrap; a huge synthetic topology is refused at
// once; nmad-info --config shows every knob with its value and source.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/mpi_run.hpp"
#include "tests/test_paths.hpp"

using namespace nmad_mpi_test;

namespace {

using env_list = std::vector<std::pair<std::string, std::string>>;

std::string program(const std::string& name) { return nmad_test::runfile("tests/mpi/" + name); }

nmad_test::run_result run_job(const std::string& prog, int n, env_list env, std::vector<std::string> extra = {},
                              double timeout_s = 40) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(n), "--timeout", "30"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(program(prog));
  nmad_test::run_options o;
  o.timeout_s = timeout_s;
  o.env = std::move(env);
  return nmad_test::run(argv, o);
}

std::string hydra() {
  for (const char* p : {"/usr/bin/mpiexec.hydra", "/usr/local/bin/mpiexec.hydra"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

// Under MPICH's launcher: nothing checks the environment before the ranks.
nmad_test::run_result run_hydra(const std::string& prog, int n, env_list env) {
  const std::string h = hydra();
  REQUIRE_MESSAGE(!h.empty(), "mpiexec.hydra not found: tools/test installs it (Debian package mpich)");
  nmad_test::run_options o;
  o.timeout_s = 60;
  o.env = std::move(env);
  o.unset_env = {"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NMAD_JOB_KEY", "NMAD_RUN_SIZE"};
  return nmad_test::run({h, "-launcher", "fork", "-n", std::to_string(n), program(prog)}, o);
}

// The program alone (a singleton MPI process).
nmad_test::run_result run_alone(const std::string& prog, env_list env) {
  nmad_test::run_options o;
  o.timeout_s = 30;
  o.env = std::move(env);
  o.unset_env = {"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NMAD_JOB_KEY", "NMAD_RUN_SIZE"};
  return nmad_test::run({program(prog)}, o);
}

nmad_test::run_result nmad_info(std::vector<std::string> args, env_list env = {}) {
  args.insert(args.begin(), nmad_test::runfile("tools/nmad-info"));
  nmad_test::run_options o;
  o.timeout_s = 30;
  o.env = std::move(env);
  return nmad_test::run(args, o);
}

struct bad_knob {
  const char* name;
  const char* value;
  const char* message;  // the whole message
};

// Values that once passed as 0, as 1 GiB, as a default or as garbage.
const bad_knob kBad[] = {
    {"NMAD_SHM_CONNECT_TIMEOUT_MS", "", "NMAD_SHM_CONNECT_TIMEOUT_MS=\"\": expected a duration in ms, 1..3600000"},
    {"NMAD_SHM_CONNECT_TIMEOUT_MS", "abc", "NMAD_SHM_CONNECT_TIMEOUT_MS=\"abc\": expected a duration in ms, 1..3600000"},
    {"NMAD_SHM_CONNECT_TIMEOUT_MS", "-5", "NMAD_SHM_CONNECT_TIMEOUT_MS=\"-5\": expected a duration in ms, 1..3600000"},
    {"NMAD_SHM_RING", "-1",
     "NMAD_SHM_RING=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 256K..1G"},
    {"NMAD_RDV_THRESHOLD", "-1",
     "NMAD_RDV_THRESHOLD=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 0..1G, or auto"},
    {"NMAD_COPY_THRESHOLD", "-1",
     "NMAD_COPY_THRESHOLD=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 0..1G"},
    {"NMAD_SHM_CMA", "no", "NMAD_SHM_CMA=\"no\": expected 0 or 1"},
    {"NMAD_LOG", "verbose", "NMAD_LOG=\"verbose\": expected one of error, warn, info, debug"},
    {"NMAD_FINALIZE_TIMEOUT_MS", "99999999999999999999",
     "NMAD_FINALIZE_TIMEOUT_MS=\"99999999999999999999\": expected a duration in ms, 0..1000000000000"},
    {"NMAD_COLL_FINALIZE_TIMEOUT_MS", "10s",
     "NMAD_COLL_FINALIZE_TIMEOUT_MS=\"10s\": expected a duration in ms, 0..1000000000000"},
    {"NMAD_COLL_BCAST_SMALL", "-1",
     "NMAD_COLL_BCAST_SMALL=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 0..1T"},
    // A knob of a driver this job does not use is checked all the same.
    {"NMAD_OFI_RMA", "maybe", "NMAD_OFI_RMA=\"maybe\": expected one of auto, on, off"},
};

}  // namespace

TEST_CASE("NMAD_FINALIZE_TIMEOUT_MS=3000000000: MPI_Finalize still flushes the sends it owes (shm, tcp)") {
  for (const std::string driver : {"shm", "tcp"}) {
    for (const std::string timeout : {"3000000000", "30000"}) {
      CAPTURE(driver);
      CAPTURE(timeout);
      auto r = run_job("finalize_flush", 2, {{"NMAD_DRIVER", driver}, {"NMAD_FINALIZE_TIMEOUT_MS", timeout}});
      INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
      CHECK(r.status == 0);
      CHECK(count(r.out, "PASS finalize_flush rank") == 2);
      CHECK_FALSE(contains(r.err, "dropping them"));
    }
  }
}

TEST_CASE("nmad-run refuses a bad value before starting a rank: one message naming it, exit 2") {
  for (const bad_knob& b : kBad) {
    const std::string name = b.name, value = b.value;
    CAPTURE(name);
    CAPTURE(value);
    auto r = run_job("hello", 2, {{b.name, b.value}, {"NMAD_DRIVER", "shm"}});
    INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, b.message) == 1);
    CHECK(r.err.rfind(std::string("nmad-run: ") + b.message, 0) == 0);
    CHECK_FALSE(contains(r.out, "Hello from rank"));  // no rank started
    CHECK(r.seconds < 10);
  }
  // The same given with -x, for the ranks only.
  auto r = run_job("hello", 2, {}, {"-x", "NMAD_SHM_RING=-1"});
  INFO("stderr:\n" << r.err);
  CHECK(r.status == 2);
  CHECK(contains(r.err, kBad[3].message));
  // Several bad values: all named, in one message.
  auto two = run_job("hello", 2, {{"NMAD_SHM_CMA", "no"}, {"NMAD_LOG", "verbose"}});
  CHECK(two.status == 2);
  CHECK(contains(two.err, std::string(kBad[6].message) + "; " + kBad[7].message));
}

TEST_CASE("the ranks refuse a bad value themselves: under hydra and alone, no hang, no default") {
  for (const bad_knob& b : {kBad[1], kBad[2], kBad[3], kBad[6], kBad[7]}) {
    const std::string name = b.name, value = b.value;
    CAPTURE(name);
    CAPTURE(value);
    auto alone = run_alone("hello", {{b.name, b.value}});
    INFO("alone: stdout:\n" << alone.out << "\nstderr:\n" << alone.err);
    CHECK(alone.status != 0);
    CHECK_FALSE(alone.timed_out);
    CHECK(count(alone.err, b.message) == 1);
    CHECK_FALSE(contains(alone.out, "PASS"));
    auto h = run_hydra("hello", 2, {{b.name, b.value}, {"NMAD_DRIVER", "shm"}});
    INFO("hydra: stdout:\n" << h.out << "\nstderr:\n" << h.err);
    CHECK(h.status != 0);
    CHECK_FALSE(h.timed_out);
    CHECK(h.seconds < 30);
    CHECK(contains(h.err, b.message));
    CHECK_FALSE(contains(h.out, "PASS"));
  }
}

TEST_CASE("a misspelled knob is reported once with the knob it resembles; the job runs") {
  const std::string warning =
      "NMAD_FINALISE_TIMEOUT_MS is not an nmad knob and is ignored; did you mean NMAD_FINALIZE_TIMEOUT_MS?";
  auto r = run_job("hello", 3, {{"NMAD_FINALISE_TIMEOUT_MS", "1000"}});
  INFO("nmad-run: stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  CHECK(count(r.out, "PASS hello rank") == 3);
  CHECK(count(r.err, warning) == 1);  // from nmad-run, not from each rank
  CHECK(contains(r.err, "nmad-run: warning: " + warning));
  // Under hydra, rank 0 alone says it.
  auto h = run_hydra("hello", 3, {{"NMAD_FINALISE_TIMEOUT_MS", "1000"}});
  INFO("hydra: stdout:\n" << h.out << "\nstderr:\n" << h.err);
  CHECK(h.status == 0);
  CHECK(count(h.err, warning) == 1);
  auto alone = run_alone("hello", {{"NMAD_SHM_RIGN", "1M"}});
  CHECK(alone.status == 0);
  CHECK(count(alone.err, "NMAD_SHM_RIGN is not an nmad knob and is ignored; did you mean NMAD_SHM_RING?") == 1);
  // Refused on request, silenced on request.
  auto strict = run_job("hello", 2, {{"NMAD_FINALISE_TIMEOUT_MS", "1000"}, {"NMAD_CONFIG_UNKNOWN", "error"}});
  CHECK(strict.status == 2);
  CHECK(contains(strict.err, warning));
  CHECK_FALSE(contains(strict.out, "Hello from rank"));
  auto strict_alone = run_alone("hello", {{"NMAD_FINALISE_TIMEOUT_MS", "1"}, {"NMAD_CONFIG_UNKNOWN", "error"}});
  CHECK(strict_alone.status != 0);
  CHECK(contains(strict_alone.err, warning));
  auto quiet = run_job("hello", 2, {{"NMAD_FINALISE_TIMEOUT_MS", "1000"}, {"NMAD_CONFIG_UNKNOWN", "ignore"}});
  CHECK(quiet.status == 0);
  CHECK(quiet.err.empty());
}

TEST_CASE("NMAD_TOPOLOGY=pu:10000 is refused at once, naming the bound") {
  auto r = run_job("hello", 2, {{"NMAD_TOPOLOGY", "pu:10000"}}, {}, 30);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.status != 0);
  CHECK(r.seconds < 10);
  CHECK(contains(r.err, "NMAD_TOPOLOGY"));
  CHECK(contains(r.err, "10000 PUs"));
  CHECK(contains(r.err, "4096"));
  auto info = nmad_info({"--topology", "pack:4 core:1024 pu:4"});
  CHECK(info.status == 2);
  CHECK(info.seconds < 10);
  CHECK(contains(info.err, "16384 PUs"));
  auto flat = nmad_info({"--topology", "core:2000 pu:1"});
  CHECK(flat.status == 2);
  CHECK(contains(flat.err, "2000 children"));
  // A large machine within the bounds loads.
  auto ok = nmad_info({"--topology", "pack:4 numa:2 core:64 pu:2"});
  CHECK(ok.status == 0);
  CHECK(contains(ok.out, "1024"));
}

TEST_CASE("nmad-info --config: every knob with its value and where it came from") {
  auto r = nmad_info({"--config"}, {{"NMAD_SHM_RING", "1M"}, {"NMAD_JOB_KEY", "very-secret-key"}});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  CHECK(contains(r.out, "NMAD_SHM_CONNECT_TIMEOUT_MS"));
  CHECK(contains(r.out, "NMAD_SHM_CONNECT_TIMEOUT_MS = 30000 (default)"));
  CHECK(contains(r.out, "NMAD_SHM_RING = 1M (environment)"));
  CHECK(contains(r.out, "a duration in ms, 1..3600000"));
  CHECK(contains(r.out, "NMAD_JOB_KEY = (set, not shown) (environment)"));
  CHECK_FALSE(contains(r.out, "very-secret-key"));
  // A bad value and a misspelled name: shown, and the exit status says so.
  auto bad = nmad_info({"--config"}, {{"NMAD_SHM_CONNECT_TIMEOUT_MS", "abc"}, {"NMAD_SHM_RIGN", "1M"}});
  INFO("stdout:\n" << bad.out << "\nstderr:\n" << bad.err);
  CHECK(bad.status == 1);
  CHECK(contains(bad.out, "NMAD_SHM_CONNECT_TIMEOUT_MS=\"abc\": expected a duration in ms, 1..3600000"));
  CHECK(contains(bad.out, "NMAD_SHM_RIGN is not an nmad knob and is ignored; did you mean NMAD_SHM_RING?"));
}
