// Engine events: the process-wide sink a layer installs (layer.hpp).
#include "core/common/events.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>

namespace nmad::events {

namespace detail {
std::atomic<unsigned> g_mask{0};
}

namespace {
// Set once by the layer and then only replaced by another callable sink:
// a pair read without a lock (the sink contract says it stays callable).
std::atomic<void (*)(const layer::event&, void*)> g_sink{nullptr};
std::atomic<void*> g_arg{nullptr};
}  // namespace

void emit(layer::event& e) {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  e.time_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
  if (auto* fn = g_sink.load(std::memory_order_acquire)) fn(e, g_arg.load(std::memory_order_acquire));
}

void emit_message(layer::event_kind k, int peer, std::uint64_t tag, std::uint64_t size) {
  layer::event e;
  e.kind = k;
  e.peer = peer;
  e.tag = tag;
  e.size = size;
  emit(e);
}

void emit_text(layer::event_kind k, int peer, std::string_view what) {
  layer::event e;
  e.kind = k;
  e.peer = peer;
  const std::size_t n = std::min(what.size(), sizeof e.what - 1);
  std::memcpy(e.what, what.data(), n);
  e.what[n] = '\0';
  emit(e);
}

}  // namespace nmad::events

namespace nmad::layer {

void set_event_sink(unsigned mask, void (*sink)(const event& e, void* arg), void* arg) {
  if (!sink) mask = 0;
  if (sink) {
    events::g_arg.store(arg, std::memory_order_release);
    events::g_sink.store(sink, std::memory_order_release);
  }
  events::detail::g_mask.store(mask, std::memory_order_release);
}

}  // namespace nmad::layer
