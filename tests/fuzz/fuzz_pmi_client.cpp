// Fuzz target: the PMI-1 client (core/bootstrap/pmi_client.cpp,
// pmi_wire.hpp) reading what a launcher answers. The input is the whole
// byte stream "the launcher" sends; the real client runs its usual
// sequence against it (start-up handshake, puts of a short and of a
// chunked value, fence, gets, the job key, finalize) over a socketpair
// (PMI_FD) or a loopback TCP connection (PMI_PORT, with the initack/set
// handshake), chosen by the first input byte. The stream ends with EOF, so
// the client either gets what it needs or fails with a clear error.
// Checked: no crash or sanitizer report, only std::runtime_error escapes,
// nothing blocks until the PMI timeout (libFuzzer's -timeout catches that),
// and pmi::escape/unescape round-trip the input.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/bootstrap/bootstrap.hpp"
#include "core/bootstrap/pmi_wire.hpp"

namespace {
using namespace nmad;

int g_listen = -1;
int g_port = 0;

void init_once() {
  static bool done = false;
  if (done) return;
  done = true;
  ::setenv("NMAD_LOG", "error", 0);
  ::setenv("NMAD_PMI_TIMEOUT", "5", 1);
  ::unsetenv("NMAD_JOB_KEY");
  g_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (g_listen < 0 || ::bind(g_listen, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(g_listen, 16) != 0 || ::getsockname(g_listen, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    std::abort();
  g_port = ntohs(sa.sin_port);
}

void write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;  // the client closed: it failed already
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void run_client() {
  std::unique_ptr<bootstrap> b;
  try {
    b = bootstrap::from_environment();
    b->put("nmad.addr.tcp.0." + std::to_string(b->rank()), "127.0.0.1:4242");
    b->put("big value", std::string(3000, 'x') + " =%\n");  // chunked and escaped
    b->fence();
    (void)b->get("nmad.addr.tcp.0.0");
    (void)b->get("big value");
    (void)b->job_key();
    b->finalize();
  } catch (const std::runtime_error&) {
    // The expected outcome for most inputs: a clear error.
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  init_once();
  // The wire helpers on their own: escaping round-trips any bytes.
  const std::string raw(reinterpret_cast<const char*>(data), size);
  const auto back = pmi::unescape(pmi::escape(raw));
  if (!back || *back != raw) std::abort();
  (void)pmi::unescape(raw);
  std::string err;
  (void)pmi::parse_line(raw, &err);

  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  ++data;
  --size;
  ::setenv("PMI_RANK", mode & 2 ? "1" : "0", 1);
  ::setenv("PMI_SIZE", "2", 1);
  if (mode & 1) {
    // PMI_PORT: the client connects (the connection completes in the
    // listen backlog); a thread plays the launcher: it accepts, sends the
    // whole stream and shuts its write side. The accepted socket is closed
    // only after the client is done, so nothing it still reads is reset.
    ::unsetenv("PMI_FD");
    ::setenv("PMI_PORT", ("127.0.0.1:" + std::to_string(g_port)).c_str(), 1);
    ::setenv("PMI_ID", mode & 2 ? "1" : "0", 1);
    int accepted = -1;
    std::thread launcher([&] {
      accepted = ::accept4(g_listen, nullptr, nullptr, SOCK_CLOEXEC);
      if (accepted < 0) return;
      write_all(accepted, data, size);
      ::shutdown(accepted, SHUT_WR);
    });
    run_client();
    launcher.join();
    if (accepted >= 0) ::close(accepted);
    return 0;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  ::unsetenv("PMI_PORT");
  ::unsetenv("PMI_ID");
  ::setenv("PMI_FD", std::to_string(sv[0]).c_str(), 1);
  write_all(sv[1], data, size);
  ::shutdown(sv[1], SHUT_WR);
  run_client();  // owns and closes sv[0]
  ::close(sv[1]);
  return 0;
}
