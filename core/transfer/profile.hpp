#pragma once
// Sampled driver profiles: what a driver really achieves on this host.
//
// A driver's caps() carry fixed estimates of its latency and bandwidth.
// A *profile* replaces them with figures measured over the real driver: a
// ping-pong between two instances of it inside one process, each polled by
// its own thread (so each side runs on its own core, as two ranks would),
// over packets for sizes up to the driver's largest packet and over bulk
// data (post_recv_data / post_send_data) above, at a handful of sizes from
// 8 B to 4 MiB. Per size: one-way time (half the median round trip) and
// bandwidth (size / one-way time).
//
// Profiles are cached per host in one text file:
//   NMAD_PROFILE_CACHE, else $XDG_CACHE_HOME/nmad/profiles, else
//   ~/.cache/nmad/profiles.
// The file starts with a *key* (CPU model, core count, a digest of the hwloc
// topology, and the library's build id): a file written under another key is
// stale and ignored (and replaced when next sampled). A file that does not
// parse is ignored with one warning, never trusted in part.
//
// When sampling happens (NMAD_PROFILE):
//   auto (default)  a session uses cached profiles; it samples (and caches)
//                   only when its figures matter and none are cached: a
//                   multirail job (NMAD_DRIVERS with several tracks per
//                   gate, whose rails are chosen and balanced by them).
//                   Other jobs start without sampling and keep the
//                   estimates.
//   sample          sample at session start when nothing valid is cached
//   off             estimates only; the cache is neither read nor written
// `nmad-info --sample` samples every network driver and rewrites the cache;
// `nmad-info --drivers` prints each driver's profile ("sampled <date>")
// or "estimate". Several processes of one host that sample at once take a
// lock on the file (flock on "<path>.lock"): one samples, the others wait
// and read what it wrote.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/progress/load_monitor.hpp"
#include "core/transfer/driver.hpp"

namespace nmad {

struct profile_point {
  std::size_t bytes = 0;
  double one_way_us = 0;     // half a median round trip
  double bandwidth_mbps = 0; // bytes / one-way time, in MB/s (10^6 B/s)
  bool bulk = false;         // measured over post_send_data (else packets)
};

// What the machine was doing while a profile was sampled. A sample taken
// while other threads wanted the CPUs measures the scheduler, not the
// driver (a busy machine gave an 8-byte shm latency of 128 us and a tcp
// one of 1 ms): it is recorded with the profile and such a profile is
// never cached.
struct profile_load {
  int others_runnable = -1;       // runnable threads besides the sampler, the most seen (-1: unknown)
  int cpus = 0;                   // CPUs online
  double preemptions_per_s = -1;  // involuntary context switches of the sampler (-1: unknown)
  // The two sampling threads need a CPU each; more runnable threads than
  // that leaves (seen both before and after the sample: a kernel thread
  // woken at one reading is not a load), or the sampler preempted 1,000
  // times a second or more (an idle 2-CPU virtual machine here preempts
  // two spinning threads 90-200 times a second; one loaded by 18 runnable
  // threads, 230-2,700).
  bool busy() const {
    return (others_runnable >= 0 && others_runnable + 2 > cpus) || preemptions_per_s >= 1000;
  }
  std::string text() const;  // "0 other runnable threads on 2 CPUs, 1.2 preemptions/s"
};

struct driver_profile {
  std::string driver;          // driver_descriptor::name
  std::int64_t sampled_at = 0; // Unix time
  std::vector<profile_point> points;  // ascending sizes
  profile_load load;           // the machine while it was sampled
  // Why the figures are not to be trusted (empty: plausible): sampled on a
  // busy machine, not monotonic in size, or far from the driver's own
  // estimate. A rejected profile is never cached nor applied.
  std::string rejected;

  // One-way latency of the smallest size, and the best bandwidth seen.
  double latency_us() const;
  double bandwidth_mbps() const;
};

// What the cached figures depend on. Two keys equal -> figures reusable.
struct profile_key {
  std::string cpu_model;   // /proc/cpuinfo "model name"
  unsigned cores = 0;      // online CPUs
  std::string topology;    // digest of the hwloc topology (hex)
  std::string library;     // build id of the object holding this code
  std::string text() const;  // one line, no newline
};

profile_key current_profile_key();

// Where the cache lives (see the top of this file).
std::string profile_cache_path();

enum class profile_mode { automatic, sample, off };
// NMAD_PROFILE; throws std::runtime_error on an unknown value.
profile_mode profile_mode_from_env();

// Reads the cache at `path`. Profiles are returned only when the file's key
// equals `key`. A missing file gives nothing silently; a stale key gives
// nothing and sets *note; a corrupt file gives nothing and sets *warning
// (what is wrong and where).
std::vector<driver_profile> load_profiles(const std::string& path, const profile_key& key,
                                          std::string* warning, std::string* note = nullptr);
// Writes `profiles` under `key` (atomically: a temporary file renamed),
// creating the directory. Throws std::runtime_error on failure.
void save_profiles(const std::string& path, const profile_key& key, const std::vector<driver_profile>& profiles);

// NMAD_RAIL_BANDWIDTH: the bandwidth of each rail, in MB/s (10^6 B/s), in
// the order of NMAD_DRIVERS ("400,100" for tcp+tcp), given by whoever knows
// the links (a job script, a benchmark that measured each rail alone). It
// replaces the estimate or sampled figure of that rail's tracks: what
// split_balance divides rendezvous data by. Samples are taken between two
// instances in one process, so they never see a link's own rate (a shaped or
// slower network); this knob is how a job says what the links really give.
// Unset or empty: nothing (an empty vector). Throws std::runtime_error when
// an entry is not a positive number.
std::vector<double> rail_bandwidths_from_env();

struct sample_options {
  std::vector<std::size_t> sizes = {8, 64, 1024, 8192, 65536, 262144, 1u << 20, 4u << 20};
  int min_rounds = 20;         // round trips per size, at least...
  double seconds_per_size = 0.05;  // ... and about this long
  // Where the machine's load is read (null: this machine; tests give a
  // fake one).
  load_probe* load = nullptr;
  // false: the verdict of check_profile is still recorded in `rejected`,
  // but profiles_for accepts and caches the profile anyway
  // (`nmad-info --sample --force`).
  bool check = true;
};

// Measures `d` (a network driver) over two instances in this process.
// Per size the figure is the 10th percentile of the round trips (a robust
// statistic: a preempted round trip does not move it, a median does once
// a third of them are). Records the load before and after and checks the
// result (check_profile): `rejected` says why it is not to be used.
// Throws std::runtime_error when the driver cannot be opened or connected
// or a transfer fails (the message says which).
driver_profile sample_driver(const driver_descriptor& d, const sample_options& o = {});

// Why `p` is implausible (empty: plausible), against the driver's own
// estimates in `estimate`: sampled while busy; a one-way time that falls
// to less than half of the smaller size's (times grow with size); a
// latency over 25 times the estimate or a bandwidth under 1/25 of it.
std::string check_profile(const driver_profile& p, const driver_caps& estimate);

// Fills caps' latency and bandwidth from the profile.
void apply_profile(driver_caps& caps, const driver_profile& p);

// A session's start: for every driver name in `names`, the cached profile
// if valid; if some are missing and `sample_missing`, samples those (under
// the file lock), rewrites the cache with everything valid and returns all.
// A sample that check_profile rejects (a busy machine...) is neither
// returned nor cached: logged with its reason, the estimates stay.
// Never throws: a failure to sample or write is logged and the estimates
// stay.
std::vector<driver_profile> profiles_for(const std::vector<std::string>& names, bool sample_missing,
                                         const sample_options& o = {});

}  // namespace nmad
