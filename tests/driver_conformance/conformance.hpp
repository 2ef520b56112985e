// What every file of the driver conformance suite (//tests:driver_conformance_test)
// shares: the drivers under test (the registered network drivers, ofi once
// per provider), an event recorder per driver instance, bounded polling
// (kLimit: a driver that hangs fails a check instead of hanging the test),
// a connected pair of drivers, byte patterns, and an environment guard.
// Two (or three) driver instances live in the one test process, each with
// its own recorder, and are polled in turn from one thread.
#pragma once

#include <doctest/doctest.h>

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/transfer/driver.hpp"
#include "drivers/builtin.hpp"
#include "drivers/ofi/ofi_driver.hpp"

namespace nmad_test::conformance {

using namespace std::chrono_literals;
using nmad::connection_id;
using nmad::driver;
using nmad::post_result;
using steady = std::chrono::steady_clock;

// Registered before any test runs, as libnmad's session::create would.
inline const bool kRegistered = (nmad::register_builtin_drivers(), true);

// The ofi driver runs once per provider: tcp;ofi_rxm and shm must open
// here; udp;ofi_rxd runs where it opens (the description names the provider).
inline std::unique_ptr<driver> ofi_tcp() { return nmad::make_ofi_driver_for("tcp;ofi_rxm"); }
inline std::unique_ptr<driver> ofi_shm() { return nmad::make_ofi_driver_for("shm"); }
inline std::unique_ptr<driver> ofi_udp() { return nmad::make_ofi_driver_for("udp;ofi_rxd"); }

struct null_events final : nmad::driver_events {
  void on_connected(connection_id, int) override {}
  void on_packet(connection_id, std::span<const std::byte>) override {}
  void on_send_done(void*) override {}
  void on_recv_data_done(void*, std::size_t) override {}
  void on_connection_failed(connection_id, std::string_view) override {}
};

inline bool opens(std::unique_ptr<driver> (*make)(), std::string* why = nullptr) {
  null_events ev;
  try {
    make()->open({0, 2, "probe", &ev});
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}

// The drivers under test: the registered network drivers (the loopback one
// reaches only its own process, so pairs of it cannot be formed), ofi once
// per provider.
inline std::vector<nmad::driver_descriptor> network_drivers() {
  static const bool udp_works = [] {
    std::string why;
    const bool ok = opens(&ofi_udp, &why);
    if (!ok) MESSAGE("ofi over udp;ofi_rxd left out: " << why);
    return ok;
  }();
  std::vector<nmad::driver_descriptor> out;
  for (const auto& d : nmad::driver_registry()) {
    if (d.loopback) continue;
    if (d.name == "ofi") {
      out.push_back({"ofi", "tcp;ofi_rxm", &ofi_tcp});
      out.push_back({"ofi", "shm", &ofi_shm});
      if (udp_works) out.push_back({"ofi", "udp;ofi_rxd", &ofi_udp});
      continue;
    }
    out.push_back(d);
  }
  return out;
}

// What INFO prints for a driver under test.
inline std::string label(const nmad::driver_descriptor& d) {
  return d.name == "ofi" ? "ofi over " + std::string(d.description) : std::string(d.name);
}

inline constexpr auto kLimit = 10s;
inline const std::string kKey = "conformance-job-key-0123456789";

struct recorder final : nmad::driver_events {
  std::vector<std::pair<connection_id, int>> connected;
  std::vector<std::pair<connection_id, std::vector<std::byte>>> packets;
  std::vector<void*> sends_done;
  std::vector<std::pair<void*, std::size_t>> recvs_done;
  std::vector<std::pair<connection_id, std::string>> failed;
  std::function<void(connection_id, std::span<const std::byte>)> packet_hook;
  std::function<void(void*)> send_hook;

  void on_connected(connection_id c, int rank) override { connected.emplace_back(c, rank); }
  void on_packet(connection_id c, std::span<const std::byte> p) override {
    packets.emplace_back(c, std::vector<std::byte>(p.begin(), p.end()));
    if (packet_hook) packet_hook(c, p);
  }
  void on_send_done(void* token) override {
    sends_done.push_back(token);
    if (send_hook) send_hook(token);
  }
  void on_recv_data_done(void* token, std::size_t n) override { recvs_done.emplace_back(token, n); }
  void on_connection_failed(connection_id c, std::string_view why) override {
    failed.emplace_back(c, std::string(why));
  }
  std::size_t total() const {
    return connected.size() + packets.size() + sends_done.size() + recvs_done.size() +
           failed.size();
  }
};

using drivers = std::vector<driver*>;

// Polls every driver until pred() holds; false if `limit` passed first.
template <class Pred>
bool poll_until(const drivers& ds, Pred pred, std::chrono::milliseconds limit = kLimit) {
  const auto end = steady::now() + limit;
  while (!pred()) {
    if (steady::now() > end) return false;
    for (driver* d : ds) d->poll();
  }
  return true;
}

inline void poll_for(const drivers& ds, std::chrono::milliseconds d) {
  poll_until(ds, [] { return false; }, d);
}

// Calls post() until it is not `retry`, polling in between. True if posted.
template <class Post>
bool post_retry(const drivers& ds, Post post) {
  const auto end = steady::now() + kLimit;
  for (;;) {
    post_result r = post();
    if (r != post_result::retry) return r == post_result::posted;
    if (steady::now() > end) return false;
    for (driver* d : ds) d->poll();
  }
}

inline std::unique_ptr<driver> open_driver(const nmad::driver_descriptor& d, int rank, int size,
                                           recorder& ev, const std::string& key = kKey) {
  auto drv = d.create();
  REQUIRE(drv);
  drv->open({rank, size, key, &ev});
  return drv;
}

// Rank 0 (a) and rank 1 (b); b connects to a, as the engine does (j < own).
struct pair_fixture {
  recorder ea, eb;
  std::unique_ptr<driver> a, b;
  connection_id a2b = nmad::invalid_connection, b2a = nmad::invalid_connection;

  explicit pair_fixture(const nmad::driver_descriptor& d) {
    a = open_driver(d, 0, 2, ea);
    b = open_driver(d, 1, 2, eb);
    b2a = b->connect(0, a->local_address());
    REQUIRE(poll_until({a.get(), b.get()},
                       [&] { return !ea.connected.empty() && !eb.connected.empty(); }));
    a2b = ea.connected[0].first;
  }
  drivers both() { return {a.get(), b.get()}; }
};

inline std::byte pattern(std::size_t i, unsigned seed) {
  return static_cast<std::byte>((i * 131 + (i >> 11) + seed * 7) & 0xff);
}

inline std::vector<std::byte> make_bytes(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = pattern(i, seed);
  return v;
}

inline iovec iov_of(const void* p, std::size_t n) { return {const_cast<void*>(p), n}; }

inline void* tok(std::uintptr_t n) { return reinterpret_cast<void*>(n); }

// Sends one packet made of `parts` from `from` and returns what `to` got.
inline std::vector<std::byte> round_trip(pair_fixture& p, driver& from, connection_id conn,
                                         recorder& from_ev, recorder& to_ev,
                                         std::vector<std::vector<std::byte>>& parts) {
  std::vector<iovec> iov;
  for (auto& part : parts) iov.push_back(iov_of(part.data(), part.size()));
  const std::size_t before = to_ev.packets.size(), sends = from_ev.sends_done.size();
  REQUIRE(post_retry(p.both(), [&] { return from.post_send_packet(conn, iov, tok(77)); }));
  REQUIRE(poll_until(p.both(), [&] {
    return to_ev.packets.size() > before && from_ev.sends_done.size() > sends;
  }));
  CHECK(from_ev.sends_done.back() == tok(77));
  return to_ev.packets.back().second;
}

// Sets an environment variable for the guard's lifetime (unset after).
struct env_guard {
  std::string name;
  env_guard(std::string n, const char* value) : name(std::move(n)) {
    ::setenv(name.c_str(), value, 1);
  }
  ~env_guard() { ::unsetenv(name.c_str()); }
};

}  // namespace nmad_test::conformance
