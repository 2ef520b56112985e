#pragma once
// Shared-memory segments in /dev/shm as the shm driver makes them, for
// every part of nmad that makes one (the driver's doorbells and pair
// segments, the MPI layer's collective areas):
//   - named "/<prefix><what>-<pid>-<counter>-<random>" (shm_names.hpp);
//   - created exclusively, mode 0600, and locked (flock, shared) by their
//     creator before anything else: the creator then writes kSegmentMagic
//     in the first 8 bytes last, once the contents are ready, and keeps
//     the lock for as long as the name is linked.
// The start-up sweep (sweep_stale_names) removes a segment of this user
// that carries the magic while nobody holds that lock any more: its
// creator died before it could unlink the name.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nmad::shm {

// "NMADSM03": the first 8 bytes of every segment the sweep may remove.
inline constexpr std::uint64_t kSegmentMagic = 0x33304d5344414d4eULL;

// A fresh name "/<prefix><what>-<pid>-<counter>-<random>"; `counter` is the
// caller's and is incremented (under the same lock as the generator).
std::string unique_name(std::string_view prefix, const char* what, unsigned& counter);

// A segment this process created and holds the shared lock of.
struct locked_segment {
  void* base = nullptr;   // mapped read-write, zero-filled
  std::size_t bytes = 0;
  int lock_fd = -1;       // close it (after unlinking) to release the lock
};

// Creates `name` (O_EXCL, 0600), takes the creator's shared lock, sizes and
// maps it (MAP_POPULATE if `populate`). On failure nothing is left behind
// (no name, no descriptor), base is null and `why` says what failed.
locked_segment create_locked(const std::string& name, std::size_t bytes, bool populate, std::string& why);

}  // namespace nmad::shm
