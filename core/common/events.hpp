#pragma once
// The engine's side of layer::set_event_sink (api/nmad/layer.hpp): where
// an event may happen, the engine asks wanted(kind) (one relaxed atomic
// load, false unless a layer asked for that kind) and only then builds the
// record and calls emit().
#include <atomic>
#include <cstdint>
#include <string_view>

#include "api/nmad/layer.hpp"

namespace nmad::events {

namespace detail {
extern std::atomic<unsigned> g_mask;
}

inline bool wanted(layer::event_kind k) {
  return (detail::g_mask.load(std::memory_order_relaxed) >> static_cast<unsigned>(k)) & 1u;
}

// Stamps the record (time_ns) and hands it to the sink, if one is set.
void emit(layer::event& e);
// The usual records.
void emit_message(layer::event_kind k, int peer, std::uint64_t tag, std::uint64_t size);
void emit_text(layer::event_kind k, int peer, std::string_view what);

}  // namespace nmad::events
