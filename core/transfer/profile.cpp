// Sampled driver profiles (see profile.hpp): measuring, the cache file, and
// the key that invalidates it.
//
// Cache file format (text, one item per line):
//   nmad-profiles 1
//   key <profile_key::text()>
//   driver <name> <sampled at, Unix seconds>
//   point <bytes> <one-way us> <MB/s> <packet|bulk>
//   ...
//   end
//   (more drivers)
#include "core/transfer/profile.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <string_view>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "core/common/random.hpp"
#include "api/nmad/services/topology.hpp"

namespace nmad {

namespace {

constexpr const char* kMagicLine = "nmad-profiles 1";

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string m = line.substr(colon + 1);
    m.erase(0, m.find_first_not_of(" \t"));
    return m;
  }
  return "unknown";
}

std::string topology_digest() {
  try {
    const auto& t = topology::shared_host();
    std::string s = t.summary();
    for (const auto& p : t.pus())
      s += ";" + std::to_string(p.os_index) + "," + std::to_string(p.core) + "," + std::to_string(p.numa) + "," +
           std::to_string(p.package) + "," + std::to_string(p.l3) + "," + std::to_string(p.l2) + "," +
           std::to_string(p.l1);
    return hex64(fnv1a(s));
  } catch (const std::exception&) {
    return "none";
  }
}

// The GNU build id of the loaded object that holds this function, in hex;
// else the object's path, size and modification time.
struct build_id_search {
  std::uintptr_t addr = 0;
  std::string id, path;
};

int find_build_id(dl_phdr_info* info, std::size_t, void* data) {
  auto* s = static_cast<build_id_search*>(data);
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (s->addr >= lo && s->addr < lo + ph.p_memsz) mine = true;
  }
  if (!mine) return 0;
  s->path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((n->n_namesz + 3) & ~3u);
      if (desc + n->n_descsz > end) break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static constexpr char hex[] = "0123456789abcdef";
        for (unsigned k = 0; k < n->n_descsz; ++k) {
          s->id += hex[desc[k] >> 4];
          s->id += hex[desc[k] & 15];
        }
        return 1;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

std::string library_id() {
  build_id_search s;
  s.addr = reinterpret_cast<std::uintptr_t>(&library_id);
  dl_iterate_phdr(find_build_id, &s);
  if (!s.id.empty()) return "build-" + s.id;
  struct stat st{};
  if (!s.path.empty() && ::stat(s.path.c_str(), &st) == 0)
    return "file-" + hex64(fnv1a(s.path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime)));
  return "unknown";
}

// Key fields are written on one line: keep separators out of them.
std::string clean(std::string s) {
  for (char& c : s)
    if (c == ';' || c == '\n' || c == '\r' || c == '=') c = ' ';
  return s;
}

}  // namespace

std::string profile_load::text() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s other runnable threads on %d CPUs, %s preemptions/s",
                others_runnable < 0 ? "?" : std::to_string(others_runnable).c_str(), cpus,
                preemptions_per_s < 0 ? "?" : std::to_string(static_cast<long>(preemptions_per_s + 0.5)).c_str());
  return buf;
}

std::string check_profile(const driver_profile& p, const driver_caps& estimate) {
  char buf[256];
  if (p.load.busy()) return "sampled while the machine was busy (" + p.load.text() + ")";
  if (p.points.empty()) return "no points";
  for (std::size_t k = 1; k < p.points.size(); ++k) {
    const profile_point& a = p.points[k - 1];
    const profile_point& b = p.points[k];
    if (b.one_way_us < 0.5 * a.one_way_us) {
      std::snprintf(buf, sizeof buf, "not monotonic: %.3g us at %zu B but %.3g us at %zu B", a.one_way_us, a.bytes,
                    b.one_way_us, b.bytes);
      return buf;
    }
  }
  if (estimate.latency_us > 0 && p.latency_us() > 25 * estimate.latency_us) {
    std::snprintf(buf, sizeof buf, "latency %.3g us is over 25 times the driver's estimate (%.3g us)", p.latency_us(),
                  estimate.latency_us);
    return buf;
  }
  if (estimate.bandwidth_mbps > 0 && p.bandwidth_mbps() * 25 < estimate.bandwidth_mbps) {
    std::snprintf(buf, sizeof buf, "bandwidth %.4g MB/s is under 1/25 of the driver's estimate (%.4g MB/s)",
                  p.bandwidth_mbps(), estimate.bandwidth_mbps);
    return buf;
  }
  return {};
}

double driver_profile::latency_us() const { return points.empty() ? 0 : points.front().one_way_us; }

double driver_profile::bandwidth_mbps() const {
  double best = 0;
  for (const auto& p : points) best = std::max(best, p.bandwidth_mbps);
  return best;
}

std::string profile_key::text() const {
  return "cpu=" + clean(cpu_model) + ";cores=" + std::to_string(cores) + ";topology=" + clean(topology) +
         ";library=" + clean(library);
}

profile_key current_profile_key() {
  profile_key k;
  k.cpu_model = cpu_model();
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  k.cores = n > 0 ? static_cast<unsigned>(n) : 0;
  k.topology = topology_digest();
  k.library = library_id();
  return k;
}

std::string profile_cache_path() {
  if (std::string v = config::text("NMAD_PROFILE_CACHE"); !v.empty()) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v && v[0] == '/') return std::string(v) + "/nmad/profiles";
  if (const char* v = std::getenv("HOME"); v && *v) return std::string(v) + "/.cache/nmad/profiles";
  return "";
}

profile_mode profile_mode_from_env() {
  const std::string v = config::word("NMAD_PROFILE");  // throws naming a bad value
  if (v == "sample") return profile_mode::sample;
  if (v == "off") return profile_mode::off;
  return profile_mode::automatic;
}

std::vector<double> rail_bandwidths_from_env() {
  std::vector<double> out;
  const std::string text = config::text("NMAD_RAIL_BANDWIDTH");  // its syntax is checked there
  if (text.empty()) return out;
  const char* v = text.c_str();
  std::string_view rest(v);
  for (std::size_t entry = 1;; ++entry) {
    const std::size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    double x = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || !(x > 0) || x > 1e9)
      throw std::runtime_error(std::string("nmad: NMAD_RAIL_BANDWIDTH='") + v + "': entry " +
                               std::to_string(entry) + " ('" + item +
                               "') is not a bandwidth in MB/s (a positive number, one per rail of NMAD_DRIVERS)");
    out.push_back(x);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<driver_profile> load_profiles(const std::string& path, const profile_key& key, std::string* warning,
                                          std::string* note) {
  std::vector<driver_profile> out;
  std::ifstream f(path);
  if (!f) return out;
  auto bad = [&](int line, const std::string& what) {
    if (warning) *warning = path + ":" + std::to_string(line) + ": " + what;
    return std::vector<driver_profile>{};
  };
  std::string line;
  if (!std::getline(f, line) || line != kMagicLine) return bad(1, "not an nmad profile cache");
  if (!std::getline(f, line) || line.rfind("key ", 0) != 0) return bad(2, "no key line");
  int n = 2;
  if (line.substr(4) != key.text()) {
    if (note) *note = path + " was sampled under another key (" + line.substr(4) + "): stale";
    return out;
  }
  driver_profile* cur = nullptr;
  bool ended = true;
  while (std::getline(f, line)) {
    ++n;
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "driver") {
      if (!ended) return bad(n, "driver without end");
      driver_profile p;
      if (!(in >> p.driver >> p.sampled_at) || p.driver.empty()) return bad(n, "malformed driver line");
      out.push_back(std::move(p));
      cur = &out.back();
      ended = false;
    } else if (word == "load") {
      if (!cur || ended || !cur->points.empty()) return bad(n, "load line out of place");
      if (!(in >> cur->load.others_runnable >> cur->load.cpus >> cur->load.preemptions_per_s))
        return bad(n, "malformed load line");
    } else if (word == "point") {
      if (!cur || ended) return bad(n, "point outside a driver");
      profile_point p;
      std::string kind;
      if (!(in >> p.bytes >> p.one_way_us >> p.bandwidth_mbps >> kind) || (kind != "packet" && kind != "bulk") ||
          !(p.one_way_us > 0) || !(p.bandwidth_mbps > 0) || p.bytes == 0 ||
          (!cur->points.empty() && cur->points.back().bytes >= p.bytes))
        return bad(n, "malformed point line");
      p.bulk = kind == "bulk";
      cur->points.push_back(p);
    } else if (word == "end") {
      if (!cur || ended || cur->points.empty()) return bad(n, "end without points");
      ended = true;
    } else if (!word.empty()) {
      return bad(n, "unknown line '" + word + "'");
    }
    std::string rest;
    if (in >> rest) return bad(n, "trailing text '" + rest + "'");
  }
  if (!ended) return bad(n, "truncated (no end)");
  return out;
}

void save_profiles(const std::string& path, const profile_key& key, const std::vector<driver_profile>& profiles) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    f << kMagicLine << "\nkey " << key.text() << "\n";
    char buf[128];
    for (const auto& d : profiles) {
      f << "driver " << d.driver << " " << d.sampled_at << "\n";
      std::snprintf(buf, sizeof buf, "load %d %d %.3g\n", d.load.others_runnable, d.load.cpus,
                    d.load.preemptions_per_s);
      f << buf;
      for (const auto& pt : d.points) {
        std::snprintf(buf, sizeof buf, "point %zu %.6g %.6g %s\n", pt.bytes, pt.one_way_us, pt.bandwidth_mbps,
                      pt.bulk ? "bulk" : "packet");
        f << buf;
      }
      f << "end\n";
    }
    f.flush();
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot replace " + path + ": " + std::strerror(err));
  }
}

void apply_profile(driver_caps& caps, const driver_profile& p) {
  if (p.points.empty()) return;
  caps.latency_us = p.latency_us();
  caps.bandwidth_mbps = p.bandwidth_mbps();
}

// ---- sampling ---------------------------------------------------------------

namespace {

using steady = std::chrono::steady_clock;

// One end of the sampling pair. Its events are touched only by the thread
// that polls its driver (after set-up, which is single-threaded).
struct end_point final : driver_events {
  std::unique_ptr<driver> drv;
  connection_id conn = invalid_connection;
  int peer = -1;
  std::uint64_t packets = 0, recvs = 0, sends = 0;
  std::string failure;

  void on_connected(connection_id c, int rank) override {
    conn = c;
    peer = rank;
  }
  void on_packet(connection_id, std::span<const std::byte>) override { ++packets; }
  void on_send_done(void*) override { ++sends; }
  void on_recv_data_done(void*, std::size_t) override { ++recvs; }
  void on_connection_failed(connection_id, std::string_view why) override { failure = std::string(why); }
};

[[noreturn]] void sample_error(const driver_descriptor& d, const std::string& what) {
  throw std::runtime_error("sampling the " + std::string(d.name) + " driver: " + what);
}

void post(const driver_descriptor& d, end_point& e, const steady::time_point& limit,
          const std::function<post_result()>& op, const char* what) {
  for (;;) {
    const post_result r = op();
    if (r == post_result::posted) return;
    if (r == post_result::failed) sample_error(d, std::string(what) + " failed" +
                                                      (e.failure.empty() ? "" : ": " + e.failure));
    e.drv->poll();
    if (steady::now() > limit) sample_error(d, std::string(what) + " stayed refused (retry) too long");
  }
}

// A poller that found nothing for a while gives its CPU away: with fewer
// free cores than the two pollers, spinning would make each round wait for
// a scheduler tick instead of measuring the driver.
void idle_pause(unsigned& idle) {
  if (++idle > 2000) std::this_thread::yield();
}

}  // namespace

driver_profile sample_driver(const driver_descriptor& d, const sample_options& o) {
  std::unique_ptr<load_probe> own_probe;
  load_probe* probe = o.load;
  if (!probe) {
    own_probe = make_system_load_probe();
    probe = own_probe.get();
  }
  // The load before: runnable threads besides this one (the sampling
  // threads are not started yet), and the preemption count to compare.
  const int runnable_before = probe->runnable();
  const int own_before = probe->own_runnable();
  const std::int64_t switches_before = probe->involuntary_switches();
  const std::int64_t t_before = probe->now_ns();
  end_point a, b;
  const std::string key = "nmad-profile-" + random_hex(16);
  int rank = 0;
  for (end_point* e : {&a, &b}) {
    e->drv = d.create();
    driver_config cfg;
    cfg.rank = rank++;
    cfg.size = 2;
    cfg.job_key = key;
    cfg.events = e;
    e->drv->open(cfg);
  }
  const std::size_t max_packet = a.drv->caps().max_packet_size;
  const auto connect_limit = steady::now() + std::chrono::seconds(10);
  a.drv->connect(1, b.drv->local_address());
  while (a.peer < 0 || b.peer < 0) {
    a.drv->poll();
    b.drv->poll();
    if (!a.failure.empty() || !b.failure.empty())
      sample_error(d, "cannot connect a loopback pair: " + a.failure + b.failure);
    if (steady::now() > connect_limit) sample_error(d, "a loopback pair did not connect in 10 s");
  }
  a.drv->wireup_complete();
  b.drv->wireup_complete();

  std::size_t biggest = 0;
  for (std::size_t s : o.sizes) biggest = std::max(biggest, s);
  std::vector<std::byte> abuf(biggest, std::byte{0x5a}), bbuf(biggest, std::byte{0xa5});
  driver_profile prof;
  prof.driver = std::string(d.name);
  std::uint64_t cookie = 1;

  std::vector<std::size_t> sizes = o.sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  sizes.erase(std::remove(sizes.begin(), sizes.end(), std::size_t{0}), sizes.end());
  if (sizes.empty()) sample_error(d, "no sizes to sample");
  // A first pass at the smallest size warms the path up (first-use costs of
  // the connection, the buffers, the threads) and is not recorded.
  sizes.insert(sizes.begin(), sizes.front());
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t size = sizes[k];
    const bool bulk = size > max_packet;
    const auto limit = steady::now() + std::chrono::seconds(20);
    iovec av{abuf.data(), size}, bv{bbuf.data(), size};
    const std::uint64_t base = cookie;
    cookie += 1u << 20;
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<double> rtts;
    std::string b_error;
    // B: answers each message with one of the same size. Its receive for
    // round r+1 is posted before its answer to round r leaves, so A's next
    // message always finds it.
    std::thread tb([&] {
      try {
        std::uint64_t r = 0;
        if (bulk) post(d, b, limit, [&] { return b.drv->post_recv_data(b.conn, base + 2 * r, {&bv, 1}, nullptr); },
                       "post_recv_data");
        std::uint64_t seen = bulk ? b.recvs : b.packets;  // counters run on over sizes
        unsigned idle = 0;
        ready.fetch_add(1);
        while (!stop.load(std::memory_order_relaxed)) {
          b.drv->poll();
          if (!b.failure.empty()) sample_error(d, b.failure);
          const std::uint64_t got = bulk ? b.recvs : b.packets;
          if (got == seen) {
            if (steady::now() > limit) sample_error(d, "no message from the peer in 20 s");
            idle_pause(idle);
            continue;
          }
          idle = 0;
          ++seen;
          if (bulk) {
            post(d, b, limit, [&] { return b.drv->post_recv_data(b.conn, base + 2 * (r + 1), {&bv, 1}, nullptr); },
                 "post_recv_data");
            post(d, b, limit, [&] { return b.drv->post_send_data(b.conn, base + 2 * r + 1, {&bv, 1}, nullptr); },
                 "post_send_data");
          } else {
            post(d, b, limit, [&] { return b.drv->post_send_packet(b.conn, {&bv, 1}, nullptr); }, "post_send_packet");
          }
          ++r;
        }
      } catch (const std::exception& e) {
        b_error = e.what();
        stop.store(true);
      }
    });
    std::string a_error;
    try {
      while (ready.load() == 0 && !stop.load()) std::this_thread::yield();
      const auto start = steady::now();
      std::uint64_t seen = bulk ? a.recvs : a.packets;
      unsigned idle = 0;
      for (int r = 0; !stop.load(); ++r) {
        const auto t0 = steady::now();
        if (bulk) {
          post(d, a, limit, [&] { return a.drv->post_recv_data(a.conn, base + 2 * r + 1, {&av, 1}, nullptr); },
               "post_recv_data");
          post(d, a, limit, [&] { return a.drv->post_send_data(a.conn, base + 2 * r, {&av, 1}, nullptr); },
               "post_send_data");
        } else {
          post(d, a, limit, [&] { return a.drv->post_send_packet(a.conn, {&av, 1}, nullptr); }, "post_send_packet");
        }
        while ((bulk ? a.recvs : a.packets) == seen) {
          a.drv->poll();
          if (!a.failure.empty()) sample_error(d, a.failure);
          if (stop.load()) break;
          if (steady::now() > limit) sample_error(d, "no answer from the peer in 20 s");
          idle_pause(idle);
        }
        idle = 0;
        if (stop.load()) break;
        ++seen;
        const auto t1 = steady::now();
        if (r >= 2) rtts.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());  // 2 warm-up rounds
        const double spent = std::chrono::duration<double>(t1 - start).count();
        if (static_cast<int>(rtts.size()) >= o.min_rounds && (spent >= o.seconds_per_size || rtts.size() >= 10000))
          break;
      }
    } catch (const std::exception& e) {
      a_error = e.what();
    }
    stop.store(true);
    tb.join();
    if (!a_error.empty()) throw std::runtime_error(a_error);
    if (!b_error.empty()) throw std::runtime_error(b_error);
    if (rtts.empty()) sample_error(d, "no round trip measured");
    const std::size_t p10 = rtts.size() / 10;
    std::nth_element(rtts.begin(), rtts.begin() + p10, rtts.end());
    profile_point p;
    p.bytes = size;
    p.one_way_us = std::max(1e-3, rtts[p10] / 2);
    p.bandwidth_mbps = static_cast<double>(size) / p.one_way_us;  // bytes/us = MB/s
    p.bulk = bulk;
    if (k > 0) prof.points.push_back(p);
    // Drain what is still in flight before the next size (sends not yet
    // reported), so sizes do not overlap.
    const auto drain = steady::now() + std::chrono::milliseconds(200);
    while (steady::now() < drain && (a.drv->backlog(a.conn) || b.drv->backlog(b.conn))) {
      a.drv->poll();
      b.drv->poll();
    }
  }
  prof.sampled_at = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  // The load after (the sampling threads have ended), compared below.
  const int runnable_after = probe->runnable();
  const int own_after = probe->own_runnable();
  const std::int64_t switches_after = probe->involuntary_switches();
  const double seconds = static_cast<double>(probe->now_ns() - t_before) * 1e-9;
  prof.load.cpus = probe->cpus();
  // Other jobs' runnable threads: the machine's less this process's (this
  // thread at least; the drivers' own threads too, when the probe can
  // tell), before and after; the lower of the two (a load shows in both; a
  // thread woken at one reading does not make the machine busy).
  auto others = [](int all, int own) { return all < 0 ? -1 : std::max(0, all - (own > 0 ? own : 1)); };
  const int ob = others(runnable_before, own_before), oa = others(runnable_after, own_after);
  prof.load.others_runnable = ob < 0 ? oa : oa < 0 ? ob : std::min(ob, oa);
  if (switches_before >= 0 && switches_after >= switches_before && seconds > 0)
    prof.load.preemptions_per_s = static_cast<double>(switches_after - switches_before) / seconds;
  prof.rejected = check_profile(prof, a.drv->caps());
  return prof;
}

std::vector<driver_profile> profiles_for(const std::vector<std::string>& names, bool sample_missing,
                                         const sample_options& o) {
  std::vector<driver_profile> out;
  const std::string path = profile_cache_path();
  if (path.empty() && !sample_missing) return out;
  const profile_key key = current_profile_key();
  auto load = [&] {
    std::string warning;
    auto all = path.empty() ? std::vector<driver_profile>{} : load_profiles(path, key, &warning);
    if (!warning.empty()) log_write(log_level::warn, "profile", "ignoring a corrupt profile cache: " + warning);
    return all;
  };
  auto missing = [&](const std::vector<driver_profile>& have) {
    std::vector<std::string> m;
    for (const auto& n : names) {
      bool found = false;
      for (const auto& p : have) found |= p.driver == n;
      if (!found && std::find(m.begin(), m.end(), n) == m.end()) m.push_back(n);
    }
    return m;
  };
  std::vector<driver_profile> have = load();
  if (sample_missing && !missing(have).empty()) {
    int lock = -1;
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
      lock = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
      if (lock >= 0) {
        while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
        }
        have = load();  // another process may have sampled meanwhile
      }
    }
    bool added = false;
    for (const auto& name : missing(have)) {
      const driver_descriptor* d = find_driver(name);
      if (!d || d->loopback) continue;
      try {
        const auto t0 = steady::now();
        driver_profile p = sample_driver(*d, o);
        if (!p.rejected.empty() && o.check) {
          log_write(log_level::warn, "profile",
                    "the sample of the " + name + " driver is not used nor cached: " + p.rejected +
                        " (its estimates stay; sample again on a quiet machine: nmad-info --sample)");
          continue;
        }
        have.push_back(std::move(p));
        added = true;
        log_write(log_level::info, "profile",
                  "sampled the " + name + " driver in " +
                      std::to_string(std::chrono::duration<double>(steady::now() - t0).count()) + " s");
      } catch (const std::exception& e) {
        log_write(log_level::warn, "profile", std::string(e.what()) + " (its estimates stay)");
      }
    }
    if (added && !path.empty()) {
      try {
        save_profiles(path, key, have);
      } catch (const std::exception& e) {
        log_write(log_level::warn, "profile", std::string("cannot cache the sampled profiles: ") + e.what());
      }
    }
    if (lock >= 0) ::close(lock);  // releases the flock
  }
  for (auto& p : have)
    if (std::find(names.begin(), names.end(), p.driver) != names.end()) out.push_back(p);
  return out;
}

}  // namespace nmad
