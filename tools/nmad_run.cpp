// nmad-run: starts N local processes under a PMI-1 server (see
// tools/launcher/launcher.hpp for the behaviour and exit statuses).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "tools/launcher/launcher.hpp"

namespace {
void write_stderr(const std::string& s) {
  ssize_t r = ::write(STDERR_FILENO, s.data(), s.size());
  (void)r;
}
}  // namespace

int main(int argc, char** argv) {
  // Writes to a closed PMI socket or output pipe must not kill the launcher.
  ::signal(SIGPIPE, SIG_IGN);
  // Keep fds 0-2 taken so no PMI socket lands there.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) {
      int n = ::open("/dev/null", O_RDWR);
      if (n >= 0 && n != fd) {
        ::dup2(n, fd);
        ::close(n);
      }
    }

  nmad::launcher::job_options opts;
  try {
    bool help = false;
    opts = nmad::launcher::parse_command_line(argc, argv, &help);
    if (help) {
      std::fputs(nmad::launcher::usage_text().c_str(), stdout);
      return 0;
    }
  } catch (const nmad::launcher::usage_error& e) {
    write_stderr(std::string("nmad-run: ") + e.what() + "\n" + nmad::launcher::usage_text());
    return 2;
  }
  opts.handle_signals = true;
  try {
    return nmad::launcher::run_job(opts).exit_code;
  } catch (const nmad::launcher::usage_error& e) {
    write_stderr(std::string("nmad-run: ") + e.what() + "\n");
    return 2;
  } catch (const std::exception& e) {
    write_stderr(std::string("nmad-run: error: ") + e.what() + "\n");
    return 1;
  }
}
