// The shm provider's segments (see ofi_shm_segment.hpp).
#include "drivers/ofi/ofi_shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <ctime>

#include "core/common/random.hpp"

namespace nmad::ofi_shm {
namespace {

constexpr std::string_view kPrefix = "fi_shm://";
constexpr std::string_view kStem = "nmad_";
constexpr std::size_t kHexDigits = 16;

bool same_file(int fd, const struct stat& named) {
  struct stat st{};
  return ::fstat(fd, &st) == 0 && st.st_dev == named.st_dev && st.st_ino == named.st_ino;
}

bool pid_runs_here(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

std::string make_endpoint_name() {
  return std::string(kPrefix) + std::string(kStem) + random_hex(kHexDigits) + "_" + std::to_string(::getpid());
}

std::string segment_file(std::string_view name) {
  if (name.substr(0, kPrefix.size()) != kPrefix) return {};
  name.remove_prefix(kPrefix.size());
  if (const auto nul = name.find('\0'); nul != std::string_view::npos) name = name.substr(0, nul);
  if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..") return {};
  return std::string(name);
}

bool is_driver_segment(std::string_view file, int* pid) {
  if (file.substr(0, kStem.size()) != kStem) return false;
  file.remove_prefix(kStem.size());
  if (file.size() < kHexDigits + 2 || file[kHexDigits] != '_') return false;
  for (std::size_t i = 0; i < kHexDigits; ++i) {
    const char c = file[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  const std::string_view digits = file.substr(kHexDigits + 1);
  int p = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), p);
  if (ec != std::errc{} || end != digits.data() + digits.size() || p <= 0) return false;
  if (pid) *pid = p;
  return true;
}

// ---- segment_hold ---------------------------------------------------------------
segment_hold::~segment_hold() {
  if (_fd >= 0) ::close(_fd);
}

bool segment_hold::take(const std::string& file) {
  if (_fd >= 0 || file.empty()) return false;
  const int fd = ::shm_open(("/" + file).c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  _fd = fd;
  _file = file;
  return true;
}

void segment_hold::withdraw() {
  if (_withdrawn || _file.empty()) return;
  _withdrawn = true;
  ::shm_unlink(("/" + _file).c_str());
}

// ---- peer_segment -----------------------------------------------------------------
peer_segment::peer_segment(peer_segment&& o) noexcept : _fd(o._fd), _file(std::move(o._file)) { o._fd = -1; }

peer_segment& peer_segment::operator=(peer_segment&& o) noexcept {
  if (this != &o) {
    if (_fd >= 0) ::close(_fd);
    _fd = o._fd;
    _file = std::move(o._file);
    o._fd = -1;
  }
  return *this;
}

peer_segment::~peer_segment() {
  if (_fd >= 0) ::close(_fd);
}

bool peer_segment::open(const std::string& file) {
  if (_fd >= 0) ::close(_fd);
  _fd = -1;
  _file.clear();
  if (file.empty()) return false;
  const int fd = ::shm_open(("/" + file).c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  _fd = fd;
  _file = file;
  return true;
}

bool peer_segment::held() const {
  if (_fd < 0) return true;
  if (::flock(_fd, LOCK_EX | LOCK_NB) == 0) {
    ::flock(_fd, LOCK_UN);
    return false;
  }
  return true;  // EWOULDBLOCK: its owner holds it (other errors: cannot tell)
}

void peer_segment::reap() {
  if (_fd < 0) return;
  struct stat named{};
  if (::stat(("/dev/shm/" + _file).c_str(), &named) == 0 && same_file(_fd, named))
    ::shm_unlink(("/" + _file).c_str());
}

// ---- leftovers of earlier processes -------------------------------------------------
std::vector<std::string> reap_abandoned_segments(std::chrono::seconds min_age, const std::string& dir) {
  std::vector<std::string> removed;
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return removed;
  DIR* d = ::fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    return removed;
  }
  const std::time_t now = std::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view file(e->d_name);
    int pid = 0;
    if (!is_driver_segment(file, &pid) || pid == ::getpid() || pid_runs_here(pid)) continue;
    struct stat st{};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (now - st.st_mtime < min_age.count()) continue;
    const int fd = ::openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    // Nobody holds it (its owner is gone, in whatever pid namespace it ran),
    // and the name still leads to the file checked.
    if (same_file(fd, st) && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      struct stat again{};
      if (::fstatat(dfd, e->d_name, &again, AT_SYMLINK_NOFOLLOW) == 0 && same_file(fd, again) &&
          ::unlinkat(dfd, e->d_name, 0) == 0)
        removed.emplace_back(file);
    }
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

}  // namespace nmad::ofi_shm
