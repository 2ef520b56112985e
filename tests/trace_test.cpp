// Event traces (NMAD_TRACE, api/nmad/services/trace.hpp) of real 2-rank jobs
// started by nmad-run (tests/workers/trace_worker.cpp), read back with
// nmad-trace: a ping-pong shows every send posted and arriving, matched and
// completed on the peer, in time order; an aggregated burst shows packets
// of several chunks; the merged JSON parses and holds the events and flow
// arrows; the PNG is well formed; bad files and a bad NMAD_TRACE give
// clear errors; crafted files cannot make nmad-trace use unbounded memory;
// tracing off writes nothing.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/nmad/services/trace.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    char t[] = "/tmp/nmad-trace-test-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

nmad_test::run_result run_job(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout", "100",
                                   nmad_test::runfile("tests/workers/trace_worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  nmad_test::run_options o;
  o.timeout_s = 130;
  o.env = env;
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

nmad_test::run_result tool(std::vector<std::string> args) {
  args.insert(args.begin(), nmad_test::runfile("tools/nmad-trace"));
  nmad_test::run_options o;
  o.timeout_s = 60;
  return nmad_test::run(args, o);
}

// One line of `nmad-trace dump`.
struct ev {
  int rank = -1;
  unsigned tid = 0;
  double t = 0;
  std::string kind;
  int peer = -1;
  unsigned track = 0;
  unsigned long long tag = 0, len = 0, extra = 0;
  unsigned seq = 0;
};

std::vector<ev> parse_dump(const std::string& text) {
  std::vector<ev> v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ev e;
    char kind[64];
    if (std::sscanf(line.c_str(), "%d %u %lf %63s peer=%d track=%u tag=%llu seq=%u len=%llu extra=%llu", &e.rank,
                    &e.tid, &e.t, kind, &e.peer, &e.track, &e.tag, &e.seq, &e.len, &e.extra) == 10) {
      e.kind = kind;
      v.push_back(e);
    } else {
      FAIL("unparsed dump line: " << line);
    }
  }
  return v;
}

// The first event of `kind` on `rank` that `pred` accepts, at or after t.
template <typename P>
const ev* find(const std::vector<ev>& evs, int rank, const std::string& kind, double t, P pred) {
  for (const ev& e : evs)
    if (e.rank == rank && e.kind == kind && e.t >= t && pred(e)) return &e;
  return nullptr;
}

std::vector<ev> traced(const fs::path& prefix) {
  auto d = tool({"dump", prefix.string() + ".0", prefix.string() + ".1"});
  REQUIRE(d.status == 0);
  return parse_dump(d.out);
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::uint32_t crc32(const unsigned char* p, std::size_t n) {
  std::uint32_t c = ~0u;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

std::uint32_t be32(const std::string& s, std::size_t at) {
  return (std::uint32_t(std::uint8_t(s[at])) << 24) | (std::uint32_t(std::uint8_t(s[at + 1])) << 16) |
         (std::uint32_t(std::uint8_t(s[at + 2])) << 8) | std::uint32_t(std::uint8_t(s[at + 3]));
}

}  // namespace

namespace {
// The events of `trace_worker pingpong n` (both ranks' traces).
void check_pingpong(const std::vector<ev>& evs, int n) {
  REQUIRE(!evs.empty());
  // Per thread, time never goes back (the dump is in time order; the tool
  // also refuses a file whose thread goes back).
  std::map<std::pair<int, unsigned>, double> last;
  for (const ev& e : evs) {
    auto [it, fresh] = last.try_emplace({e.rank, e.tid}, e.t);
    CHECK(e.t >= it->second);
    it->second = e.t;
  }
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    const int peer = 1 - rank;
    int sends = 0;
    for (const ev& s : evs) {
      if (s.rank != rank || s.tag != 7 || (s.kind != "send_inline" && s.kind != "send_submit")) continue;
      ++sends;
      CAPTURE(s.seq);
      CHECK(s.peer == peer);
      auto same = [&](const ev& e) { return e.tag == 7 && e.seq == s.seq; };
      double posted = s.t;
      if (s.kind == "send_submit") {
        // Through a packet: its chunk, the packet built, posted, completed.
        const ev* c = find(evs, rank, "chunk", s.t, same);
        REQUIRE(c);
        const ev* b = find(evs, rank, "packet_built", c->t, [&](const ev& e) { return e.peer == peer; });
        REQUIRE(b);
        const ev* p = find(evs, rank, "packet_post", b->t, [&](const ev& e) { return e.peer == peer; });
        REQUIRE(p);
        CHECK(find(evs, rank, "packet_done", p->t, [&](const ev& e) { return e.extra == p->extra; }));
        posted = p->t;
      }
      // (A send_inline is its own completion.)
      if (s.kind == "send_submit")
        CHECK(find(evs, rank, "send_done", s.t, [&](const ev& e) { return e.tag == 7 && e.peer == peer; }));
      // On the peer: it arrives after it was posted, is matched, completes.
      const ev* a = find(evs, peer, "packet_arrive", posted, [&](const ev& e) { return e.extra == 1 && same(e); });
      if (!a) a = find(evs, peer, "chunk_arrive", posted, same);
      REQUIRE(a);
      // The compact form's fast path matches and completes at once (its
      // recv_done is the match); else a match record comes first.
      const ev* m = find(evs, peer, "match", a->t, same);
      if (!m && a->kind == "packet_arrive") m = a;
      REQUIRE(m);
      const ev* d = find(evs, peer, "recv_done", m->t, same);
      REQUIRE(d);
      CHECK(d->len == 8);
    }
    CHECK(sends == n);
    int recvs = 0;
    for (const ev& e : evs) recvs += e.rank == rank && e.kind == "recv_submit" && e.tag == 7;
    CHECK(recvs == n);
  }
  // The 256 KiB message: rendezvous request, ready-to-receive, data, done.
  const ev* sub = find(evs, 0, "send_submit", 0, [](const ev& e) { return e.tag == 8 && e.len == 256 * 1024; });
  REQUIRE(sub);
  const ev* req = find(evs, 0, "chunk", sub->t, [](const ev& e) { return e.tag == 8 && (e.extra & 0xff) == 2; });
  REQUIRE(req);
  const ev* req_in = find(evs, 1, "chunk_arrive", req->t, [](const ev& e) { return e.tag == 8 && (e.extra & 0xff) == 2; });
  REQUIRE(req_in);
  const ev* m8 = find(evs, 1, "match", req_in->t, [](const ev& e) { return e.tag == 8; });
  REQUIRE(m8);
  std::uint64_t moved = 0;
  const ev* in = nullptr;
  if (const ev* pull = find(evs, 1, "rdv_pull", m8->t, [](const ev& e) { return e.tag == 8; })) {
    // The receiver reads the sender's memory (shm), then tells the sender.
    in = find(evs, 1, "rdv_data_done", pull->t, [](const ev& e) { return e.tag == 8; });
    REQUIRE(in);
    const ev* rtr = find(evs, 1, "rdv_ready_sent", in->t, [](const ev&) { return true; });
    REQUIRE(rtr);
    CHECK(find(evs, 0, "rdv_ready", rtr->t, [](const ev&) { return true; }));
    for (const ev& e : evs) moved += (e.rank == 1 && e.kind == "rdv_pull") ? e.len : 0;
  } else {
    // The receiver asks, the sender pushes.
    const ev* rtr = find(evs, 1, "rdv_ready_sent", m8->t, [](const ev&) { return true; });
    REQUIRE(rtr);
    const ev* rtr_in = find(evs, 0, "rdv_ready", rtr->t, [](const ev&) { return true; });
    REQUIRE(rtr_in);
    const ev* data = find(evs, 0, "data_post", rtr_in->t, [](const ev&) { return true; });
    REQUIRE(data);
    CHECK(find(evs, 0, "data_done", data->t, [&](const ev& e) { return e.extra == data->extra; }));
    in = find(evs, 1, "rdv_data_done", data->t, [](const ev& e) { return e.tag == 8; });
    REQUIRE(in);
    for (const ev& e : evs) moved += (e.rank == 0 && e.kind == "data_post") ? e.len : 0;
  }
  CHECK(moved == 256 * 1024);
  const ev* done = find(evs, 1, "recv_done", in->t, [](const ev& e) { return e.tag == 8; });
  REQUIRE(done);
  CHECK(done->len == 256 * 1024);
  // Waits and the sessions' ends are there too.
  CHECK(find(evs, 0, "session_begin", 0, [](const ev& e) { return e.peer == 2; }));
  CHECK(find(evs, 1, "session_end", 0, [](const ev&) { return true; }));
}
}  // namespace

TEST_CASE("a traced ping-pong: every send posted, arriving, matched and completed, in order") {
  temp_dir dir;
  const fs::path prefix = dir.path / "pp";
  const int n = 40;
  auto r = run_job({"pingpong", std::to_string(n)}, {{"NMAD_TRACE", prefix.string()}});
  REQUIRE(r.status == 0);
  CHECK(fs::exists(prefix.string() + ".0"));
  CHECK(fs::exists(prefix.string() + ".1"));
  check_pingpong(traced(prefix), n);

  SUBCASE("merged into Chrome trace event JSON that parses, with flows") {
    const fs::path json = dir.path / "pp.json";
    auto m = tool({"merge", json.string(), prefix.string() + ".0", prefix.string() + ".1"});
    REQUIRE(m.status == 0);
    const std::string check =
        "import json,sys\n"
        "d=json.load(open(sys.argv[1]))\n"
        "ev=d['traceEvents']\n"
        "names={e.get('name') for e in ev}\n"
        "need={'send_inline','packet_arrive','match','recv_done','packet','rdv_ready','process_name'}\n"
        "missing=need-names\n"
        "assert not missing, missing\n"
        "s=[e for e in ev if e['ph']=='s']; f=[e for e in ev if e['ph']=='f']\n"
        "assert len(s)>=80 and len(s)==len(f), (len(s),len(f))\n"
        "assert {e['pid'] for e in ev if e['ph']=='X'}=={0,1}\n"
        "print('json ok', len(ev))\n";
    const fs::path py = dir.path / "check.py";
    std::ofstream(py) << check;
    nmad_test::run_options o;
    o.search_path = true;
    auto c = nmad_test::run({"python3", py.string(), json.string()}, o);
    INFO(c.err);
    CHECK(c.status == 0);
    CHECK(c.out.find("json ok") != std::string::npos);
  }

  SUBCASE("a PNG of a window: signature, IHDR, IDAT, IEND, every CRC") {
    const fs::path png = dir.path / "pp.png";
    auto p = tool({"png", png.string(), "--from", "0", "--to", "200", "--width", "800", prefix.string() + ".0",
                   prefix.string() + ".1"});
    INFO(p.err);
    REQUIRE(p.status == 0);
    const std::string s = read_all(png);
    REQUIRE(s.size() > 8 + 25 + 12 + 12);
    CHECK(s.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
    std::size_t at = 8;
    std::vector<std::string> types;
    while (at + 12 <= s.size()) {
      const std::uint32_t len = be32(s, at);
      REQUIRE(at + 12 + len <= s.size());
      types.push_back(s.substr(at + 4, 4));
      CHECK(crc32(reinterpret_cast<const unsigned char*>(s.data()) + at + 4, 4 + len) == be32(s, at + 8 + len));
      if (types.back() == "IHDR") {
        CHECK(be32(s, at + 8) == 800);
        CHECK(be32(s, at + 12) > 40);
      }
      at += 12 + len;
    }
    CHECK(at == s.size());
    REQUIRE(types.size() >= 3);
    CHECK(types.front() == "IHDR");
    CHECK(types[1] == "IDAT");
    CHECK(types.back() == "IEND");
    // The image data inflates (zlib) to one filter byte and 800 RGB pixels per row.
    const fs::path py = dir.path / "png.py";
    std::ofstream(py) << "import sys,zlib,struct\n"
                         "d=open(sys.argv[1],'rb').read(); i=8; idat=b''\n"
                         "while i<len(d):\n"
                         "  n,t=struct.unpack('>I4s',d[i:i+8])\n"
                         "  if t==b'IHDR': w,h=struct.unpack('>II',d[i+8:i+16])\n"
                         "  if t==b'IDAT': idat+=d[i+8:i+8+n]\n"
                         "  i+=12+n\n"
                         "raw=zlib.decompress(idat)\n"
                         "assert len(raw)==h*(w*3+1),(len(raw),w,h)\n"
                         "assert all(raw[y*(w*3+1)]==0 for y in range(h))\n"
                         "assert len(set(raw))>4\n"
                         "print('png ok',w,h)\n";
    nmad_test::run_options o;
    o.search_path = true;
    auto c = nmad_test::run({"python3", py.string(), png.string()}, o);
    INFO(c.err);
    CHECK(c.status == 0);
    CHECK(c.out.find("png ok 800") != std::string::npos);
  }

  SUBCASE("bad input: truncated, foreign, empty files and an empty window") {
    const std::string good = read_all(prefix.string() + ".0");
    const fs::path cut = dir.path / "cut.0";
    std::ofstream(cut, std::ios::binary) << good.substr(0, 128 + 48 * 3 + 20);
    auto t = tool({"summary", cut.string()});
    CHECK(t.status == 1);
    CHECK(t.err.find(cut.string()) != std::string::npos);
    CHECK(t.err.find("truncated record at offset 272") != std::string::npos);
    const fs::path foreign = dir.path / "foreign";
    std::ofstream(foreign) << std::string(300, 'x');
    auto f = tool({"merge", (dir.path / "x.json").string(), foreign.string()});
    CHECK(f.status == 1);
    CHECK(f.err.find(foreign.string() + ": not an nmad trace (bad magic at offset 0)") != std::string::npos);
    const fs::path empty = dir.path / "empty";
    std::ofstream(empty) << "";
    auto e = tool({"dump", empty.string()});
    CHECK(e.status == 1);
    CHECK(e.err.find("truncated at offset 0") != std::string::npos);
    std::string bad_kind = good;
    bad_kind[128 + 48 * 2 + 8] = 99;  // the third record's kind
    bad_kind[128 + 48 * 2 + 9] = 0;
    const fs::path bk = dir.path / "badkind.0";
    std::ofstream(bk, std::ios::binary) << bad_kind;
    auto k = tool({"summary", bk.string()});
    CHECK(k.status == 1);
    CHECK(k.err.find("unknown event kind 99 at offset 232") != std::string::npos);
    auto w = tool({"png", (dir.path / "w.png").string(), "--from", "50", "--to", "10", prefix.string() + ".0"});
    CHECK(w.status == 1);
    CHECK(w.err.find("empty window") != std::string::npos);
    CHECK(!fs::exists(dir.path / "w.png"));
  }
}

TEST_CASE("a traced ping-pong over tcp: the rendezvous data pushed by the sender") {
  temp_dir dir;
  const fs::path prefix = dir.path / "tcp";
  auto r = run_job({"pingpong", "20"}, {{"NMAD_TRACE", prefix.string()}, {"NMAD_DRIVER", "tcp"}});
  REQUIRE(r.status == 0);
  const std::vector<ev> evs = traced(prefix);
  check_pingpong(evs, 20);
  CHECK(find(evs, 0, "data_post", 0, [](const ev& e) { return e.peer == 1; }));
}

TEST_CASE("two threads per rank: each thread's records of its own, in order, none lost") {
  temp_dir dir;
  const fs::path prefix = dir.path / "mt";
  const int n = 100;
  auto r = run_job({"threads", std::to_string(n)}, {{"NMAD_TRACE", prefix.string()}});
  REQUIRE(r.status == 0);
  const std::vector<ev> evs = traced(prefix);  // the tool checks every thread's time order
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    std::map<unsigned long long, std::set<unsigned>> threads_of_tag;
    std::map<unsigned long long, int> sends, recvs;
    for (const ev& e : evs) {
      if (e.rank != rank || (e.tag != 20 && e.tag != 21)) continue;
      if (e.kind == "recv_submit") threads_of_tag[e.tag].insert(e.tid);
      sends[e.tag] += e.kind == "send_inline" || e.kind == "send_submit";
      recvs[e.tag] += e.kind == "recv_done";
    }
    CHECK(threads_of_tag[20].size() == 1);
    CHECK(threads_of_tag[21].size() == 1);
    CHECK(*threads_of_tag[20].begin() != *threads_of_tag[21].begin());
    for (unsigned long long tag : {20ull, 21ull}) {
      CHECK(sends[tag] == n);
      CHECK(recvs[tag] == n);
    }
  }
}

TEST_CASE("an aggregated burst: packets of several chunks, every message arriving once, in order") {
  temp_dir dir;
  const fs::path prefix = dir.path / "burst";
  const int n = 200;
  auto r = run_job({"burst", std::to_string(n)},
                   {{"NMAD_TRACE", prefix.string()}, {"NMAD_STRATEGY", "aggreg"}});
  REQUIRE(r.status == 0);
  const std::vector<ev> evs = traced(prefix);
  int submitted = 0, chunks = 0, multi = 0, inline_sends = 0;
  unsigned max_chunks = 0;
  for (const ev& e : evs) {
    if (e.rank != 0) continue;
    if (e.tag == 9 && e.kind == "send_submit") ++submitted;
    if (e.tag == 9 && e.kind == "send_inline") ++inline_sends;
    // (Data, or a rendezvous request once the peer's eager credit ran out.)
    if (e.tag == 9 && e.kind == "chunk" && ((e.extra & 0xff) == 1 || (e.extra & 0xff) == 2)) ++chunks;
    if (e.kind == "packet_built" && e.peer == 1) {
      multi += e.seq > 1;
      max_chunks = std::max(max_chunks, e.seq);
    }
  }
  CHECK(submitted + inline_sends == n);
  CHECK(chunks == submitted);
  CHECK(multi > 0);
  CHECK(max_chunks >= 4);
  MESSAGE("burst: " << submitted << " through packets, " << inline_sends << " inline, "
                    << multi << " packets of several chunks, up to " << max_chunks);
  // The receiver sees every sequence number once, in order.
  std::vector<unsigned> seqs;
  for (const ev& e : evs)
    if (e.rank == 1 && e.tag == 9 &&
        ((e.kind == "chunk_arrive" && ((e.extra & 0xff) == 1 || (e.extra & 0xff) == 2)) ||
         (e.kind == "packet_arrive" && e.extra == 1)))
      seqs.push_back(e.seq);
  REQUIRE(seqs.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) CHECK(seqs[i] == seqs[0] + static_cast<unsigned>(i));
  auto s = tool({"summary", prefix.string() + ".0", prefix.string() + ".1"});
  REQUIRE(s.status == 0);
  CHECK(s.out.find("rank 0 packet_built") != std::string::npos);
  CHECK(s.out.find("rank 1 recv_done") != std::string::npos);
}

TEST_CASE("tracing off writes nothing; an unusable NMAD_TRACE stops start-up naming the file") {
  temp_dir dir;
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path);  // nmad-run's ranks start here
  auto off = run_job({"pingpong", "3"}, {{"NMAD_TRACE", "0"}});
  auto unset = run_job({"pingpong", "3"}, {});
  fs::current_path(cwd);
  CHECK(off.status == 0);
  CHECK(unset.status == 0);
  CHECK(fs::is_empty(dir.path));
  const std::string bad = (dir.path / "no-such-dir" / "t").string();
  auto r = run_job({"pingpong", "3"}, {{"NMAD_TRACE", bad}});
  CHECK(r.status != 0);
  CHECK(r.err.find("NMAD_TRACE=" + bad + ": cannot create '" + bad + ".") != std::string::npos);
}

namespace {
// A trace file of n point records (match), the i-th on thread tid_of(i),
// in CLOCK_MONOTONIC ns (no clock records needed).
template <class TidOf>
void craft_trace(const fs::path& path, std::size_t n, TidOf tid_of) {
  nmad::trace::file_header h{};
  std::memcpy(h.magic, nmad::trace::file_header::kMagic, sizeof h.magic);
  h.version = nmad::trace::file_header::kVersion;
  h.record_size = sizeof(nmad::trace::record);
  h.rank = 0;
  h.size = 1;
  h.pid = 1;
  h.counter_is_tsc = 0;
  std::strcpy(h.host, "crafted");
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(&h), sizeof h);
  for (std::size_t i = 0; i < n; ++i) {
    nmad::trace::record r{};
    r.ts = 1000 + i * 10;
    r.kind = static_cast<std::uint16_t>(nmad::trace::event::match);
    r.tid = tid_of(i);
    r.peer = 1;
    r.len = 8;
    o.write(reinterpret_cast<const char*>(&r), sizeof r);
  }
}

// nmad-trace with its address space limited to 1 GiB (not under the
// sanitizers, whose shadow memory needs far more).
nmad_test::run_result tool_bounded(std::vector<std::string> args) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return tool(std::move(args));
#else
  args.insert(args.begin(), {"/bin/sh", "-c", "ulimit -v 1048576 && exec \"$0\" \"$@\"",
                             nmad_test::runfile("tools/nmad-trace")});
  nmad_test::run_options o;
  o.timeout_s = 120;
  return nmad_test::run(args, o);
#endif
}
}  // namespace

TEST_CASE("crafted traces: nmad-trace png refuses an image past its bound, memory stays bounded") {
  temp_dir dir;
  // 3 MB of records, each on a thread of its own: 62,500 lanes, which once
  // asked for a 1200 x 1,125,062 image (6 GB with its copies).
  const fs::path lanes = dir.path / "lanes.0";
  craft_trace(lanes, 62500, [](std::size_t i) { return static_cast<std::uint32_t>(i + 1); });
  const fs::path png = dir.path / "lanes.png";
  auto r = tool_bounded({"png", png.string(), lanes.string()});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("png: 62500 lanes") != std::string::npos);
  CHECK(r.err.find("Mpixels") != std::string::npos);
  CHECK(r.err.find("--from/--to") != std::string::npos);
  CHECK(!fs::exists(png));
  // The other tools read the same file within the bound.
  auto m = tool_bounded({"merge", (dir.path / "lanes.json").string(), lanes.string()});
  CHECK(m.status == 0);
  auto sm = tool_bounded({"summary", lanes.string()});
  CHECK(sm.status == 0);
  CHECK(sm.out.find("62500 threads") != std::string::npos);
  // The same records on two threads draw at the widest width allowed.
  const fs::path two = dir.path / "two.0";
  craft_trace(two, 62500, [](std::size_t i) { return static_cast<std::uint32_t>(1 + i % 2); });
  auto w = tool_bounded({"png", png.string(), "--width", "20000", two.string()});
  INFO(w.err);
  CHECK(w.status == 0);
  CHECK(w.out.find("20000x") != std::string::npos);
  CHECK(w.out.find("2 lanes") != std::string::npos);
  CHECK(fs::file_size(png) > 100);
}
