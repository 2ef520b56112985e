#include "drivers/self/self_driver.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace nmad {
namespace {

std::size_t iov_length(std::span<const iovec> iov) {
  std::size_t n = 0;
  for (const auto& v : iov) n += v.iov_len;
  return n;
}

class self_driver final : public driver {
 public:
  void open(const driver_config& config) override {
    _config = config;
    _caps.name = "self";
    _caps.max_packet_size = 64 * 1024;
    _caps.max_iov = 64;
    _caps.max_sends_in_flight = 2;
    _caps.gather_scatter = true;
    _caps.zero_copy_data = false;  // one copy, sender to receiver buffer
    _caps.latency_us = 0.05;
    _caps.bandwidth_mbps = 10000;
  }
  const driver_caps& caps() const override { return _caps; }
  std::string local_address() const override { return "self"; }

  connection_id connect(int peer_rank, std::string_view) override {
    _pending_connect = true;
    return 0;
  }

  post_result post_send_packet(connection_id conn, std::span<const iovec> iov,
                               void* token) override {
    if (conn != 0 || _closed) return post_result::failed;
    std::vector<std::byte> bytes(iov_length(iov));
    std::size_t pos = 0;
    for (const auto& v : iov) {
      if (v.iov_len) std::memcpy(bytes.data() + pos, v.iov_base, v.iov_len);
      pos += v.iov_len;
    }
    _packets.push_back(std::move(bytes));
    _send_done.push_back(token);
    return post_result::posted;
  }

  post_result post_send_data(connection_id conn, std::uint64_t cookie,
                             std::span<const iovec> iov, void* token) override {
    if (conn != 0 || _closed) return post_result::failed;
    auto it = _recvs.find(cookie);
    if (it == _recvs.end()) return post_result::failed;  // engine contract broken
    std::size_t len = iov_length(iov);
    if (len > iov_length(it->second.iov)) return post_result::failed;
    // Scatter-gather copy from the send iovec to the receive iovec.
    std::size_t si = 0, so = 0, ri = 0, ro = 0, left = len;
    const auto& riov = it->second.iov;
    while (left > 0) {
      while (iov[si].iov_len == so) { ++si; so = 0; }
      while (riov[ri].iov_len == ro) { ++ri; ro = 0; }
      std::size_t n = std::min({left, iov[si].iov_len - so, riov[ri].iov_len - ro});
      std::memcpy(static_cast<std::byte*>(riov[ri].iov_base) + ro,
                  static_cast<const std::byte*>(iov[si].iov_base) + so, n);
      so += n; ro += n; left -= n;
    }
    _recv_done.push_back({it->second.token, len});
    _recvs.erase(it);
    _send_done.push_back(token);
    return post_result::posted;
  }

  post_result post_recv_data(connection_id conn, std::uint64_t cookie,
                             std::span<const iovec> iov, void* token) override {
    if (conn != 0 || _closed) return post_result::failed;
    _recvs[cookie] = {std::vector<iovec>(iov.begin(), iov.end()), token};
    return post_result::posted;
  }

  int poll() override {
    int work = 0;
    if (_pending_connect) {
      _pending_connect = false;
      _config.events->on_connected(0, _config.rank);
      ++work;
    }
    // Deliver what is queued now; callbacks may queue more for next time.
    // The batches are members so the idle poll allocates nothing.
    if (!_send_done.empty()) {
      _sends_batch.swap(_send_done);
      for (void* t : _sends_batch) { _config.events->on_send_done(t); ++work; }
      _sends_batch.clear();
    }
    if (!_recv_done.empty()) {
      _recvs_batch.swap(_recv_done);
      for (auto& [t, n] : _recvs_batch) { _config.events->on_recv_data_done(t, n); ++work; }
      _recvs_batch.clear();
    }
    if (!_packets.empty()) {
      _packets_batch.swap(_packets);
      for (auto& p : _packets_batch) { _config.events->on_packet(0, p); ++work; }
      _packets_batch.clear();
    }
    return work;
  }

  bool quiet() const override {
    return !_pending_connect && _send_done.empty() && _recv_done.empty() && _packets.empty();
  }

  void close_connection(connection_id) override { _closed = true; }

  // Everything the self driver does happens in poll(): a sleeper only has
  // to know whether something is queued (another thread queueing later
  // wakes it through the engine).
  arm_result arm_wakeup(std::vector<pollfd>&, int&) override {
    const bool pending = _pending_connect || !_send_done.empty() || !_recv_done.empty() || !_packets.empty();
    return pending ? arm_result::busy : arm_result::armed;
  }

 private:
  struct posted_recv {
    std::vector<iovec> iov;
    void* token;
  };
  driver_config _config;
  driver_caps _caps;
  bool _pending_connect = false;
  bool _closed = false;
  std::vector<std::vector<std::byte>> _packets, _packets_batch;
  std::vector<void*> _send_done, _sends_batch;
  std::vector<std::pair<void*, std::size_t>> _recv_done, _recvs_batch;
  std::unordered_map<std::uint64_t, posted_recv> _recvs;
};

}  // namespace

std::unique_ptr<driver> make_self_driver() { return std::make_unique<self_driver>(); }

}  // namespace nmad
