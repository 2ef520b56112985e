// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/):
// small valid inputs built with the real wire structures and formatters, a
// few near-misses of each, so that a short run starts past the magic
// numbers and key checks. Deterministic: re-running it rewrites the same
// files (named seed-*), leaving inputs added by fuzzing (crash-* regression
// inputs, kept forever) alone.
//   bazel run //tests/fuzz:make_corpus -- "$PWD/tests/fuzz/corpus"
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/bootstrap/pmi_wire.hpp"
#include "core/collect/chunk_entry.hpp"
#include "core/protocol/wire.hpp"
#include "drivers/tcp/tcp_wire.hpp"

namespace {
using namespace nmad;
using bytes = std::vector<std::uint8_t>;
namespace fs = std::filesystem;

fs::path g_root;

void put(bytes& b, const void* p, std::size_t n) {
  auto* c = static_cast<const std::uint8_t*>(p);
  b.insert(b.end(), c, c + n);
}
template <class T>
void put(bytes& b, const T& v) {
  put(b, &v, sizeof v);
}
void put(bytes& b, const std::string& s) { put(b, s.data(), s.size()); }

void save(const std::string& target, const std::string& name, const bytes& b) {
  fs::create_directories(g_root / target);
  std::ofstream out(g_root / target / ("seed-" + name), std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void save(const std::string& target, const std::string& name, const std::string& s) {
  save(target, name, bytes(s.begin(), s.end()));
}

// ---- engine packets ---------------------------------------------------------
struct chunk {
  chunk_kind kind = chunk_kind::data;
  std::uint8_t flags = chunk_flag::last;
  std::uint64_t tag = 1;
  std::uint32_t seq = 0;
  std::uint64_t offset = 0;
  std::uint64_t len = 0;  // data: payload bytes
  std::uint64_t msg_len = 0;
  std::uint64_t cookie = 0, cookie2 = 0;
};

bytes packet(const std::vector<chunk>& chunks) {
  bytes body;
  for (const chunk& c : chunks) {
    wire::chunk_header h{};
    h.kind = static_cast<std::uint8_t>(c.kind);
    h.flags = c.flags;
    h.tag = c.tag;
    h.seq = c.seq;
    h.offset = c.offset;
    h.len = c.len;
    h.msg_len = c.msg_len;
    h.cookie = c.cookie;
    h.cookie2 = c.cookie2;
    h.payload = c.kind == chunk_kind::data ? static_cast<std::uint32_t>(c.len) : 0;
    put(body, h);
    for (std::uint32_t i = 0; i < h.payload; ++i) body.push_back(static_cast<std::uint8_t>(c.offset + i));
  }
  wire::packet_header ph{};
  ph.magic = wire::packet_magic;
  ph.version = wire::protocol_version;
  ph.nchunks = static_cast<std::uint16_t>(chunks.size());
  ph.length = static_cast<std::uint32_t>(sizeof ph + body.size());
  bytes out;
  put(out, ph);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

bytes short_packet(std::uint64_t tag, std::uint32_t seq, std::size_t n) {
  bytes out;
  put(out, wire::short_header{wire::short_magic, seq, tag});
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(i));
  return out;
}

chunk data(std::uint64_t tag, std::uint32_t seq, std::uint64_t off, std::uint64_t len, std::uint64_t total,
           bool last) {
  chunk c;
  c.tag = tag;
  c.seq = seq;
  c.offset = off;
  c.len = len;
  c.msg_len = total;
  c.flags = last ? chunk_flag::last : 0;
  return c;
}

std::vector<std::pair<std::string, bytes>> packets() {
  std::vector<std::pair<std::string, bytes>> v;
  v.push_back({"eager", packet({data(1, 0, 0, 16, 16, true)})});
  v.push_back({"empty-message", packet({data(2, 0, 0, 0, 0, true)})});
  v.push_back({"two-messages", packet({data(1, 0, 0, 8, 8, true), data(1, 1, 0, 24, 24, true)})});
  v.push_back({"split-first", packet({data(3, 0, 0, 32, 64, false)})});
  v.push_back({"split-second", packet({data(3, 0, 32, 32, 64, true)})});
  v.push_back({"unknown-length", packet({data(4, 0, 0, 40, chunk_entry::unknown_length, false)})});
  v.push_back({"overtaking", packet({data(5, 1, 0, 8, 8, true), data(5, 0, 0, 8, 8, true)})});
  chunk rdv;
  rdv.kind = chunk_kind::rdv_req;
  rdv.tag = 6;
  rdv.len = rdv.msg_len = 100000;
  rdv.cookie = 0x1234;
  v.push_back({"rdv-req", packet({rdv})});
  chunk pull = rdv;
  pull.flags = chunk_flag::last | chunk_flag::pullable;
  pull.cookie2 = 0x7fff0000;
  v.push_back({"rdv-pullable", packet({pull})});
  chunk rtr;
  rtr.kind = chunk_kind::rtr;
  rtr.len = 4096;
  rtr.cookie = 0x99;
  rtr.cookie2 = 0x77;
  v.push_back({"rtr", packet({rtr})});
  chunk creq;
  creq.kind = chunk_kind::cancel_req;
  creq.tag = 6;
  creq.cookie = 0x1234;
  v.push_back({"cancel-req", packet({rdv, creq})});
  chunk cack = creq;
  cack.kind = chunk_kind::cancel_ack;
  cack.flags = chunk_flag::cancel_ok;
  v.push_back({"cancel-ack", packet({cack})});
  chunk notice;
  notice.kind = chunk_kind::failure_notice;
  notice.tag = 1;
  notice.msg_len = chunk_entry::unknown_length;
  v.push_back({"failure-notice", packet({notice})});
  v.push_back({"mixed", packet({data(7, 0, 0, 4, 4, true), rdv, data(7, 1, 0, 12, 12, true)})});
  v.push_back({"short", short_packet(1, 0, 8)});
  v.push_back({"short-empty", short_packet(2, 0, 0)});
  v.push_back({"short-second", short_packet(1, 1, 30)});
  // Near-misses: each breaks one rule the parser enforces.
  bytes bad = packet({data(1, 0, 0, 16, 16, true)});
  bad[0] ^= 1;
  v.push_back({"bad-magic", bad});
  bad = packet({data(1, 0, 0, 16, 16, true)});
  bad.pop_back();
  v.push_back({"truncated", bad});
  v.push_back({"range-beyond-length", packet({data(1, 0, 8, 16, 16, true)})});
  v.push_back({"last-not-at-end", packet({data(1, 0, 0, 8, 16, true)})});
  chunk big = data(1, 0, ~std::uint64_t{0} - 4, 8, chunk_entry::unknown_length, true);
  v.push_back({"range-overflow", packet({big})});
  return v;
}

void wire_corpus() {
  for (const auto& [name, b] : packets()) save("fuzz_wire", name, b);
  save("fuzz_wire", "header-only", packet({}));
}

// fuzz_session_recv operations (see that file).
void op_packet(bytes& in, const bytes& p) {
  in.push_back(0);
  put(in, static_cast<std::uint16_t>(p.size()));
  put(in, p.data(), p.size());
}
void op_recv(bytes& in, std::uint8_t tag, std::uint16_t cap, std::uint8_t how = 0) {
  in.push_back(1);
  in.push_back(tag);
  put(in, cap);
  in.push_back(how);
}
void op_progress(bytes& in) { in.push_back(2); }
void op_cancel(bytes& in) { in.push_back(3); }

void session_corpus() {
  const std::string t = "fuzz_session_recv";
  for (const auto& [name, p] : packets()) {
    bytes posted_first, unexpected;
    op_recv(posted_first, static_cast<std::uint8_t>(1), 256);
    op_packet(posted_first, p);
    op_progress(posted_first);
    save(t, "posted-" + name, posted_first);
    op_packet(unexpected, p);
    op_progress(unexpected);
    op_recv(unexpected, 1, 256, 2);
    op_progress(unexpected);
    save(t, "unexpected-" + name, unexpected);
  }
  bytes in;
  op_recv(in, 3, 64);
  op_packet(in, packet({data(3, 0, 32, 32, 64, true)}));
  op_packet(in, packet({data(3, 0, 0, 32, 64, false)}));
  op_progress(in);
  save(t, "split-reversed", in);
  in.clear();
  op_recv(in, 1, 4);
  op_packet(in, short_packet(1, 0, 40));
  op_progress(in);
  save(t, "truncated-short", in);
  in.clear();
  op_recv(in, 1, 100, 1);
  op_recv(in, 1, 100);
  op_cancel(in);
  op_packet(in, short_packet(1, 0, 20));
  op_packet(in, short_packet(1, 1, 20));
  op_progress(in);
  save(t, "any-source-and-cancel", in);
  in.clear();
  op_packet(in, short_packet(5, 2, 8));
  op_packet(in, short_packet(5, 1, 8));
  op_recv(in, 5, 16);
  op_packet(in, short_packet(5, 0, 8));
  op_recv(in, 5, 16);
  op_recv(in, 5, 16);
  op_progress(in);
  save(t, "short-out-of-order", in);
}

// ---- tcp handshake ----------------------------------------------------------
bytes hello(std::int32_t rank, const std::string& key) {
  tcp_wire::hello h;
  h.rank = rank;
  h.key_len = static_cast<std::uint32_t>(key.size());
  bytes b;
  put(b, h);
  put(b, key);
  return b;
}
void frame(bytes& b, std::uint32_t kind, const bytes& body, std::uint64_t cookie = 0) {
  tcp_wire::frame_header f;
  f.kind = kind;
  f.length = body.size();
  f.cookie = cookie;
  put(b, f);
  put(b, body.data(), body.size());
}

void tcp_corpus() {
  const std::string t = "fuzz_tcp_handshake";
  const std::string key = "fuzz-job-key-0123456789abcdef";  // as in fuzz_tcp_handshake.cpp
  for (int r = 1; r < 4; ++r) save(t, "hello-rank" + std::to_string(r), hello(r, key));
  save(t, "wrong-key", hello(1, "fuzz-job-key-0123456789abcdeX"));
  save(t, "short-key", hello(1, "fuzz"));
  save(t, "own-rank", hello(0, key));
  save(t, "rank-out-of-range", hello(9, key));
  bytes b = hello(1, key);
  b[0] = 'X';
  save(t, "bad-magic", b);
  b = hello(1, key);
  b.resize(10);
  save(t, "truncated-hello", b);
  tcp_wire::hello h;
  h.rank = 1;
  h.key_len = 100000;
  b.clear();
  put(b, h);
  save(t, "huge-key-len", b);
  const auto ps = packets();
  for (std::size_t i = 0; i < ps.size(); i += 3) {
    b = hello(2, key);
    frame(b, tcp_wire::kind_packet, ps[i].second);
    save(t, "packet-" + ps[i].first, b);
  }
  b = hello(1, key);
  frame(b, tcp_wire::kind_packet, ps[0].second);
  frame(b, tcp_wire::kind_packet, ps[1].second);
  frame(b, tcp_wire::kind_data, bytes(300, 0x5a), 7);
  save(t, "packets-and-data", b);
  b = hello(1, key);
  frame(b, tcp_wire::kind_data, bytes(150, 0x11), 8);
  save(t, "data-scattered", b);
  b = hello(1, key);
  frame(b, tcp_wire::kind_data, bytes(201, 0x11), 8);
  save(t, "data-too-long", b);
  b = hello(1, key);
  frame(b, tcp_wire::kind_data, bytes(10, 0x22), 9);
  save(t, "data-unknown-cookie", b);
  b = hello(1, key);
  frame(b, 3, bytes(4, 0));
  save(t, "bad-frame-kind", b);
  b = hello(1, key);
  frame(b, tcp_wire::kind_packet, bytes());
  b.resize(b.size() - 3);
  save(t, "truncated-frame", b);
}

// ---- PMI --------------------------------------------------------------------
// The launcher's side of a whole client session (fuzz_pmi_client's call
// sequence): mode byte, then the answers in order.
std::string launcher_stream(int rank, bool port_mode) {
  std::string s;
  if (port_mode)
    s += "cmd=initack\ncmd=set size=2\ncmd=set rank=" + std::to_string(rank) + "\ncmd=set debug=0\n";
  s += pmi::format_line("response_to_init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}, {"rc", "0"}});
  s += pmi::format_line("maxes", {{"kvsname_max", "256"}, {"keylen_max", "256"}, {"vallen_max", "1024"}});
  s += pmi::format_line("my_kvsname", {{"kvsname", "kvs_1"}});
  const auto ok_put = pmi::format_line("put_result", {{"rc", "0"}, {"msg", "success"}});
  s += ok_put;  // the short put
  const std::string big = pmi::escape(std::string(3000, 'x') + " =%\n");
  const std::size_t room = 1023;
  const std::size_t n = (big.size() + room - 1) / room;
  for (std::size_t i = 0; i <= n; ++i) s += ok_put;  // the pieces, then the header
  s += "cmd=barrier_out\n";
  s += pmi::format_line("get_result", {{"rc", "0"}, {"value", "v127.0.0.1:4242"}});
  s += pmi::format_line("get_result", {{"rc", "0"}, {"value", "c" + std::to_string(n)}});
  for (std::size_t i = 0; i < n; ++i) s += pmi::format_line("get_result", {{"rc", "0"}, {"value", big.substr(i * room, room)}});
  if (rank == 0) {
    s += ok_put;
    s += "cmd=barrier_out\n";
  } else {
    s += "cmd=barrier_out\n";
    s += pmi::format_line("get_result", {{"rc", "0"}, {"value", "v0123456789abcdef0123456789abcdef"}});
  }
  s += "cmd=finalize_ack\n";
  return s;
}

void pmi_client_corpus() {
  const std::string t = "fuzz_pmi_client";
  for (int rank = 0; rank < 2; ++rank)
    for (int port = 0; port < 2; ++port) {
      const char mode = static_cast<char>((port ? 1 : 0) | (rank ? 2 : 0));
      const std::string full = launcher_stream(rank, port);
      const std::string id = "r" + std::to_string(rank) + (port ? "-port" : "-fd");
      save(t, "session-" + id, std::string(1, mode) + full);
      // Cut after each of the first few lines, and one failing reply.
      std::size_t pos = 0;
      for (int line = 0; line < 6; ++line) {
        pos = full.find('\n', pos) + 1;
        save(t, "cut" + std::to_string(line) + "-" + id, std::string(1, mode) + full.substr(0, pos - 1));
      }
    }
  save(t, "init-refused", std::string(1, 0) + "cmd=response_to_init pmi_version=1 rc=-1 msg=no\n");
  save(t, "maxes-bad", std::string(1, 0) + "cmd=response_to_init rc=0\ncmd=maxes vallen_max=3\n");
  save(t, "port-bad-set", std::string(1, 1) + "cmd=initack\ncmd=set size=x\n");
  save(t, "port-rank-out-of-range", std::string(1, 1) + "cmd=initack\ncmd=set size=2\ncmd=set rank=7\ncmd=set debug=0\n");
  save(t, "get-corrupt-chunks", std::string(1, 0) + launcher_stream(0, false).substr(0, 200) + "cmd=get_result rc=0 value=c0\n");
  save(t, "escape-sample", std::string(1, 0) + "%4%zz%41 =\r\n");
}

std::string client_lines(int rank, bool initack) {
  std::string s;
  if (initack) s += "cmd=initack pmiid=" + std::to_string(rank) + "\n";
  s += pmi::format_line("init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}});
  s += pmi::format_line("get_maxes");
  s += pmi::format_line("get_my_kvsname");
  s += pmi::format_line("get_universe_size");
  s += pmi::format_line("get_appnum");
  s += pmi::format_line("put", {{"kvsname", "kvs_fuzz_0"}, {"key", "k" + std::to_string(rank)}, {"value", "v" + std::to_string(rank)}});
  s += pmi::format_line("barrier_in");
  s += pmi::format_line("get", {{"kvsname", "kvs_fuzz_0"}, {"key", "k0"}});
  s += pmi::format_line("get", {{"kvsname", "kvs_fuzz_0"}, {"key", "missing"}});
  s += pmi::format_line("finalize");
  return s;
}

void conn(bytes& b, std::uint8_t rank, const std::string& s) {
  b.push_back(rank);
  put(b, static_cast<std::uint16_t>(s.size()));
  put(b, s);
}

void pmi_server_corpus() {
  const std::string t = "fuzz_pmi_server";
  for (int job = 1; job <= 3; ++job) {
    for (int known = 0; known < 2; ++known) {
      bytes b{static_cast<std::uint8_t>(job - 1), static_cast<std::uint8_t>(job - 1)};
      for (int r = 0; r < job; ++r) conn(b, known ? static_cast<std::uint8_t>(r) : 0xff, client_lines(r, !known));
      save(t, "job" + std::to_string(job) + (known ? "-fd" : "-port"), b);
    }
  }
  bytes b{1, 0};
  conn(b, 0, "cmd=abort exitcode=3 message=it%20failed\n");
  save(t, "abort", b);
  b = {1, 1};
  conn(b, 0xff, "cmd=initack pmiid=1\ncmd=barrier_in\n");
  conn(b, 0xff, "cmd=initack pmiid=1\n");
  save(t, "initack-taken", b);
  b = {0, 0};
  conn(b, 0xff, "cmd=put kvsname=kvs_fuzz_0 key=a value=b\n");
  save(t, "before-initack", b);
  b = {0, 0};
  conn(b, 0, "cmd=barrier_in\ncmd=barrier_in\n");
  save(t, "barrier-twice", b);
  b = {0, 0};
  conn(b, 0, "garbage\ncmd=\ncmd=unknown x=y\n");
  save(t, "malformed", b);
  b = {0, 0};
  conn(b, 0, "cmd=put kvsname=kvs_fuzz_0 key=" + std::string(300, 'k') + " value=v\ncmd=get kvsname=kvs_fuzz_0 key=a=b\n");
  save(t, "limits", b);
}

// ---- shm ring ---------------------------------------------------------------
// fuzz_shm_ring operations (see that file).
void ring_write(bytes& b, std::uint8_t kind, std::uint16_t len, std::uint8_t seed) {
  b.push_back(0);
  b.push_back(kind);
  put(b, len);
  b.push_back(seed);
}
void ring_corpus() {
  const std::string t = "fuzz_shm_ring";
  for (std::uint8_t capsel : {0, 2, 4, 6, 0x80, 0x93}) {
    bytes b{capsel};
    put(b, std::uint64_t{0x5eed1234abcd9876ULL});
    for (int i = 0; i < 40; ++i) {
      ring_write(b, static_cast<std::uint8_t>(i), static_cast<std::uint16_t>(i * 7 % 200), static_cast<std::uint8_t>(i));
      b.push_back(i % 3 == 0 ? 2 : 1);  // peek, or peek and consume
      if (i % 5 == 0) b.push_back(1);
    }
    save(t, "wraps-" + std::to_string(capsel), b);
    bytes h = b;
    h.resize(9);
    ring_write(h, 1, 16, 1);
    h.push_back(5);  // forged header (after the consumer took nothing)
    put(h, std::uint32_t{0x01ffffff});
    h.push_back(1);
    save(t, "forged-" + std::to_string(capsel), h);
    h.resize(9);
    ring_write(h, 1, 16, 1);
    h.push_back(4);
    put(h, std::uint64_t{~0ULL});
    ring_write(h, 1, 16, 1);
    h.push_back(3);
    put(h, std::uint16_t{0});
    put(h, std::uint64_t{0xffffffffffffffffULL});
    h.push_back(1);
    h.push_back(1);
    save(t, "hostile-" + std::to_string(capsel), h);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus <corpus directory>\n");
    return 2;
  }
  g_root = argv[1];
  wire_corpus();
  session_corpus();
  tcp_corpus();
  pmi_client_corpus();
  pmi_server_corpus();
  ring_corpus();
  return 0;
}
