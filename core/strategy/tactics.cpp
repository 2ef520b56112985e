#include "core/strategy/tactics.hpp"

#include <algorithm>
#include <array>

#include "core/protocol/wire.hpp"

namespace nmad::tactics {

bool is_control(const chunk_entry& e) { return e.kind == chunk_kind::rtr || e.kind == chunk_kind::cancel_ack; }

bool take_oldest(collect_list& q, packet_builder& out) {
  if (q.empty()) return false;
  return out.add(q, q.front());
}

// Whether e may join a packet that already holds something.
static bool fits_whole(const chunk_entry& e, const packet_builder& out) {
  return packet_builder::wire_size(e) <= out.room() + sizeof(wire::chunk_header);
}

bool aggregate(collect_list& q, packet_builder& out) {
  bool added = false;
  while (!q.empty()) {
    chunk_entry& e = q.front();
    if (added && !fits_whole(e, out)) break;
    if (!out.add(q, e)) break;
    added = true;
  }
  return added;
}

bool aggregate_by_priority(collect_list& q, packet_builder& out, std::size_t scan) {
  bool added = false;
  std::array<std::uint64_t, 256> seen{};  // tags met so far in this pass (the scan
                                          // stops when it is full: conservative)
  while (!q.empty()) {
    chunk_entry* best = nullptr;
    std::size_t nseen = 0, i = 0;
    for (auto it = q.begin(); it != q.end() && i < scan && nseen < seen.size(); ++it, ++i) {
      chunk_entry& e = *it;
      if (is_control(e)) {
        best = &e;
        break;
      }
      bool first_of_flow = true;
      for (std::size_t k = 0; k < nseen; ++k)
        if (seen[k] == e.tag) {
          first_of_flow = false;
          break;
        }
      if (!first_of_flow) continue;
      seen[nseen++] = e.tag;
      if (!best || e.priority > best->priority) best = &e;
    }
    if (!best) break;
    if (added && !fits_whole(*best, out)) break;
    if (!out.add(q, *best)) break;
    added = true;
    if (best->hook.is_linked()) break;  // cut: the packet is full
  }
  return added;
}

bool any_priority(const collect_list& q) {
  for (const chunk_entry& e : q)
    if (e.priority > 0 && !is_control(e)) return true;
  return false;
}

window_summary summarize(const collect_list& q, std::uint64_t small_limit) {
  window_summary s;
  for (const chunk_entry& e : q) {
    ++s.chunks;
    s.wire_bytes += packet_builder::wire_size(e);
    if (e.kind != chunk_kind::data || e.len >= small_limit) s.all_small_data = false;
    if (e.hints & chunk_hint::express) s.any_express = true;
  }
  return s;
}

const track_view* lowest_latency_with_room(std::span<const track_view> tracks) {
  const track_view* best = nullptr;
  for (const track_view& t : tracks) {
    if (!t.connected || !t.has_room() || !t.caps) continue;
    if (!best || t.caps->latency_us < best->caps->latency_us) best = &t;
  }
  return best;
}

static double bytes_per_us(const track_view& t) {
  // MB/s = bytes/µs; an unknown bandwidth counts as 1 GB/s.
  return t.caps && t.caps->bandwidth_mbps > 0 ? t.caps->bandwidth_mbps : 1000.0;
}

double predicted_release_us(const track_view& t) {
  const double lat = t.caps ? t.caps->latency_us : 0.0;
  return lat + static_cast<double>(t.bytes_in_flight + t.incoming) / bytes_per_us(t);
}

std::uint32_t rotate_equal(std::span<const track_view> tracks, std::uint32_t& next, std::uint64_t& len,
                           std::uint64_t split_min) {
  constexpr std::uint64_t kAlign = 4096;
  if (tracks.size() <= 1) return 0;
  std::uint64_t connected = 0;
  for (const track_view& t : tracks) connected += t.connected ? 1 : 0;
  if (connected > 1 && len >= split_min) {
    const std::uint64_t piece = ((len + connected - 1) / connected + kAlign - 1) / kAlign * kAlign;
    len = std::min(len, piece);
  }
  for (std::size_t k = 0; k < tracks.size(); ++k) {
    const std::uint32_t r = next++ % static_cast<std::uint32_t>(tracks.size());
    if (tracks[r].connected) return r;
  }
  return 0;
}

std::uint32_t balance_by_bandwidth(std::span<const track_view> tracks, std::uint64_t& len,
                                   std::uint64_t split_min) {
  constexpr std::uint64_t kAlign = 4096;
  if (tracks.size() <= 1) return 0;
  // Whole: the track that would finish it first.
  auto finish = [&](const track_view& t) {
    return predicted_release_us(t) + static_cast<double>(len) / bytes_per_us(t);
  };
  std::uint32_t first = 0;
  bool any = false;
  for (const track_view& t : tracks) {
    if (!t.connected) continue;
    if (!any || finish(t) < finish(tracks[first])) first = t.rail;
    any = true;
  }
  if (!any || len < split_min) return first;
  // Split: every used track finishes at T, with T - d_i = x_i / b_i and
  // sum x_i = len; a track busy beyond T gets nothing.
  std::array<bool, 16> used{};
  const std::size_t n = std::min<std::size_t>(tracks.size(), used.size());
  for (std::size_t i = 0; i < n; ++i) used[i] = tracks[i].connected;
  double T = 0;
  for (int pass = 0; pass < 16; ++pass) {
    double sum_b = 0, sum_bd = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (used[i]) {
        sum_b += bytes_per_us(tracks[i]);
        sum_bd += bytes_per_us(tracks[i]) * predicted_release_us(tracks[i]);
      }
    T = (static_cast<double>(len) + sum_bd) / sum_b;
    bool dropped = false;
    for (std::size_t i = 0; i < n; ++i)
      if (used[i] && predicted_release_us(tracks[i]) >= T) {
        used[i] = false;
        dropped = true;
      }
    if (!dropped) break;
  }
  std::uint32_t best = first;
  double share = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!used[i]) continue;
    const double x = (T - predicted_release_us(tracks[i])) * bytes_per_us(tracks[i]);
    if (x > share) {
      share = x;
      best = static_cast<std::uint32_t>(i);
    }
  }
  if (share > 0) {
    const std::uint64_t piece = (static_cast<std::uint64_t>(share) + kAlign - 1) / kAlign * kAlign;
    len = std::min(len, std::max(piece, kAlign));
  }
  return best;
}

}  // namespace nmad::tactics
