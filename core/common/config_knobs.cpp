// Every NMAD_* environment variable, one line each (see config.hpp for the
// kinds and their syntax; docs/CONFIGURATION.md says more about each, and
// tests/config_test.cpp checks that it lists every one of them).
// The order is nmad-info --config's.
#include "api/nmad/services/config.hpp"

namespace nmad::config {
namespace {

constexpr std::int64_t KiB = std::int64_t{1} << 10, MiB = KiB << 10, GiB = MiB << 10, TiB = GiB << 10;
// The longest timeout in ms: about 31 years, far from any overflow of a
// steady_clock deadline (nanoseconds in 64 bits).
constexpr std::int64_t kForeverMs = 1'000'000'000'000;
constexpr std::int64_t kHourMs = 3'600'000;

using sv = std::string_view;

constexpr knob k_flag(sv name, sv def, sv scope, sv what) {
  return {name, kind::flag, "", 0, 1, "", def, scope, what};
}
constexpr knob k_int(sv name, sv def, std::int64_t lo, std::int64_t hi, sv scope, sv what, sv words = "") {
  return {name, kind::integer, "", lo, hi, words, def, scope, what};
}
constexpr knob k_size(sv name, sv def, std::int64_t lo, std::int64_t hi, sv scope, sv what, sv words = "") {
  return {name, kind::size, "bytes", lo, hi, words, def, scope, what};
}
constexpr knob k_us(sv name, sv def, std::int64_t lo, std::int64_t hi, sv scope, sv what, sv words = "") {
  return {name, kind::duration, "us", lo, hi, words, def, scope, what};
}
constexpr knob k_ms(sv name, sv def, std::int64_t lo, std::int64_t hi, sv scope, sv what, sv words = "") {
  return {name, kind::duration, "ms", lo * 1000, hi * 1000, words, def, scope, what};
}
// Seconds, with a range in milliseconds (fractions are allowed).
constexpr knob k_s(sv name, sv def, std::int64_t lo_ms, std::int64_t hi_ms, sv scope, sv what, sv words = "") {
  return {name, kind::duration, "s", lo_ms * 1000, hi_ms * 1000, words, def, scope, what};
}
constexpr knob k_choice(sv name, sv def, sv words, sv scope, sv what) {
  return {name, kind::choice, "", 0, 0, words, def, scope, what};
}
constexpr knob k_text(sv name, sv def, sv syntax, sv scope, sv what, syntax_check check = nullptr) {
  return {name, kind::text, syntax, 0, 0, "", def, scope, what, check};
}
constexpr knob k_secret(sv name, sv syntax, sv scope, sv what) {
  return {name, kind::text, syntax, 0, 0, "", "", scope, what, nullptr, true};
}
constexpr knob k_list(sv name, sv syntax, sv scope, sv what, syntax_check check, sv keys = "", std::int64_t lo = 0,
                      std::int64_t hi = 0) {
  return {name, kind::list, syntax, lo, hi, keys, "", scope, what, check};
}

constexpr knob kKnobs[] = {
    // --- the engine ---
    k_text("NMAD_DRIVER", "auto", "auto, a driver name, a list a,b or rails a+b", "engine", "network driver: auto (per peer the lowest-latency one that reaches it), tcp, shm, ofi, a list shm,ofi (per peer among those) or rails a+b"),
    k_text("NMAD_DRIVERS", "", "rails a+b", "engine", "several rails, e.g. shm+tcp or tcp+tcp: one track per listed driver (overrides NMAD_DRIVER)"),
    k_text("NMAD_STRATEGY", "default", "a strategy name or a plugin's path", "engine", "packet scheduling strategy: a built-in or plugin name, or a plugin's path"),
    k_list("NMAD_STRATEGY_PATH", "directories separated by ':'", "engine", "directories searched for libnmad_strategy_<name>.so before the installed one", nullptr),
    k_size("NMAD_RDV_THRESHOLD", "auto", 0, GiB, "engine", "messages of at least this many bytes go by rendezvous (auto: the driver's preference, else 32K; capped by the driver's packet size)", "auto"),
    k_size("NMAD_COPY_THRESHOLD", "256", 0, GiB, "engine", "eager payloads up to this size are copied into the packet instead of gathered"),
    k_size("NMAD_UNEXPECTED_MAX", "64M", 0, TiB, "engine", "what peers may make this process keep before its receives are posted: eager bytes + 320 B a message, rendezvous requests included, 64 B in all for an eager message of at most 8 bytes (shared by its peers; 0 or unlimited: no bound)", "unlimited=0"),
    k_ms("NMAD_CONNECT_TIMEOUT_MS", "30000", 1, kForeverMs, "engine", "time to connect to every peer at start-up"),
    k_ms("NMAD_FINALIZE_TIMEOUT_MS", "30000", 0, kForeverMs, "engine", "time to flush queued sends when a session ends (then they are dropped)"),
    k_choice("NMAD_WAIT", "fixed-spin", "busy|block|fixed-spin", "engine", "how blocking calls wait: poll, sleep at once, or poll NMAD_WAIT_SPIN_US then sleep"),
    k_us("NMAD_WAIT_SPIN_US", "auto", 0, 10'000'000, "engine", "fixed-spin: polling before a waiting thread sleeps (auto: 100, 20 when oversubscribed)", "auto"),
    k_choice("NMAD_WAIT_YIELD", "auto", "auto|0|1", "engine", "give the CPU away on idle polls (auto: always when oversubscribed, else after 10 us idle)"),
    k_choice("NMAD_PROGRESS", "auto", "none|thread|auto", "engine", "progress thread: none, thread (one per process), auto (a thread when a core is spare)"),
    k_size("NMAD_COPY_OFFLOAD", "off", 0, GiB, "engine", "the progress thread copies eager isends from this size on (on: 16K; off or 0: never)", "off=0|none=0|on=16K"),
    k_us("NMAD_PROGRESS_SPIN_US", "auto", 0, 10'000'000, "engine", "the progress thread polls this long before sleeping (auto: 1000 with offload and a spare core, 0 without offload, 50 on a full machine)", "auto"),
    k_list("NMAD_PROGRESS_CPUS", "a CPU list such as 0-3,8", "engine", "CPUs of the progress thread (nmad-run sets it from the placement)", check_cpu_list),
    k_list("NMAD_THREAD_PRIORITIES", "KIND=N entries, e.g. progress=18,internal=2", "engine", "priority 0..20 per thread kind over the defaults application=10, progress=15, internal=5", check_key_values, "application|progress|internal", 0, 20),
    k_flag("NMAD_STATS", "0", "engine", "1: each process prints its send statistics on stderr when its session ends"),
    k_text("NMAD_TRACE", "", "a file name (%r: rank, %p: pid), or 0: off", "engine", "record engine events to FILE.<rank>; nmad-trace merges them"),
    k_choice("NMAD_LOG", "warn", "error|warn|info|debug", "engine", "log level"),
    k_flag("NMAD_ASYMMETRIC_FENCES", "1", "engine", "0: full fences on both sides of sleep/wake handshakes instead of membarrier"),
    k_choice("NMAD_PROFILE", "auto", "auto|sample|off", "engine", "sampled driver profiles: auto (cached; sampled when a multirail job has none), sample, off"),
    k_text("NMAD_PROFILE_CACHE", "", "a file name", "engine", "file of the sampled driver profiles (unset: $XDG_CACHE_HOME/nmad/profiles, else ~/.cache/nmad/profiles)"),
    k_list("NMAD_RAIL_BANDWIDTH", "MB/s per rail of NMAD_DRIVERS, comma-separated", "engine", "bandwidth of each rail (e.g. 100,25): what split_balance divides data by", check_bandwidth_list),
    k_text("NMAD_TOPOLOGY", "", "a synthetic description or an hwloc XML file", "engine", "topology to place on (unset: HWLOC_XMLFILE, HWLOC_SYNTHETIC, else this machine); at most 4096 PUs"),
    k_s("NMAD_PMI_TIMEOUT", "300", 1, 10'000'000'000, "engine", "seconds a rank waits for any answer of the launcher"),
    k_choice("NMAD_CONFIG_UNKNOWN", "warn", "warn|error|ignore", "engine", "NMAD_* names that are no knob: a warning (on rank 0 or from nmad-run), an error, or nothing"),
    // Set by nmad-run for the ranks.
    k_secret("NMAD_JOB_KEY", "a secret", "engine", "secret every connection must present (nmad-run sets a random one per job)"),
    k_secret("NMAD_PMI_AUTH", "a token", "engine", "this rank's token for nmad-run's PMI port (set by nmad-run)"),
    k_int("NMAD_RUN_CPUS", "", 1, 1 << 20, "engine", "CPUs the job may use on this machine (set by nmad-run)"),
    k_text("NMAD_RUN_PID", "", "PID:START", "engine", "nmad-run's pid and start time, watched by each rank so none outlives the launcher (set by nmad-run)"),
    k_int("NMAD_RUN_SIZE", "", 1, 1 << 24, "engine", "the job's number of ranks (set by nmad-run)"),
    // --- drivers ---
    k_size("NMAD_SHM_RING", "256K", 256 * KiB, GiB, "shm", "bytes per ring (one per direction and peer), rounded up to a power of two"),
    k_flag("NMAD_SHM_CMA", "1", "shm", "0: bulk data through the ring instead of cross-memory attach"),
    k_ms("NMAD_SHM_CONNECT_TIMEOUT_MS", "30000", 1, kHourMs, "shm", "time a peer has to accept a connection"),
    k_text("NMAD_TCP_HOST", "127.0.0.1", "an IPv4 address", "tcp", "address to listen on and advertise", check_ipv4_list),
    k_list("NMAD_TCP_HOSTS", "IPv4 addresses, comma-separated", "tcp", "one address per tcp rail of NMAD_DRIVERS, instead of NMAD_TCP_HOST", check_ipv4_list),
    k_int("NMAD_TCP_PORT", "0", 0, 65535, "tcp", "fixed listening port (0: any)"),
    k_ms("NMAD_TCP_HANDSHAKE_TIMEOUT_MS", "5000", 1, kHourMs, "tcp", "time an incoming connection has to present the job key"),
    k_ms("NMAD_TCP_CONNECT_TIMEOUT_MS", "30000", 1, kHourMs, "tcp", "time a peer has to answer our connection"),
    k_ms("NMAD_TCP_USER_TIMEOUT_MS", "0", 0, kHourMs, "tcp", "fail a connection whose peer host stops answering this long (0: the kernel's behaviour)"),
    k_int("NMAD_TCP_PENDING_PER_HOST", "256", 1, 1'000'000, "tcp", "handshakes one source address may hold pending; more are refused"),
    k_int("NMAD_TCP_PENDING_MAX", "", 1, 1'000'000, "tcp", "handshakes pending from all sources together (unset: a quarter of RLIMIT_NOFILE, 16 to 256); past it the oldest silent one goes"),
    k_size("NMAD_TCP_SOCKBUF", "256K", 4 * KiB, GiB, "tcp", "SO_SNDBUF and SO_RCVBUF of every socket (0: the kernel's autotuning)", "0"),
    k_size("NMAD_TCP_FRAGMENT", "512K", 4 * KiB, GiB, "tcp", "bulk data longer than this goes in fragments of this size (0: whole)", "0"),
    k_text("NMAD_OFI_PROVIDER", "", "a libfabric provider, e.g. tcp;ofi_rxm", "ofi", "libfabric provider (unset: FI_PROVIDER, else the best by capability: nmad-info --drivers)"),
    k_text("NMAD_OFI_DOMAIN", "", "a libfabric domain", "ofi", "libfabric domain, for tcp and udp the interface (unset: lo where offered)"),
    k_ms("NMAD_OFI_CONNECT_TIMEOUT_MS", "5000", 1, kHourMs, "ofi", "time a peer has to answer the hello"),
    k_choice("NMAD_OFI_RMA", "auto", "auto|on|off", "ofi", "rendezvous by RMA read: auto (where the provider has FI_RMA), on (required), off"),
    k_int("NMAD_OFI_MR_CACHE", "64", 0, 1 << 20, "ofi", "unused memory registrations kept (LRU); 0: register per rendezvous"),
    // --- the MPI layer ---
    k_choice("NMAD_COLL_SHM", "on", "on|off", "mpi", "blocking barrier, bcast/gather/scatter/allgather/reduce/allreduce/reduce_scatter/alltoall up to 64 KiB per block (larger bcast/gather/scatter/alltoall blocks, and gatherv/scatterv/allgatherv, read straight from the other ranks' memory where allowed), and ibarrier through a shared segment when every rank of the communicator (2 to 8) is on this host and the job uses the shm driver; off: engine messages"),
    k_choice("NMAD_RMA_SHM", "on", "on|off", "mpi", "windows made by MPI_Win_allocate on a communicator whose ranks all run on this host (over the shm driver) live in one shared segment: puts, gets, accumulates and locks are direct memory operations; off: requests served by the target's RMA agent (MPI_Win_allocate_shared is always shared)"),
    k_choice("NMAD_COLL_HIER", "auto", "auto|on|off", "mpi", "hierarchical collectives over hosts, packages, NUMA nodes: auto (bcast, reduce, allreduce), on (barrier too), off"),
    k_ms("NMAD_COLL_FINALIZE_TIMEOUT_MS", "10000", 0, kForeverMs, "mpi", "time MPI_Finalize gives pending non-blocking collectives and collective file accesses"),
    k_size("NMAD_COLL_BCAST_SMALL", "12K", 0, TiB, "mpi", "bcast below this (or on 2 processes): binomial tree"),
    k_int("NMAD_COLL_BCAST_MIN_PROCS", "8", 0, 1 << 24, "mpi", "bcast on fewer processes than this: binomial tree up to NMAD_COLL_BCAST_LARGE"),
    k_size("NMAD_COLL_BCAST_LARGE", "512K", 0, TiB, "mpi", "bcast from this size: pipelined chain (between: scatter + allgather)"),
    k_size("NMAD_COLL_CHAIN_SEGMENT", "64K", 1, GiB, "mpi", "segment of the pipelined bcast chain"),
    k_size("NMAD_COLL_ALLREDUCE_SMALL", "4K", 0, TiB, "mpi", "allreduce below this: recursive doubling, else Rabenseifner"),
    k_size("NMAD_COLL_ALLREDUCE_PAIR_LARGE", "512K", 0, TiB, "mpi", "allreduce on 2 processes: Rabenseifner from this size"),
    k_size("NMAD_COLL_GATHER_LARGE", "512K", 0, TiB, "mpi", "gather/scatter total from this size: linear, else binomial"),
    k_size("NMAD_COLL_ALLGATHER_SMALL", "80K", 0, TiB, "mpi", "allgather total below this: recursive doubling or Bruck, else ring"),
    k_size("NMAD_COLL_ALLTOALL_SMALL", "32K", 0, TiB, "mpi", "alltoall block up to this: all at once, else pairwise"),
    k_size("NMAD_COLL_ALLTOALL_BRUCK", "256", 0, TiB, "mpi", "alltoall block up to this (with NMAD_COLL_ALLTOALL_BRUCK_PROCS processes or more): Bruck"),
    k_int("NMAD_COLL_ALLTOALL_BRUCK_PROCS", "8", 0, 1 << 24, "mpi", "processes from which small alltoall blocks go by Bruck"),
    k_size("NMAD_COLL_REDUCE_SCATTER_LARGE", "64K", 0, TiB, "mpi", "reduce_scatter total from this size (commutative): pairwise"),
    k_size("NMAD_COLL_SCAN_LARGE", "256K", 0, TiB, "mpi", "scan/exscan from this size: chain, else recursive doubling"),
    k_text("NMAD_EMULATED_HOSTS", "", "host names per world rank, e.g. n0*8,n1*8", "mpi", "testing: emulated hosts for MPI's host-based splits (checked by the calls that use it)"),
    k_text("NMAD_HW_BINDING", "", "affinity, placement, none, or CPU lists per rank such as 0;1;none", "mpi", "testing: the binding MPI hardware splits see (checked by the calls that use it)"),
    // --- nmad-run and nmad-info ---
    k_s("NMAD_RUN_TIMEOUT", "none", 0, 100'000'000'000, "launcher", "nmad-run: end the job after this many seconds (none or 0: never)", "none=0"),
    k_s("NMAD_RUN_KILL_GRACE", "2", 0, 100'000'000'000, "launcher", "nmad-run: seconds the other ranks get after one fails"),
    k_text("NMAD_RUN_SSH", "ssh -o BatchMode=yes", "a command", "launcher", "nmad-run: command that starts ranks on other hosts"),
    k_choice("NMAD_RUN_BIND", "auto", "core|none|auto", "launcher", "nmad-run: bind local ranks as placed (auto: when 2 or more local ranks fit)"),
    k_flag("NMAD_RUN_REPORT_BINDINGS", "0", "launcher", "nmad-run: 1 = one line per rank: CPUs, NUMA node, reason"),
    k_flag("NMAD_RUN_OVERSUBSCRIBE", "0", "launcher", "nmad-run: 1 = no warning for more ranks than CPUs on this host"),
    k_text("NMAD_RUN_PMI_HOST", "", "an IPv4 address", "launcher", "nmad-run: address remote ranks reach the launcher at (unset: this machine's)", check_ipv4_list),
    k_choice("NMAD_PROGRESS_PLACEMENT", "auto", "bind|numa|dedicated|smt|odd-even|split-tree|float|pair|auto|odd_even|split_tree", "launcher", "where progress threads go (nmad-run, nmad-info --placement)"),
    k_int("NMAD_PROGRESS_CORES", "0", 0, 1 << 20, "launcher", "dedicated placement: size of the progress core pool (0: every free core)"),
    // --- scripts of the tree ---
    k_text("NMAD_MPICC_CC", "cc", "a compiler command", "tools", "mpicc: the C compiler"),
    k_text("NMAD_MPICXX_CXX", "c++", "a compiler command", "tools", "mpicxx: the C++ compiler"),
    k_choice("NMAD_WRAPPER_LANG", "", "cxx", "tools", "set by mpicxx for mpicc: compile as C++"),
    k_text("NMAD_COMPARE_INSTALL_LOG", "", "a file name", "tools", "set by bench/compare for its report"),
    k_int("NMAD_FUZZ_SEED", "", 0, 4'294'967'295, "testing", "tools/fuzz: libFuzzer's seed (tools/test sets 1)"),
    k_flag("NMAD_TEST_ONE_LEVEL", "0", "testing", "tests: run the slow multi-process matrices at one thread level only"),
    k_flag("NMAD_TEST_PLUGIN_REPORT", "0", "testing", "tests: the test strategy plugin reports what it did"),
};

}  // namespace

std::span<const knob> knobs() { return kKnobs; }

}  // namespace nmad::config
