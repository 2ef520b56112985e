#include "api/nmad/services/shm_segment.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

namespace nmad::shm {

std::string unique_name(std::string_view prefix, const char* what, unsigned& counter) {
  // One generator for the process (not per thread: 2.5 KiB of thread-local
  // state would keep the library from loading with dlopen).
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  unsigned r, k;
  {
    std::lock_guard g(mu);
    r = static_cast<unsigned>(rng());
    k = counter++;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "/%.*s%s-%d-%u-%08x", static_cast<int>(prefix.size()), prefix.data(), what,
                static_cast<int>(::getpid()), k, r);
  return buf;
}

locked_segment create_locked(const std::string& name, std::size_t bytes, bool populate, std::string& why) {
  locked_segment s;
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    why = "cannot create " + name + ": " + std::strerror(errno);
    return s;
  }
  // Taken before the magic is written: how another process knows the name
  // is not a dead one's.
  while (::flock(fd, LOCK_SH) != 0 && errno == EINTR) {
  }
  void* p = MAP_FAILED;
  const char* step = "ftruncate";
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    step = "mmap";
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  }
  if (p == MAP_FAILED) {
    why = std::string(step) + " of " + name + ": " + std::strerror(errno);
    ::shm_unlink(name.c_str());
    ::close(fd);
    return s;
  }
  s.base = p;
  s.bytes = bytes;
  s.lock_fd = fd;
  return s;
}

}  // namespace nmad::shm
