// Multi-process scenarios for the engine, started by nmad-run from
// tests/multiprocess_test.cpp. Each scenario checks its own results and
// exits non-zero with a message on the first discrepancy.
//
//   engine_worker stress MSGS_PER_PAIR SEED   random sizes (0 B..8 MiB) and
//                                             tags, any-source receives mixed in
//   engine_worker pingpong ITERS
//   engine_worker aggregation N               N sends while the track is busy
//   engine_worker pack ROUNDS                 request/answer with pack/unpack
//   engine_worker truncate
//   engine_worker killed                      rank 1 dies; others see errors
//   engine_worker intruder                    strangers knock on rank 1's port
//   engine_worker threads ITERS               two threads per process
//   engine_worker wrongkey                    rank 1 presents another job key
//   engine_worker killed_rdv                  rank 1 dies with a rendezvous matched
//                                             by rank 0 and another one unexpected
//   engine_worker killed_unpack               rank 1 dies while rank 0 is between two
//                                             unpacks of its packed message
//   engine_worker pull EXPECT                 rank 1 sends 4 MiB and pauses outside
//                                             the library; EXPECT 1: its send is
//                                             done by then (the receiver pulled)
//   engine_worker sleeper MS                  rank 0 waits MS ms for rank 1's
//                                             message; reports its CPU time
//   engine_worker destroy_pending             rank 1 destroys pending requests (a
//                                             receive, an unanswered rendezvous, a
//                                             matched one); then rank 0 dies and
//                                             rank 1 destroys pending requests of
//                                             the dead rank before progressing
//   engine_worker partitioned ROUNDS THREADS  partitioned messages, pieces handed
//                                             over by THREADS threads in random
//                                             order, checked part by part
//   engine_worker partitioned_packets N       N ready pieces: packets used
//   engine_worker flood NOFILE PER_ADDR MS    rank 1 (descriptor limit NOFILE)
//                                             waits for a message while rank 0
//                                             holds PER_ADDR idle connections
//                                             from each of 127.0.0.1-5 to its tcp
//                                             listener for MS ms; reports rank 1's
//                                             CPU time, then 100 exchanges
//   engine_worker mt_stress THREADS PER_STREAM SEED
//                                             stress from THREADS threads per
//                                             process through one session
//   engine_worker callbacks N                 rank 1 answers N pings from
//                                             completion callbacks
//
// This file picks the scenario by name; each is defined in the
// engine_*.cpp file of its topic (engine_scenarios.hpp lists them).
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "api/nmad/nmad.hpp"
#include "tests/workers/engine_scenarios.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;
using namespace nmad_test::engine;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: engine_worker SCENARIO [ARGS]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  // `wrongkey`: rank 1 joins with another job key, so its peers refuse it.
  if (scenario == "wrongkey" && std::getenv("PMI_RANK") && std::string(std::getenv("PMI_RANK")) == "1")
    ::setenv("NMAD_JOB_KEY", "not-this-job", 1);
  // `flood`: rank 1's descriptor table is NOFILE entries, from the start.
  if (scenario == "flood" && std::getenv("PMI_RANK") && std::string(std::getenv("PMI_RANK")) == "1") {
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, static_cast<rlim_t>(arg(2, 256)));
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  try {
    // The suite runs every single-threaded scenario at thread level single
    // (no locks in the engine) and multiple (ENGINE_WORKER_THREADS).
    session_options o;
    const char* level = std::getenv("ENGINE_WORKER_THREADS");
    const bool multi_threaded = scenario == "threads" || scenario == "mt_stress" || scenario == "partitioned";
    if (level && std::string(level) == "single" && !multi_threaded) o.threads = thread_level::single;
    auto s = session::create(o);
    g_rank = s->rank();
    int rc = 2;
    if (scenario == "stress") rc = stress(*s, static_cast<int>(arg(2, 1000)), static_cast<std::uint64_t>(arg(3, 1)));
    else if (scenario == "pingpong") rc = pingpong(*s, static_cast<int>(arg(2, 1000)));
    else if (scenario == "aggregation") rc = aggregation(*s, static_cast<int>(arg(2, 100)));
    else if (scenario == "pack") rc = pack_rpc(*s, static_cast<int>(arg(2, 20)));
    else if (scenario == "truncate") rc = truncate(*s);
    else if (scenario == "killed") rc = killed(*s);
    else if (scenario == "intruder") rc = intruder(*s);
    else if (scenario == "wrongkey") rc = pingpong(*s, 10);
    else if (scenario == "threads") rc = threads(*s, static_cast<int>(arg(2, 200)));
    else if (scenario == "killed_rdv") rc = killed_rdv(*s);
    else if (scenario == "killed_unpack") rc = killed_unpack(*s);
    else if (scenario == "pull") rc = pull(*s, arg(2, 1) != 0);
    else if (scenario == "sleeper") rc = sleeper(*s, static_cast<int>(arg(2, 500)));
    else if (scenario == "flood") rc = flood(*s, static_cast<int>(arg(3, 100)), static_cast<int>(arg(4, 1500)));
    else if (scenario == "mt_stress")
      rc = mt_stress(*s, static_cast<int>(arg(2, 8)), static_cast<int>(arg(3, 30)), static_cast<std::uint64_t>(arg(4, 1)));
    else if (scenario == "callbacks") rc = callbacks(*s, static_cast<int>(arg(2, 100)));
    else if (scenario == "destroy_pending") rc = destroy_pending(*s);
    else if (scenario == "partitioned") rc = partitioned(*s, static_cast<int>(arg(2, 40)), static_cast<int>(arg(3, 4)));
    else if (scenario == "partitioned_packets") rc = partitioned_packets(*s, static_cast<int>(arg(2, 64)));
    else std::fprintf(stderr, "engine_worker: unknown scenario '%s'\n", scenario.c_str());
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_worker: %s\n", e.what());
    return 1;
  }
}
