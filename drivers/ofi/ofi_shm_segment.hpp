#pragma once
// The shm provider's segments: what the ofi driver does so that none stays
// in /dev/shm after the process that created it, however it ends.
//
// libfabric's shm provider keeps each endpoint's queues in a file of
// /dev/shm named after the endpoint ("fi_shm://NAME" -> /dev/shm/NAME). It
// unlinks the file when the endpoint closes and from its handlers of
// SIGINT/SIGTERM/..., but a process killed with SIGKILL, or one that ends
// with _exit() or abort(), leaves it: 16 MiB a process. The ofi driver names
// its endpoint itself ("nmad_<16 hex digits>_<pid>") and then:
//   * holds a shared flock() on its own segment for as long as it lives
//     (segment_hold): the kernel drops the lock when the process ends, in
//     any pid namespace, so "nobody holds it" means "its owner is gone";
//   * unlinks its own name once every peer has mapped the segment
//     (driver::wireup_complete): from then on nothing is left whatever way
//     the process ends, and peers keep their mappings;
//   * keeps a descriptor on each connected peer's segment (peer_segment) and
//     probes its lock (once the peer said it holds it): a peer killed at any
//     time is noticed (the connection fails naming it), and its file
//     unlinked if its name was still there;
//   * at open, removes what earlier processes left (reap_abandoned_segments):
//     files with our naming pattern, owned by this user, that nobody holds,
//     whose pid is not alive here, and that were not written for a while.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace nmad::ofi_shm {

// A fresh endpoint name for the shm provider: "fi_shm://nmad_<hex>_<pid>".
std::string make_endpoint_name();

// The file in /dev/shm behind an shm endpoint name ("fi_shm://X", possibly
// followed by the NUL fi_getname includes): "X"; empty when `name` is not
// one (other providers' names, a '/' inside, empty).
std::string segment_file(std::string_view endpoint_name);

// Whether `file` (a name inside /dev/shm) is one make_endpoint_name() makes;
// `pid` receives the pid it carries.
bool is_driver_segment(std::string_view file, int* pid = nullptr);

// This process's own segment: a descriptor with a shared lock, so others
// can tell it is alive; withdraw() unlinks the name (the provider may still
// try at close: the name is gone by then, which is harmless).
class segment_hold {
 public:
  segment_hold() = default;
  segment_hold(const segment_hold&) = delete;
  segment_hold& operator=(const segment_hold&) = delete;
  ~segment_hold();
  // Opens /dev/shm/`file` and takes the lock; false (nothing held) if it
  // cannot.
  bool take(const std::string& file);
  void withdraw();
  bool held() const { return _fd >= 0; }
  bool withdrawn() const { return _withdrawn; }

 private:
  int _fd = -1;
  std::string _file;
  bool _withdrawn = false;
};

// A peer's segment, opened while its name exists.
class peer_segment {
 public:
  peer_segment() = default;
  peer_segment(const peer_segment&) = delete;
  peer_segment& operator=(const peer_segment&) = delete;
  peer_segment(peer_segment&& o) noexcept;
  peer_segment& operator=(peer_segment&& o) noexcept;
  ~peer_segment();
  // Opens /dev/shm/`file`; false if there is no such file.
  bool open(const std::string& file);
  bool is_open() const { return _fd >= 0; }
  // Whether a live process still holds the segment (its owner's lock).
  // True when it cannot tell (not open, or flock failing otherwise).
  bool held() const;
  // Unlinks the name if it still names the file opened (a later file of
  // the same name is left alone).
  void reap();
  const std::string& file() const { return _file; }

 private:
  int _fd = -1;
  std::string _file;
};

// Unlinks, in `dir` (/dev/shm), every segment of our naming pattern owned
// by this user that no process holds, whose pid does not run in this pid
// namespace, and that nobody wrote for `min_age` (a segment just created is
// not held yet for a moment). Returns the names removed.
std::vector<std::string> reap_abandoned_segments(std::chrono::seconds min_age,
                                                 const std::string& dir = "/dev/shm");

}  // namespace nmad::ofi_shm
