#pragma once
// One opened driver of a session: the driver, its capabilities as the
// tracks see them, its connections by id, its poll lock, and the adapter
// that routes its events (driver_events) to the engine. Tracks point here
// (track::slot).
#include <memory>
#include <vector>

#include "core/common/engine_mutex.hpp"
#include "core/transfer/driver.hpp"

namespace nmad {

class gate;
class session_impl;

// The gates of one driver by connection id (ids are small and dense).
class conn_table {
 public:
  gate* find(connection_id c) const { return c < _by_id.size() ? _by_id[c] : nullptr; }
  void set(connection_id c, gate* g) {
    if (c == invalid_connection) return;
    if (c >= _by_id.size()) _by_id.resize(static_cast<std::size_t>(c) + 1, nullptr);
    _by_id[c] = g;
  }
  void erase(connection_id c) {
    if (c < _by_id.size()) _by_id[c] = nullptr;
  }

 private:
  std::vector<gate*> _by_id;
};

// The event adapter's members are the engine's (core/session_progress.cpp).
struct driver_slot final : driver_events {
  session_impl* engine = nullptr;
  std::unique_ptr<driver> drv;
  int instance = 0;  // how many slots of the same driver come before it (tcp+tcp)
  driver_caps caps;  // drv->caps() with the sampled profile's figures, if any (tracks point here)
  conn_table gates;  // established connections (under `lock`)
  engine_mutex lock; // the driver's poll lock (see LOCK ORDER in core/session_impl.hpp)

  void on_connected(connection_id conn, int peer_rank) override;
  void on_packet(connection_id conn, std::span<const std::byte> packet) override;
  void on_send_done(void* token) override;
  void on_recv_data_done(void* token, std::size_t received) override;
  void on_connection_failed(connection_id conn, std::string_view reason) override;
};

}  // namespace nmad
