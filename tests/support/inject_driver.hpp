// A driver for tests and fuzz targets that play a hostile or broken peer:
// the real `self` driver (a singleton session's connection to itself) whose
// poll() — where drivers deliver — also hands the engine packets the test
// queued in `injected()`. Those packets meet the real receive path
// (matching, placement, unexpected queue, rendezvous) exactly as packets
// from a peer would. Once the engine closes the self connection (the peer
// is declared broken), queued packets are no longer delivered.
//
// Use: register it once under a driver name with register_inject_driver(),
// select it (it is registered as the self-connection driver), then push
// packets into injected().queue between progress calls.
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "core/transfer/driver.hpp"
#include "drivers/self/self_driver.hpp"

namespace nmad_test {

struct packet_injector {
  nmad::driver_events* events = nullptr;
  nmad::connection_id conn = nmad::invalid_connection;
  bool closed = false;  // the engine closed the connection
  std::deque<std::vector<std::byte>> queue;
};

// The one injector of the process (a singleton session has one self
// connection). Reset it before creating a session.
inline packet_injector& injected() {
  static packet_injector inj;
  return inj;
}

class inject_driver final : public nmad::driver {
 public:
  void open(const nmad::driver_config& config) override {
    injected().events = config.events;
    _inner->open(config);
  }
  const nmad::driver_caps& caps() const override { return _inner->caps(); }
  std::string local_address() const override { return _inner->local_address(); }
  bool reachable(std::string_view a) const override { return _inner->reachable(a); }
  nmad::connection_id connect(int peer_rank, std::string_view address) override {
    injected().conn = _inner->connect(peer_rank, address);
    return injected().conn;
  }
  nmad::post_result post_send_packet(nmad::connection_id c, std::span<const iovec> iov, void* token) override {
    return _inner->post_send_packet(c, iov, token);
  }
  nmad::post_result send_inline(nmad::connection_id c, std::span<const iovec> iov) override {
    return _inner->send_inline(c, iov);
  }
  bool backlog(nmad::connection_id c) const override { return _inner->backlog(c); }
  nmad::post_result post_send_data(nmad::connection_id c, std::uint64_t cookie, std::span<const iovec> iov,
                                   void* token) override {
    return _inner->post_send_data(c, cookie, iov, token);
  }
  nmad::post_result post_recv_data(nmad::connection_id c, std::uint64_t cookie, std::span<const iovec> iov,
                                   void* token) override {
    return _inner->post_recv_data(c, cookie, iov, token);
  }
  nmad::post_result post_get(nmad::connection_id c, std::uint64_t addr, std::uint64_t key,
                             std::span<const iovec> dst, void* token) override {
    return _inner->post_get(c, addr, key, dst, token);
  }
  int poll() override {
    int work = _inner->poll();
    packet_injector& inj = injected();
    while (!inj.queue.empty() && !inj.closed && inj.conn != nmad::invalid_connection) {
      std::vector<std::byte> p = std::move(inj.queue.front());
      inj.queue.pop_front();
      inj.events->on_packet(inj.conn, p);
      ++work;
    }
    return work;
  }
  bool quiet() const override { return injected().queue.empty() && _inner->quiet(); }
  void close_connection(nmad::connection_id c) override {
    if (c == injected().conn) injected().closed = true;
    _inner->close_connection(c);
  }

 private:
  std::unique_ptr<nmad::driver> _inner = nmad::make_self_driver();
};

// Registers inject_driver as `name` (the self-connection driver). Returns
// what register_driver returns; call once per process.
inline bool register_inject_driver(const char* name) {
  return nmad::register_driver({name, "self driver with packet injection (tests)",
                                [] { return std::unique_ptr<nmad::driver>(new inject_driver()); }, true});
}

}  // namespace nmad_test
