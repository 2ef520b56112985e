// Fuzz target: the launcher's PMI-1 server (tools/launcher/pmi_server.*)
// reading what ranks send. A job of 1-4 ranks; up to three connections,
// each known as a rank (PMI_FD socketpairs) or unidentified until its
// initack (PMI_PORT), each sending its part of the input, then EOF. The
// server is driven by the same fill_pollfds/poll/handle loop as nmad-run.
// Input: byte 0: job size (1 + b % 4); byte 1: connections (1 + b % 3);
// then per connection one byte (rank, or unidentified when >= size) and a
// u16 length of its bytes, the bytes following.
// Checked: no crash or sanitizer report, and the server ends every
// connection that sent EOF (a connection still open after the loop is a
// hang and aborts); abort/report callbacks get a rank inside the job.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/launcher/pmi_server.hpp"

namespace {
struct client {
  int fd = -1;  // our end
  bool closed = false;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int job = 1 + data[0] % 4;
  const int nconn = 1 + data[1] % 3;
  std::size_t pos = 2;
  nmad::launcher::pmi_server server(job, "kvs_fuzz_0");
  server.on_abort = [job](int rank, int, const std::string&) {
    if (rank < 0 || rank >= job) std::abort();
  };
  server.on_report = [](const std::string&) {};
  std::vector<client> clients;
  for (int i = 0; i < nconn && pos + 3 <= size; ++i) {
    const int rank = data[pos] < job ? data[pos] : -1;
    std::uint16_t len;
    std::memcpy(&len, data + pos + 1, 2);
    pos += 3;
    len = static_cast<std::uint16_t>(std::min<std::size_t>(len, size - pos));
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
    // A rank's bytes sit in the socket before the server looks (at most
    // 64 KiB: the socket buffer holds them).
    std::size_t off = 0;
    while (off < len) {
      ssize_t n = ::send(sv[1], data + pos + off, len - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    ::shutdown(sv[1], SHUT_WR);
    pos += len;
    server.add_connection(sv[0], rank);
    clients.push_back({sv[1], false});
  }
  // Every client sent EOF: within a bounded number of rounds the server
  // has read everything and closed each connection.
  for (int round = 0; round < 1000; ++round) {
    std::vector<pollfd> fds;
    server.fill_pollfds(fds);
    ::poll(fds.data(), fds.size(), 0);
    server.handle(fds, 0);
    bool all_closed = true;
    for (auto& c : clients) {
      char buf[4096];
      ssize_t n;
      while ((n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0) c.closed = true;
      all_closed &= c.closed;
    }
    if (all_closed) break;
  }
  for (auto& c : clients) {
    if (!c.closed) {
      std::fprintf(stderr, "fuzz_pmi_server: a connection that sent EOF was never closed\n");
      std::abort();
    }
    ::close(c.fd);
  }
  for (int r = 0; r < job; ++r) server.rank_exited(r);
  return 0;
}
