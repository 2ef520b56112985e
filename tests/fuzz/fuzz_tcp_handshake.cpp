// Fuzz target: what a connecting peer sends to the tcp driver
// (drivers/tcp): the hello and its job key, then frames. One real tcp
// driver (rank 0 of 4, a known job key) listens on 127.0.0.1 for the whole
// run; each input is sent by a fresh loopback connection, which then shuts
// its write side (EOF). Once a connection is accepted, the harness posts
// two receive buffers (cookies 7 and 8) so data frames reach the placement
// code too.
// Checked: no crash or sanitizer report; a packet delivered is at most
// caps().max_packet_size bytes; bulk data never exceeds what was posted;
// and the driver always ends the connection (it saw EOF) within a bounded
// time: a connection still open then is a hang and aborts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/transfer/driver.hpp"
#include "drivers/tcp/tcp_driver.hpp"

namespace {
using namespace nmad;

constexpr const char* kJobKey = "fuzz-job-key-0123456789abcdef";

struct recorder final : driver_events {
  driver* drv = nullptr;
  std::vector<std::byte> big = std::vector<std::byte>(4096);
  std::vector<std::byte> small_a = std::vector<std::byte>(100), small_b = std::vector<std::byte>(100);
  void on_connected(connection_id conn, int peer_rank) override {
    if (peer_rank <= 0 || peer_rank >= 4) std::abort();  // rank checked by the driver
    iovec one{big.data(), big.size()};
    iovec two[2] = {{small_a.data(), small_a.size()}, {small_b.data(), small_b.size()}};
    drv->post_recv_data(conn, 7, std::span<const iovec>(&one, 1), &big);
    drv->post_recv_data(conn, 8, std::span<const iovec>(two, 2), &small_a);
  }
  void on_packet(connection_id, std::span<const std::byte> packet) override {
    if (packet.size() > drv->caps().max_packet_size) std::abort();
    volatile unsigned sum = 0;
    for (std::byte b : packet) sum = sum + static_cast<unsigned>(b);
  }
  void on_send_done(void*) override {}
  void on_recv_data_done(void* token, std::size_t received) override {
    if (token == &big && received > big.size()) std::abort();
    if (token == &small_a && received > small_a.size() + small_b.size()) std::abort();
  }
  void on_connection_failed(connection_id, std::string_view) override {}
};

struct fixture {
  recorder events;
  std::unique_ptr<driver> drv = make_tcp_driver();
  sockaddr_in addr{};
  fixture() {
    ::setenv("NMAD_LOG", "error", 0);  // refused connections are expected here
    ::setenv("NMAD_TCP_HOST", "127.0.0.1", 1);
    ::unsetenv("NMAD_TCP_PORT");
    events.drv = drv.get();
    driver_config cfg;
    cfg.rank = 0;
    cfg.size = 4;
    cfg.job_key = kJobKey;
    cfg.events = &events;
    drv->open(cfg);
    const std::string a = drv->local_address();  // a.b.c.d:port
    const auto colon = a.rfind(':');
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(a.substr(colon + 1))));
    ::inet_pton(AF_INET, a.substr(0, colon).c_str(), &addr.sin_addr);
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fixture f;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : ::connect(fd, reinterpret_cast<sockaddr*>(&f.addr), sizeof f.addr);
  if (rc != 0 && fd >= 0 && errno == EINTR) {
    // Interrupted by a signal: the connection goes on by itself; wait for
    // it and read its outcome.
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
    }
    int err = 0;
    socklen_t len = sizeof err;
    rc = (p.revents & POLLOUT) && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 ? 0 : -1;
  }
  if (rc != 0) {
    std::perror("fuzz_tcp_handshake: connect");
    std::abort();
  }
  // Send everything (the driver reads while we write), then EOF.
  std::size_t off = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool closed = false;
  while (!closed) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fuzz_tcp_handshake: the driver neither finished nor closed the connection\n");
      std::abort();
    }
    if (off < size) {
      ssize_t n = ::send(fd, data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) off += static_cast<std::size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) off = size;  // refused
      if (off == size) ::shutdown(fd, SHUT_WR);
    }
    f.drv->poll();
    char buf[256];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) continue;  // the ack
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) closed = true;
      break;
    }
  }
  ::close(fd);
  for (int i = 0; i < 4; ++i) f.drv->poll();  // settle: failures reported
  return 0;
}
