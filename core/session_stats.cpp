// What the application may ask of the session about its peers: the
// statistics (the tracks' and the receive path's counters, per peer and in
// all), the NMAD_STATS=1 report, whether a peer is alive, and its name in
// messages.
#include <algorithm>
#include <cstdio>

#include "core/session_impl.hpp"

namespace nmad {

session_stats session_impl::stats() const {
  session_stats out;
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  for (const gate_stats& g : peer_stats())
    for (std::size_t i = 0; i < g.tracks.size(); ++i) {
      const track_stats& t = g.tracks[i];
      out.packets_sent += t.packets;
      out.chunks_sent += t.chunks;
      out.bytes_sent += t.bytes;
      out.rdv_data_sent += t.rdv_transfers;
      out.rail_sends[std::min<std::size_t>(i, 3)] += t.packets + t.rdv_transfers;
      // (Each counter read on its own: never let a race read as a wrap.)
      out.aggregated_packets += t.packets > t.chunks_histogram[0] ? t.packets - t.chunks_histogram[0] : 0;
    }
  out.packets_received = _recv.packets_received();
  out.unexpected_messages = _recv.unexpected_messages();
  out.protocol_errors = get(_stats.protocol_errors);
  out.offloaded_sends = get(_stats.offloaded_sends);
  out.offload_tasks_by_thread = get(_stats.offload_tasks_by_thread);
  out.unexpected_queued = _recv.unexpected_queued();
  out.unexpected_queued_max = _recv.unexpected_queued_max();
  out.progress_wakeups = _waiter.background_wakeups();
  out.waits = _waiter.waits();
  out.wait_ns = _waiter.wait_ns();
  return out;
}

std::vector<gate_stats> session_impl::peer_stats() const {
  std::vector<gate_stats> out;
  out.reserve(_gates.size());
  for (const auto& gp : _gates) {
    const gate& g = *gp;
    gate_stats gs;
    gs.peer = g.rank;
    gs.alive = !g.failed.load(std::memory_order_acquire);
    gs.rdv_requests = g.rdv_requests.get();
    for (const track& t : g.tracks) {
      const track_counters& c = t.stats;
      track_stats ts;
      ts.driver = std::string(t.slot->drv->caps().name);
      const std::uint64_t inl = c.inline_sends.get();
      ts.packets = c.packets.get() + inl;
      ts.chunks = c.chunks.get() + inl;
      ts.chunks_max = std::max<std::uint64_t>(c.chunks_max.get(), inl ? 1 : 0);
      for (int b = 0; b < 8; ++b) ts.chunks_histogram[b] = c.chunks_histogram[b].get();
      ts.chunks_histogram[0] += inl;
      ts.bytes = c.bytes.get() + c.inline_bytes.get();
      ts.rdv_transfers = c.rdv_transfers.get();
      ts.rdv_bytes = c.rdv_bytes.get();
      ts.idle_ns = c.idle_ns.get();
      gs.tracks.push_back(std::move(ts));
    }
    out.push_back(std::move(gs));
  }
  return out;
}

// One block per process on stderr, written at once (ranks print together).
void session_impl::print_stats() const {
  const session_stats st = stats();
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "nmad stats: rank %d (strategy %s): packets sent %llu (chunks %llu, bytes %llu), rendezvous "
                "transfers %llu, packets received %llu, unexpected messages %llu, protocol errors %llu\n",
                _rank, _strategy_name.c_str(), static_cast<unsigned long long>(st.packets_sent),
                static_cast<unsigned long long>(st.chunks_sent), static_cast<unsigned long long>(st.bytes_sent),
                static_cast<unsigned long long>(st.rdv_data_sent), static_cast<unsigned long long>(st.packets_received),
                static_cast<unsigned long long>(st.unexpected_messages),
                static_cast<unsigned long long>(st.protocol_errors));
  out += line;
  static const char* const buckets[8] = {"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65+"};
  for (const gate_stats& g : peer_stats()) {
    std::uint64_t any = g.rdv_requests;
    for (const track_stats& t : g.tracks) any += t.packets + t.rdv_transfers;
    if (!any) continue;  // nothing sent to that peer
    std::snprintf(line, sizeof line, "  rank %d -> rank %d%s: rendezvous sends %llu\n", _rank, g.peer,
                  g.alive ? "" : " (failed)", static_cast<unsigned long long>(g.rdv_requests));
    out += line;
    for (std::size_t i = 0; i < g.tracks.size(); ++i) {
      const track_stats& t = g.tracks[i];
      std::snprintf(line, sizeof line,
                    "    track %zu (%s): packets %llu, bytes %llu, chunks %llu (per packet: mean %.2f, max %llu), "
                    "rendezvous transfers %llu (%llu bytes), idle with work queued %.3f ms\n",
                    i, t.driver.c_str(), static_cast<unsigned long long>(t.packets),
                    static_cast<unsigned long long>(t.bytes), static_cast<unsigned long long>(t.chunks),
                    t.chunks_per_packet(), static_cast<unsigned long long>(t.chunks_max),
                    static_cast<unsigned long long>(t.rdv_transfers), static_cast<unsigned long long>(t.rdv_bytes),
                    static_cast<double>(t.idle_ns) / 1e6);
      out += line;
      if (t.packets) {
        out += "      chunks per packet:";
        for (int b = 0; b < 8; ++b)
          if (t.chunks_histogram[b]) {
            std::snprintf(line, sizeof line, " %s: %llu", buckets[b],
                          static_cast<unsigned long long>(t.chunks_histogram[b]));
            out += line;
          }
        out += "\n";
      }
    }
  }
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

std::size_t session_impl::rdv_threshold(int peer) const {
  if (peer < 0 || peer >= _size) return 0;
  return _gates[static_cast<std::size_t>(peer)]->rdv_limit();
}

// Every gate's, as set-up does (one value for all, within what a packet
// carries); a message already queued keeps the path it took.
std::size_t session_impl::set_rdv_threshold(std::size_t bytes) {
  const std::size_t v = std::max<std::size_t>(1, std::min(bytes, _max_eager + 1));
  for (const auto& g : _gates) g->rdv_threshold.store(v, std::memory_order_relaxed);
  return v;
}

bool session_impl::peer_alive(int rank) const {
  if (rank < 0 || rank >= _size) return false;
  return !_gates[rank]->failed.load(std::memory_order_acquire);
}

std::string session_impl::peer_name(const gate& g) const { return "rank " + std::to_string(g.rank); }

}  // namespace nmad
