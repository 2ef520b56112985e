// nmad-trace: reads the event traces NMAD_TRACE wrote (one file per rank,
// api/nmad/services/trace.hpp) and turns a job's files into something to look at.
//
//   nmad-trace summary FILES...            records per rank and event kind
//   nmad-trace dump FILES...               every record, one line each, times in ns
//                                          since the job's first record
//   nmad-trace merge OUT.json FILES...     Chrome trace event JSON (Perfetto,
//                                          chrome://tracing): one process per rank,
//                                          one thread per engine thread and one lane
//                                          per track with the packets in flight, flow
//                                          arrows from each chunk sent to its arrival
//   nmad-trace png OUT.png [--from US] [--to US] [--width PX] FILES...
//                                          renders the window [from, to] (µs since
//                                          the job's first record; default: all),
//                                          one lane per thread and track; an image
//                                          of more than 16 Mpixels is refused with
//                                          a message (memory stays bounded)
//
// Every input is checked: a file that is not a trace, of another version,
// truncated or holding an unknown event stops the tool with a message
// naming the file and the byte offset. Exit status: 0 done, 1 bad input,
// 2 usage.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "api/nmad/services/trace.hpp"

namespace {

using nmad::trace::event;
using nmad::trace::file_header;
using nmad::trace::record;

struct bad_input : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One record with its time on the job's axis.
struct item {
  record r;
  double t_ns;   // CLOCK_MONOTONIC ns
  double dur_ns; // task_run, wait: duration in ns
  int rank;
};

struct trace_file {
  std::string path;
  file_header h;
  std::vector<item> items;
};

const char* kind_name(std::uint16_t k) { return nmad::trace::event_name(static_cast<event>(k)); }

trace_file load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bad_input(path + ": cannot open: " + std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  trace_file f;
  f.path = path;
  if (bytes.size() < sizeof(file_header))
    throw bad_input(path + ": truncated at offset " + std::to_string(bytes.size()) + ": the header has " +
                    std::to_string(sizeof(file_header)) + " bytes");
  std::memcpy(&f.h, bytes.data(), sizeof f.h);
  if (std::memcmp(f.h.magic, file_header::kMagic, sizeof f.h.magic) != 0)
    throw bad_input(path + ": not an nmad trace (bad magic at offset 0)");
  if (f.h.version != file_header::kVersion)
    throw bad_input(path + ": trace format version " + std::to_string(f.h.version) +
                    " at offset 8 (this tool reads version " + std::to_string(file_header::kVersion) + ")");
  if (f.h.record_size != sizeof(record))
    throw bad_input(path + ": record size " + std::to_string(f.h.record_size) + " at offset 12 (expected " +
                    std::to_string(sizeof(record)) + ")");
  const std::size_t body = bytes.size() - sizeof(file_header);
  if (body % sizeof(record) != 0) {
    const std::size_t off = sizeof(file_header) + body / sizeof(record) * sizeof(record);
    throw bad_input(path + ": truncated record at offset " + std::to_string(off) + " (" +
                    std::to_string(body % sizeof(record)) + " of " + std::to_string(sizeof(record)) + " bytes)");
  }
  const std::size_t n = body / sizeof(record);
  std::vector<record> recs(n);
  if (n) std::memcpy(recs.data(), bytes.data() + sizeof(file_header), n * sizeof(record));
  // The clock line: counter -> CLOCK_MONOTONIC ns through the first and
  // last clock records.
  const record* first = nullptr;
  const record* last = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    const record& r = recs[i];
    if (!kind_name(r.kind))
      throw bad_input(path + ": unknown event kind " + std::to_string(r.kind) + " at offset " +
                      std::to_string(sizeof(file_header) + i * sizeof(record) + 8));
    if (r.kind == static_cast<std::uint16_t>(event::clock)) {
      if (!first || r.ts < first->ts) first = &r;
      if (!last || r.ts > last->ts) last = &r;
    }
  }
  double slope = 1.0, ns0 = 0, ts0 = 0;
  if (f.h.counter_is_tsc) {
    if (!first || first->ts == last->ts)
      throw bad_input(path + ": fewer than two clock records (" + std::to_string(n) +
                      " records): cannot convert its time-stamp counter to time");
    slope = static_cast<double>(last->extra - first->extra) / static_cast<double>(last->ts - first->ts);
    ns0 = static_cast<double>(first->extra);
    ts0 = static_cast<double>(first->ts);
  }
  f.items.reserve(n);
  std::map<std::uint32_t, std::uint64_t> last_ts;  // per thread: records are written in time order
  for (std::size_t i = 0; i < n; ++i) {
    const record& r = recs[i];
    auto [at, fresh] = last_ts.try_emplace(r.tid, r.ts);
    if (!fresh && r.ts < at->second)
      throw bad_input(path + ": thread " + std::to_string(r.tid) + " goes back in time at offset " +
                      std::to_string(sizeof(file_header) + i * sizeof(record)));
    at->second = r.ts;
    if (r.kind == static_cast<std::uint16_t>(event::clock)) continue;
    item it{r, ns0 + (static_cast<double>(r.ts) - ts0) * slope, 0, f.h.rank};
    if (r.kind == static_cast<std::uint16_t>(event::task_run) || r.kind == static_cast<std::uint16_t>(event::wait)) {
      it.dur_ns = static_cast<double>(r.len) * slope;
      it.t_ns -= it.dur_ns;  // stamped at its end: the span starts earlier
    }
    f.items.push_back(it);
  }
  // Blocks of different threads interleave in the file: time order.
  std::stable_sort(f.items.begin(), f.items.end(), [](const item& a, const item& b) { return a.t_ns < b.t_ns; });
  return f;
}

struct job {
  std::vector<trace_file> files;
  double origin = 0;  // the first record's time
};

job load_all(const std::vector<std::string>& paths) {
  if (paths.empty()) throw bad_input("no trace files given");
  job j;
  std::set<int> ranks;
  for (const auto& p : paths) {
    j.files.push_back(load(p));
    if (!ranks.insert(j.files.back().h.rank).second)
      throw bad_input(p + ": rank " + std::to_string(j.files.back().h.rank) + " appears in two files");
  }
  bool any = false;
  for (const auto& f : j.files)
    if (!f.items.empty() && (!any || f.items.front().t_ns < j.origin)) {
      j.origin = f.items.front().t_ns;
      any = true;
    }
  return j;
}

// ---- derived structure: packets in flight, chunks of built packets, flows -----

struct span_ev {
  int rank;
  std::uint64_t lane;  // thread id, or a track lane (see track_lane)
  double start, end;   // ns
  std::string name;
  std::string args;    // JSON object body
  int color;           // palette index (png)
};
struct point_ev {
  int rank;
  std::uint64_t lane;
  double t;
  std::uint16_t kind;
  std::string args;
};
struct flow_ev {
  int from_rank, to_rank;
  std::uint64_t from_lane, to_lane;
  double from_t, to_t;
};

// A track's lane: above every kernel thread id (pid_max is at most 2^22)
// and within 31 bits, which every viewer takes as a thread id.
std::uint64_t track_lane(int peer, unsigned track) {
  return (std::uint64_t{1} << 30) + static_cast<std::uint64_t>(peer + 1) * 64 + (track & 63);
}

struct timeline {
  std::vector<span_ev> spans;
  std::vector<point_ev> points;
  std::vector<flow_ev> flows;
  std::map<std::pair<int, std::uint64_t>, std::string> lane_names;
};

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

std::string record_args(const record& r) {
  std::ostringstream o;
  o << "\"peer\":" << r.peer << ",\"track\":" << r.track << ",\"tag\":" << r.tag << ",\"seq\":" << r.seq
    << ",\"len\":" << r.len;
  const auto k = static_cast<event>(r.kind);
  if (k == event::chunk || k == event::chunk_arrive)
    o << ",\"offset\":" << (r.extra >> 8) << ",\"chunk\":\"" << nmad::trace::chunk_kind_name(r.extra & 0xff) << "\"";
  return o.str();
}

timeline build(const job& j) {
  timeline tl;
  // Where each chunk went (sender side) and arrived: flow key.
  using key = std::tuple<int, int, std::uint64_t, std::uint32_t, std::uint64_t, unsigned>;
  std::map<key, std::vector<std::pair<std::uint64_t, double>>> sent;  // -> (lane, t), in order
  struct arrival {
    key k;
    int rank;
    std::uint64_t lane;
    double t;
  };
  std::vector<arrival> arrivals;
  for (const auto& f : j.files) {
    const int rank = f.h.rank;
    char pname[160];
    std::snprintf(pname, sizeof pname, "rank %d (%s, pid %u)", rank, f.h.host, f.h.pid);
    tl.lane_names[{rank, ~std::uint64_t{0}}] = pname;
    std::map<std::uint32_t, std::vector<const item*>> pending_chunks;   // per thread
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::deque<const item*>> posted;  // (lane, id)
    for (const item& it : f.items) {
      const record& r = it.r;
      const auto k = static_cast<event>(r.kind);
      const double t = it.t_ns - j.origin;
      const std::uint64_t lane = r.tid;
      if (!tl.lane_names.count({rank, lane})) tl.lane_names[{rank, lane}] = "thread " + std::to_string(r.tid);
      switch (k) {
        case event::chunk:
          pending_chunks[r.tid].push_back(&it);
          break;
        case event::packet_built: {
          auto& pc = pending_chunks[r.tid];
          const std::size_t nch = std::min<std::size_t>(r.seq, pc.size());
          std::ostringstream chunks;
          for (std::size_t i = pc.size() - nch; i < pc.size(); ++i) {
            const record& c = pc[i]->r;
            chunks << (i == pc.size() - nch ? "" : ",") << "\"" << nmad::trace::chunk_kind_name(c.extra & 0xff)
                   << " tag " << c.tag << " seq " << c.seq << " @" << (c.extra >> 8) << "+" << c.len << "\"";
            sent[{rank, r.peer, c.tag, c.seq, c.extra >> 8, static_cast<unsigned>(c.extra & 0xff)}].push_back(
                {lane, pc[i]->t_ns - j.origin});
          }
          pc.clear();
          tl.points.push_back({rank, lane, t, r.kind, record_args(r) + ",\"chunks\":[" + chunks.str() + "]"});
          break;
        }
        case event::send_inline:
          sent[{rank, r.peer, r.tag, r.seq, 0, 1}].push_back({lane, t});
          tl.points.push_back({rank, lane, t, r.kind, record_args(r)});
          break;
        case event::packet_arrive:
          if (r.extra == 1) arrivals.push_back({{r.peer, rank, r.tag, r.seq, 0, 1}, rank, lane, t});  // a whole data message
          tl.points.push_back({rank, lane, t, r.kind, record_args(r)});
          break;
        case event::chunk_arrive:
          arrivals.push_back(
              {{r.peer, rank, r.tag, r.seq, r.extra >> 8, static_cast<unsigned>(r.extra & 0xff)}, rank, lane, t});
          tl.points.push_back({rank, lane, t, r.kind, record_args(r)});
          break;
        case event::packet_post:
        case event::data_post:
          posted[{track_lane(r.peer, r.track), r.extra}].push_back(&it);
          break;
        case event::packet_done:
        case event::data_done: {
          const std::uint64_t tlane = track_lane(r.peer, r.track);
          auto& q = posted[{tlane, r.extra}];
          if (q.empty()) break;  // posted before tracing started
          const item* p = q.front();
          q.pop_front();
          tl.lane_names[{rank, tlane}] = "track to rank " + std::to_string(r.peer) + " rail " + std::to_string(r.track);
          tl.spans.push_back({rank, tlane, p->t_ns - j.origin, t, k == event::packet_done ? "packet" : "rdv data",
                              record_args(p->r), k == event::packet_done ? 1 : 2});
          break;
        }
        case event::task_run:
          tl.spans.push_back({rank, lane, t, t + it.dur_ns, "progress task", "\"work\":" + std::to_string(r.extra), 3});
          break;
        case event::wait:
          tl.spans.push_back({rank, lane, t, t + it.dur_ns, "wait", "", 4});
          break;
        default:
          tl.points.push_back({rank, lane, t, r.kind, record_args(r)});
      }
    }
  }
  // Flows: the n-th arrival of a key answers its n-th send.
  std::map<key, std::size_t> used;
  for (const arrival& a : arrivals) {
    auto it = sent.find(a.k);
    if (it == sent.end()) continue;
    std::size_t& u = used[a.k];
    if (u >= it->second.size()) continue;
    const auto& s = it->second[u++];
    tl.flows.push_back({std::get<0>(a.k), a.rank, s.first, a.lane, s.second, a.t});
  }
  return tl;
}

// ---- merge: Chrome trace event JSON ------------------------------------------

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

std::string lane_id(std::uint64_t lane) { return std::to_string(lane); }

void merge(const std::string& out_path, const job& j) {
  const timeline tl = build(j);
  std::ofstream o(out_path);
  if (!o) throw bad_input(out_path + ": cannot create: " + std::strerror(errno));
  o << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) o << ",\n";
    first = false;
  };
  for (const auto& [k, name] : tl.lane_names) {
    sep();
    if (k.second == ~std::uint64_t{0})
      o << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << k.first << ",\"args\":{\"name\":\""
        << json_escape(name) << "\"}}";
    else
      o << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << k.first << ",\"tid\":" << lane_id(k.second)
        << ",\"args\":{\"name\":\"" << json_escape(name) << "\"}}";
  }
  for (const auto& s : tl.spans) {
    sep();
    o << "{\"ph\":\"X\",\"name\":\"" << s.name << "\",\"cat\":\"nmad\",\"pid\":" << s.rank
      << ",\"tid\":" << lane_id(s.lane) << ",\"ts\":" << num(s.start / 1000) << ",\"dur\":"
      << num(std::max(0.0, s.end - s.start) / 1000) << ",\"args\":{" << s.args << "}}";
  }
  // Point events as 10 ns slices, so that flow arrows bind to them.
  for (const auto& p : tl.points) {
    sep();
    o << "{\"ph\":\"X\",\"name\":\"" << kind_name(p.kind) << "\",\"cat\":\"nmad\",\"pid\":" << p.rank
      << ",\"tid\":" << lane_id(p.lane) << ",\"ts\":" << num(p.t / 1000) << ",\"dur\":0.010,\"args\":{" << p.args
      << "}}";
  }
  std::size_t id = 1;
  for (const auto& f : tl.flows) {
    sep();
    o << "{\"ph\":\"s\",\"name\":\"chunk\",\"cat\":\"flow\",\"id\":" << id << ",\"pid\":" << f.from_rank
      << ",\"tid\":" << lane_id(f.from_lane) << ",\"ts\":" << num(f.from_t / 1000) << "},\n";
    o << "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"chunk\",\"cat\":\"flow\",\"id\":" << id << ",\"pid\":" << f.to_rank
      << ",\"tid\":" << lane_id(f.to_lane) << ",\"ts\":" << num(f.to_t / 1000) << "}";
    ++id;
  }
  o << "\n]}\n";
  o.close();
  if (!o) throw bad_input(out_path + ": write failed");
  std::printf("%s: %zu ranks, %zu slices, %zu events, %zu flows\n", out_path.c_str(), j.files.size(),
              tl.spans.size(), tl.points.size(), tl.flows.size());
}

// ---- png -------------------------------------------------------------------------

// The largest image png draws (about 3 bytes per pixel for the image, as
// much again for its compressed stream): memory stays bounded whatever the
// trace holds.
constexpr std::size_t kMaxPixels = std::size_t{16} << 20;

// RGB pixels stored as PNG scan lines (a filter byte, 0, before each row),
// so the encoder compresses them as they are.
struct image {
  int w, h;
  std::size_t stride;            // bytes per scan line: 1 + 3 * w
  std::vector<std::uint8_t> px;  // h scan lines
  image(int w_, int h_)
      : w(w_), h(h_), stride(1 + static_cast<std::size_t>(w_) * 3), px(stride * static_cast<std::size_t>(h_), 255) {
    for (int y = 0; y < h; ++y) px[y * stride] = 0;
  }
  void set(int x, int y, std::array<std::uint8_t, 3> c) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    std::memcpy(&px[static_cast<std::size_t>(y) * stride + 1 + static_cast<std::size_t>(x) * 3], c.data(), 3);
  }
  void fill(int x0, int y0, int x1, int y1, std::array<std::uint8_t, 3> c) {
    for (int y = std::max(0, y0); y < std::min(h, y1); ++y)
      for (int x = std::max(0, x0); x < std::min(w, x1); ++x) set(x, y, c);
  }
  void line(int x0, int y0, int x1, int y1, std::array<std::uint8_t, 3> c) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (int guard = 0; guard < 100000; ++guard) {
      set(x0, y0, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
};

// A 5x7 font: each glyph is 7 rows, the low 5 bits of each byte (bit 4 = left).
const std::map<char, std::array<std::uint8_t, 7>>& font() {
  static const std::map<char, std::array<std::uint8_t, 7>> f = {
      {'A', {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}}, {'B', {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e}},
      {'C', {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e}}, {'D', {0x1e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1e}},
      {'E', {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f}}, {'F', {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10}},
      {'G', {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f}}, {'H', {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}},
      {'I', {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c}},
      {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f}},
      {'M', {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x11}},
      {'O', {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}}, {'P', {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10}},
      {'Q', {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d}}, {'R', {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11}},
      {'S', {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e}}, {'T', {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
      {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04}},
      {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a}}, {'X', {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11}},
      {'Y', {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04}}, {'Z', {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f}},
      {'0', {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e}}, {'1', {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e}},
      {'2', {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f}}, {'3', {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e}},
      {'4', {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02}}, {'5', {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e}},
      {'6', {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e}}, {'7', {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e}}, {'9', {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c}},
      {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c}}, {'-', {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00}},
      {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f}}, {':', {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00}},
      {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}}, {'>', {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}}, {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}}, {'+', {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00}},
      {' ', {0, 0, 0, 0, 0, 0, 0}},
  };
  return f;
}

void text(image& im, int x, int y, const std::string& s, std::array<std::uint8_t, 3> c) {
  for (char ch : s) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    auto it = font().find(u);
    if (it != font().end())
      for (int row = 0; row < 7; ++row)
        for (int col = 0; col < 5; ++col)
          if (it->second[row] & (0x10 >> col)) im.set(x + col, y + row, c);
    x += 6;
  }
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n, std::uint32_t c = 0) {
  static std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t v = i;
      for (int k = 0; k < 8; ++k) v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
      t[i] = v;
    }
    return t;
  }();
  c = ~c;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

void put32(std::vector<std::uint8_t>& v, std::uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<std::uint8_t>(x >> s));
}

// One chunk to o: length, type, data, CRC of type and data.
void chunk(std::ostream& o, const char* type, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> head;
  put32(head, static_cast<std::uint32_t>(data.size()));
  head.insert(head.end(), type, type + 4);
  std::vector<std::uint8_t> tail;
  put32(tail, crc32(data.data(), data.size(), crc32(head.data() + 4, 4)));
  o.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  o.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  o.write(reinterpret_cast<const char*>(tail.data()), static_cast<std::streamsize>(tail.size()));
}

// Deflate (RFC 1951) with the fixed Huffman codes; matches repeat the
// pixel to the left (distance 3) or the row above (distance = stride), which
// is what a drawing of flat lanes is made of.
class bit_writer {
 public:
  explicit bit_writer(std::vector<std::uint8_t>& out) : _out(out) {}
  void put(std::uint32_t v, int bits) {  // LSB first
    _acc |= v << _n;
    _n += bits;
    while (_n >= 8) {
      _out.push_back(static_cast<std::uint8_t>(_acc));
      _acc >>= 8;
      _n -= 8;
    }
  }
  void huffman(std::uint32_t code, int bits) {  // Huffman codes go MSB first
    std::uint32_t r = 0;
    for (int i = 0; i < bits; ++i) r |= ((code >> i) & 1u) << (bits - 1 - i);
    put(r, bits);
  }
  void flush() {
    if (_n) _out.push_back(static_cast<std::uint8_t>(_acc));
    _acc = 0;
    _n = 0;
  }

 private:
  std::vector<std::uint8_t>& _out;
  std::uint32_t _acc = 0;
  int _n = 0;
};

void fixed_symbol(bit_writer& w, unsigned sym) {
  if (sym < 144) w.huffman(0x30 + sym, 8);
  else if (sym < 256) w.huffman(0x190 + (sym - 144), 9);
  else if (sym < 280) w.huffman(sym - 256, 7);
  else w.huffman(0xc0 + (sym - 280), 8);
}

void fixed_match(bit_writer& w, unsigned len, unsigned dist) {
  static const unsigned len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                        31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  static const unsigned len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                         2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
  static const unsigned dist_base[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                         33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                         1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
  int li = 28;
  while (len_base[li] > len) --li;
  fixed_symbol(w, 257 + static_cast<unsigned>(li));
  if (len_extra[li]) w.put(len - len_base[li], static_cast<int>(len_extra[li]));
  int di = 29;
  while (dist_base[di] > dist) --di;
  w.huffman(static_cast<std::uint32_t>(di), 5);
  const int dextra = di < 4 ? 0 : di / 2 - 1;
  if (dextra) w.put(dist - dist_base[di], dextra);
}

void deflate_fixed(const std::vector<std::uint8_t>& raw, std::size_t stride, std::vector<std::uint8_t>& out) {
  bit_writer w(out);
  w.put(1, 1);  // final block
  w.put(1, 2);  // fixed Huffman codes
  auto run = [&](std::size_t i, std::size_t dist) {
    std::size_t n = 0;
    if (i < dist || dist > 32768) return n;
    while (n < 258 && i + n < raw.size() && raw[i + n] == raw[i + n - dist]) ++n;
    return n;
  };
  for (std::size_t i = 0; i < raw.size();) {
    const std::size_t left = run(i, 3), up = run(i, stride);
    const std::size_t best = std::max(left, up);
    if (best >= 3) {
      fixed_match(w, static_cast<unsigned>(best), static_cast<unsigned>(up >= left ? stride : 3));
      i += best;
    } else {
      fixed_symbol(w, raw[i]);
      ++i;
    }
  }
  fixed_symbol(w, 256);
  w.flush();
}

// PNG: 8-bit RGB, filter 0 on every row, one zlib stream (the image's
// scan lines compressed in place: no copy of them is made).
void write_png(std::ostream& o, const image& im) {
  std::vector<std::uint8_t> z;
  z.reserve(im.px.size() / 8 * 9 + 64);  // fixed codes: at most 9 bits a byte
  z.push_back(0x78);
  z.push_back(0x01);
  deflate_fixed(im.px, im.stride, z);
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t c : im.px) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put32(z, (b << 16) | a);
  static const char signature[] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  o.write(signature, sizeof signature);
  std::vector<std::uint8_t> ihdr;
  put32(ihdr, static_cast<std::uint32_t>(im.w));
  put32(ihdr, static_cast<std::uint32_t>(im.h));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  chunk(o, "IHDR", ihdr);
  chunk(o, "IDAT", z);
  chunk(o, "IEND", {});
}

using rgb = std::array<std::uint8_t, 3>;
const rgb kPalette[] = {
    {120, 120, 120},  // 0 other events
    {66, 133, 244},   // 1 packet in flight
    {155, 89, 182},   // 2 rendezvous data in flight
    {52, 168, 83},    // 3 progress task
    {230, 230, 230},  // 4 wait (light: behind the events)
    {234, 67, 53},    // 5 sends (submit, inline, packet built)
    {251, 140, 0},    // 6 arrivals (packet, chunk)
    {0, 150, 136},    // 7 match, completions
};

int point_color(std::uint16_t k) {
  switch (static_cast<event>(k)) {
    case event::send_submit:
    case event::send_inline:
    case event::packet_built:
      return 5;
    case event::packet_arrive:
    case event::chunk_arrive:
      return 6;
    case event::match:
    case event::send_done:
    case event::recv_done:
      return 7;
    default:
      return 0;
  }
}

void png(const std::string& out_path, const job& j, double from_us, double to_us, int width) {
  const timeline tl = build(j);
  double t0 = from_us * 1000, t1 = to_us * 1000;
  if (to_us < 0) {
    t1 = 0;
    for (const auto& s : tl.spans) t1 = std::max(t1, s.end);
    for (const auto& p : tl.points) t1 = std::max(t1, p.t);
  }
  if (t1 <= t0) throw bad_input("png: empty window: --from " + num(t0 / 1000) + " --to " + num(t1 / 1000) + " us");
  // Lanes: every (rank, lane) with something in the window, in order.
  std::map<std::pair<int, std::uint64_t>, int> row;
  auto in = [&](double a, double b) { return b >= t0 && a <= t1; };
  for (const auto& s : tl.spans)
    if (in(s.start, s.end)) row[{s.rank, s.lane}] = 0;
  for (const auto& p : tl.points)
    if (in(p.t, p.t)) row[{p.rank, p.lane}] = 0;
  const int label_w = 190, lane_h = 18, top = 22, legend_h = 40;
  int r = 0;
  for (auto& [k, v] : row) v = r++;
  const std::size_t height_needed = top + static_cast<std::size_t>(std::max(1, r)) * lane_h + legend_h;
  if (height_needed * static_cast<std::size_t>(width) > kMaxPixels)
    throw bad_input("png: " + std::to_string(row.size()) + " lanes (threads and tracks) in the window " +
                    num(t0 / 1000) + "-" + num(t1 / 1000) + " us make a " + std::to_string(width) + "x" +
                    std::to_string(height_needed) + " image, more than " + std::to_string(kMaxPixels >> 20) +
                    " Mpixels: choose a shorter window (--from/--to), fewer files, a smaller --width, or merge "
                    "to JSON");
  const int height = static_cast<int>(height_needed);
  image im(width, height);
  const double plot_w = width - label_w - 10;
  auto x_of = [&](double t) { return label_w + static_cast<int>(std::lround((t - t0) / (t1 - t0) * plot_w)); };
  text(im, 4, 6, "nmad trace  " + num(t0 / 1000) + " - " + num(t1 / 1000) + " us", {0, 0, 0});
  for (const auto& [k, v] : row) {
    const int y = top + v * lane_h;
    if (v % 2) im.fill(0, y, width, y + lane_h, {246, 246, 250});
    std::string name = tl.lane_names.count(k) ? tl.lane_names.at(k) : "lane";
    std::string label = "R" + std::to_string(k.first) + " " + name;
    if (label.size() > 30) label.resize(30);
    text(im, 4, y + 5, label, {40, 40, 40});
  }
  auto lane_y = [&](int rank, std::uint64_t lane) {
    auto it = row.find({rank, lane});
    return it == row.end() ? -1 : top + it->second * lane_h;
  };
  for (const auto& s : tl.spans) {
    if (!in(s.start, s.end)) continue;
    const int y = lane_y(s.rank, s.lane);
    const int x0 = std::max(label_w, x_of(s.start)), x1 = std::min(width - 10, std::max(x0 + 1, x_of(s.end)));
    im.fill(x0, y + 3, x1, y + lane_h - 3, kPalette[s.color]);
  }
  for (const auto& p : tl.points) {
    if (!in(p.t, p.t)) continue;
    const int y = lane_y(p.rank, p.lane), x = x_of(p.t);
    im.fill(x, y + 2, x + 2, y + lane_h - 2, kPalette[point_color(p.kind)]);
  }
  for (const auto& f : tl.flows) {
    if (!in(f.from_t, f.to_t)) continue;
    const int y0 = lane_y(f.from_rank, f.from_lane), y1 = lane_y(f.to_rank, f.to_lane);
    if (y0 < 0 || y1 < 0) continue;
    im.line(x_of(f.from_t), y0 + lane_h / 2, x_of(f.to_t), y1 + lane_h / 2, {90, 90, 90});
  }
  const std::pair<int, const char*> legend[] = {{1, "packet"}, {2, "rdv data"}, {3, "task"}, {4, "wait"},
                                                {5, "send"},   {6, "arrival"},  {7, "match/done"}, {0, "other"}};
  int lx = 4;
  const int ly = top + std::max(1, r) * lane_h + 14;
  for (const auto& [c, name] : legend) {
    im.fill(lx, ly, lx + 10, ly + 10, kPalette[c]);
    text(im, lx + 14, ly + 2, name, {0, 0, 0});
    lx += 14 + 6 * static_cast<int>(std::strlen(name)) + 14;
  }
  text(im, lx, ly + 2, "lines: chunk sent -> arrived", {90, 90, 90});
  std::ofstream o(out_path, std::ios::binary);
  if (!o) throw bad_input(out_path + ": cannot create: " + std::strerror(errno));
  write_png(o, im);
  o.close();
  if (!o) throw bad_input(out_path + ": cannot write");
  std::printf("%s: %dx%d, %zu lanes, window %s-%s us\n", out_path.c_str(), width, height, row.size(),
              num(t0 / 1000).c_str(), num(t1 / 1000).c_str());
}

// ---- summary, dump ------------------------------------------------------------

void summary(const job& j) {
  for (const auto& f : j.files) {
    std::map<std::uint16_t, std::size_t> n;
    std::set<std::uint32_t> threads;
    for (const auto& it : f.items) {
      ++n[it.r.kind];
      threads.insert(it.r.tid);
    }
    const double span = f.items.empty() ? 0 : (f.items.back().t_ns - f.items.front().t_ns) / 1000;
    std::printf("rank %d: %s, %zu records, %zu threads, %.3f us, host %s, pid %u\n", f.h.rank, f.path.c_str(),
                f.items.size(), threads.size(), span, f.h.host, f.h.pid);
    for (const auto& [k, c] : n) std::printf("rank %d %s %zu\n", f.h.rank, kind_name(k), c);
  }
}

void dump(const job& j) {
  for (const auto& f : j.files)
    for (const auto& it : f.items) {
      const record& r = it.r;
      std::printf("%d %" PRIu32 " %.1f %s peer=%d track=%u tag=%" PRIu64 " seq=%" PRIu32 " len=%" PRIu64
                  " extra=%" PRIu64 "\n",
                  f.h.rank, r.tid, it.t_ns - j.origin, kind_name(r.kind), r.peer, r.track, r.tag, r.seq, r.len,
                  r.extra);
    }
}

int usage() {
  std::fprintf(stderr,
               "usage: nmad-trace summary FILES...\n"
               "       nmad-trace dump FILES...\n"
               "       nmad-trace merge OUT.json FILES...\n"
               "       nmad-trace png OUT.png [--from US] [--to US] [--width PX] FILES...\n");
  return 2;
}

double number(const std::string& opt, const char* v) {
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (!end || *end || end == v) throw std::invalid_argument(opt + " " + v + ": not a number");
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  try {
    if (cmd == "summary" || cmd == "dump") {
      const job j = load_all(std::vector<std::string>(argv + 2, argv + argc));
      cmd == "summary" ? summary(j) : dump(j);
      return 0;
    }
    if (cmd == "merge") {
      if (argc < 4) return usage();
      const job j = load_all(std::vector<std::string>(argv + 3, argv + argc));
      merge(argv[2], j);
      return 0;
    }
    if (cmd == "png") {
      if (argc < 4) return usage();
      double from = 0, to = -1;
      int width = 1200;
      std::vector<std::string> files;
      for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--from" || a == "--to" || a == "--width") && i + 1 < argc) {
          const double v = number(a, argv[++i]);
          if (a == "--from") from = v;
          else if (a == "--to") to = v;
          else width = static_cast<int>(v);
        } else if (a.rfind("--", 0) == 0) {
          return usage();
        } else {
          files.push_back(a);
        }
      }
      if (width < 400 || width > 20000) throw std::invalid_argument("--width must be 400-20000");
      png(argv[2], load_all(files), from, to, width);
      return 0;
    }
  } catch (const bad_input& e) {
    std::fprintf(stderr, "nmad-trace: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmad-trace: %s\n", e.what());
    return 2;
  }
  return usage();
}
