// shm driver: removing what processes killed during wire-up left in
// /dev/shm (see shm_driver.cpp, "Names of dead processes").
#include <dirent.h>
#include <sys/file.h>

#include "drivers/shm/shm_driver.hpp"
#include "drivers/shm/shm_internal.hpp"

namespace nmad::shm_impl {
namespace {

// "nmad-<8 hex>-<what>-..." with what one of the driver's kinds, or the
// MPI layer's collective segment (mpi_layer/coll/shm.cpp).
const char* kind_of(const char* name) {
  if (std::strncmp(name, "nmad-", 5) != 0) return nullptr;
  for (int i = 5; i < 13; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return nullptr;
  if (name[13] != '-') return nullptr;
  // ("coll-": the MPI layer's shared-memory collectives, same protocol.)
  for (const char* k : {"db-", "pair-", "wake-", "coll-"})
    if (std::strncmp(name + 14, k, std::strlen(k)) == 0) return k;
  return nullptr;
}

// A doorbell or pair segment whose creator is gone: it took a shared lock
// before writing the magic and holds it as long as it lives, so an
// exclusive lock that succeeds on a segment with the magic proves nobody
// holds it any more. (Without the magic: just created, or written by a
// version without the lock: left alone.)
bool dead_segment(int dirfd, const char* name) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  bool dead = false;
  struct stat st{};
  std::uint64_t magic = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      ::flock(fd, LOCK_EX | LOCK_NB) == 0)
    dead = ::pread(fd, &magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic) && magic == kMagic;
  ::close(fd);  // (releases the lock)
  return dead;
}

// A wake-up socket nobody is bound to any more: connecting is refused.
bool dead_socket(int dirfd, const char* name) {
  struct stat st{};
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid())
    return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (std::snprintf(sa.sun_path, sizeof sa.sun_path, "/dev/shm/%s", name) >= static_cast<int>(sizeof sa.sun_path))
    return false;
  fd_holder s;
  s.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.fd < 0) return false;
  return ::connect(s.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno == ECONNREFUSED;
}

}  // namespace

int sweep_stale_names() {
  DIR* d = ::opendir("/dev/shm");
  if (!d) return 0;
  const int dirfd = ::dirfd(d);
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    const char* kind = kind_of(e->d_name);
    if (!kind) continue;
    const bool dead = std::strcmp(kind, "wake-") == 0 ? dead_socket(dirfd, e->d_name) : dead_segment(dirfd, e->d_name);
    if (dead && ::unlinkat(dirfd, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  if (removed > 0)
    log_write(log_level::info, "shm",
              "removed " + std::to_string(removed) + " name(s) that processes killed during wire-up left in /dev/shm");
  return removed;
}

}  // namespace nmad::shm_impl
