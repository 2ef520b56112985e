// Shared-memory collectives (shm.hpp): the segment, its set-up over
// the engine, and the operations.
#include "mpi_layer/coll/shm.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <span>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/shm_segment.hpp"
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/coll/schedule.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi::shmcoll {

namespace {

// Segments are made as the shm driver makes its own (shm_segment.hpp): its
// start-up sweep removes an "nmad-<tag>-coll-..." segment whose creator
// died holding the name.
constexpr std::uint64_t kLayout = 0x434f4c4c53484d32ULL;  // "COLLSHM2"

struct alignas(64) counter {
  std::atomic<std::uint64_t> v{0};
};
struct alignas(64) line {
  std::atomic<std::uint64_t> seq{0};
  std::byte data[kLineBytes];
};
static_assert(sizeof(line) == 64);
struct alignas(64) slot {
  std::atomic<std::uint64_t> seq{0};
  alignas(64) std::byte data[kSlotBytes];
};
struct alignas(64) big_slot {
  std::atomic<std::uint64_t> seq{0};
  alignas(64) std::byte data[kBigBytes];
};
struct ring {
  line lines[kLineDepth];
  slot slots[kDepth];
  big_slot bigs[kBigDepth];  // (pages touched only when used: see create())
};
struct rank_block {
  counter done;  // the last op this rank completed
  ring out;      // written by this rank
  ring in;       // written by the root of a scatter for this rank
  // from[i]: rank i's block for this rank in an alltoall of more than
  // kSlotBytes per peer (pages touched only when used).
  big_slot from[kMaxProcs];
};
// One slot of a ring for an op of `bytes` bytes per block.
struct cell {
  std::atomic<std::uint64_t>& seq;
  std::byte* data;
};
cell cell_of(ring& r, std::uint64_t op, std::size_t bytes) {
  if (bytes <= kLineBytes) {
    line& l = r.lines[op % kLineDepth];
    return {l.seq, l.data};
  }
  if (bytes <= kSlotBytes) {
    slot& s = r.slots[op % kDepth];
    return {s.seq, s.data};
  }
  big_slot& b = r.bigs[op % kBigDepth];
  return {b.seq, b.data};
}
int depth_for(std::size_t bytes) {
  return bytes <= kLineBytes ? kLineDepth : bytes <= kSlotBytes ? kDepth : kBigDepth;
}
struct alignas(64) header {
  std::uint64_t magic;  // kSweepMagic, written last by the creator
  std::uint64_t layout;
  std::uint32_t nprocs;
};
static_assert(sizeof(header) == 64);

std::size_t segment_bytes(int n) { return sizeof(header) + static_cast<std::size_t>(n) * sizeof(rank_block); }

}  // namespace

class area {
 public:
  area(void* base, std::size_t bytes, int n, int rank, std::vector<int> world, bool cma)
      : _base(base), _bytes(bytes), _n(n), _rank(rank), _cma(cma), _world(std::move(world)) {
    _blocks = reinterpret_cast<rank_block*>(static_cast<std::byte*>(base) + sizeof(header));
  }
  ~area() { ::munmap(_base, _bytes); }
  area(const area&) = delete;
  area& operator=(const area&) = delete;

  int size() const { return _n; }
  int rank() const { return _rank; }
  bool cma() const { return _cma; }
  rank_block& of(int r) { return _blocks[r]; }
  std::uint64_t next_op() { return ++_op; }
  // Takes k more op numbers (an op that uses k + 1 slots); the last one.
  std::uint64_t reserve(std::uint64_t k) { return _op += k; }

  // Waits until ready(); -1, or a member found dead (whose progress the
  // wait needs: `needs(r)`).
  template <class Ready, class Needs>
  int wait(Ready&& ready, Needs&& needs) {
    if (ready()) return -1;
    nmad::session& s = *st().session;
    // A short spin first: with a core per rank the data is usually a few
    // hundred nanoseconds away. Not on a contended machine, where the rank
    // that writes it may be waiting for this CPU (64 pauses are ~3 us).
    const int spins = s.contended() ? 0 : 64;
    for (int spin = 0;; ++spin) {
      if (spin < spins) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (ready()) return -1;
        continue;
      }
      s.progress();  // other traffic; the polling discipline (yields when contended)
      if (_nopen.load(std::memory_order_relaxed) != 0) poll_open();
      if (ready()) return -1;
      if ((spin & 7) == 0)
        for (int r = 0; r < _n; ++r)
          if (r != _rank && needs(r) && !s.peer_alive(_world[static_cast<std::size_t>(r)])) return ready() ? -1 : r;
    }
  }
  // Before writing a slot for op (bytes per block): every rank finished
  // op - depth, the last op that may have used it.
  int writable(std::uint64_t op, std::size_t bytes) {
    const auto depth = static_cast<std::uint64_t>(depth_for(bytes));
    if (op <= depth) return -1;
    return all_done(op - depth);
  }
  // This rank finished op: its "done" counter moves there, or, while
  // non-blocking allreduces are open (iallreduce), only to just below the
  // oldest of them (their slots are still to be read here).
  void finish(std::uint64_t op) {
    if (_nopen.load(std::memory_order_acquire) == 0) {
      _finished = op;
      _blocks[_rank].done.v.store(op, std::memory_order_release);
      return;
    }
    std::lock_guard g(_nbmu);
    finish_locked(op);
  }
  // Before writing the pair slots (rank_block::from) for op: every rank
  // finished the last op that used them (they have depth 1).
  int pairs_writable(std::uint64_t op) {
    const std::uint64_t need = _last_pairs;
    _last_pairs = op;
    return all_done(need);
  }
  // Waits until every rank finished op `need` (its "done" counter): -1, or
  // a member found dead that had not.
  int all_done(std::uint64_t need) {
    if (_min_done >= need) return -1;
    auto lowest = [&] {
      std::uint64_t m = ~std::uint64_t{0};
      for (int r = 0; r < _n; ++r) m = std::min(m, _blocks[r].done.v.load(std::memory_order_acquire));
      return m;
    };
    return wait([&] { return (_min_done = lowest()) >= need; },
                [&](int r) { return _blocks[r].done.v.load(std::memory_order_relaxed) < need; });
  }
  // Non-blocking allreduce (see shm.hpp). Under _nbmu.
  void finish_locked(std::uint64_t op) {
    if (op > _finished) _finished = op;
    std::uint64_t d = _finished;
    if (!_open.empty()) d = std::min(d, _open.front()->op - 1);
    auto& done = _blocks[_rank].done.v;
    std::uint64_t cur = done.load(std::memory_order_relaxed);
    while (d > cur && !done.compare_exchange_weak(cur, d, std::memory_order_release)) {
    }
  }
  void open_op(iallreduce& x) {
    std::lock_guard g(_nbmu);
    x.op = next_op();
    _open.push_back(&x);
    _nopen.fetch_add(1, std::memory_order_release);
    poll_locked(x);  // published now unless a whole ring of ops is behind
  }
  // Advances x and every older open op (their order is the slots' order):
  // -2 pending, -1 done, or a member found dead.
  int test(iallreduce& x) {
    std::unique_lock g(_nbmu, std::try_to_lock);
    if (!g.owns_lock()) return -2;  // another thread polls this area
    if (x.phase < 2) {
      ++x.polls;
      while (!_open.empty() && _open.front() != &x && poll_locked(*_open.front())) {
      }
      poll_locked(x);
    }
    return x.phase == 2 ? -1 : x.phase == 3 ? x.dead : -2;
  }
  // One look at x: publishes its operand once its slot is free, reduces
  // once every operand is there. True once x is closed (done or failed).
  bool poll_locked(iallreduce& x) {
    const bool look_alive = (x.polls & 7) == 7;
    if (x.phase == 0) {
      const auto depth = static_cast<std::uint64_t>(depth_for(x.bytes));
      if (x.op > depth) {
        const std::uint64_t need = x.op - depth;
        std::uint64_t m = ~std::uint64_t{0};
        int late = -1;
        for (int r = 0; r < _n; ++r) {
          const std::uint64_t d = _blocks[r].done.v.load(std::memory_order_acquire);
          if (d < need && late < 0) late = r;
          m = std::min(m, d);
        }
        if (m < need) {
          if (look_alive && late >= 0 && late != _rank && !alive(late)) return close_op(x, late);
          return false;
        }
      }
      const cell own = cell_of(_blocks[_rank].out, x.op, x.bytes);
      std::memcpy(own.data, x.mine, x.bytes);
      own.seq.store(x.op, std::memory_order_release);
      x.phase = 1;
    }
    if (x.phase != 1) return true;
    for (int r = 0; r < _n; ++r) {
      if (r == _rank || cell_of(_blocks[r].out, x.op, x.bytes).seq.load(std::memory_order_acquire) >= x.op) continue;
      if (look_alive && !alive(r)) return close_op(x, r);
      return false;
    }
    auto* acc = static_cast<std::byte*>(x.result);
    std::memcpy(acc, cell_of(_blocks[_n - 1].out, x.op, x.bytes).data, x.bytes);
    for (int r = _n - 2; r >= 0; --r) x.red->apply(cell_of(_blocks[r].out, x.op, x.bytes).data, acc, x.count);
    return close_op(x, -1);
  }
  // x's owner goes away while x is open (MPI_Finalize): no longer read.
  void drop(iallreduce& x) {
    std::lock_guard g(_nbmu);
    if (x.phase < 2) close_op(x, _rank);
  }
  // From a blocking collective's wait: the open ones may be what another
  // rank waits for (its writer needs this rank's "done" counter to move).
  void poll_open() {
    std::unique_lock g(_nbmu, std::try_to_lock);
    if (!g.owns_lock()) return;
    while (!_open.empty() && poll_locked(*_open.front())) {
    }
  }
  bool close_op(iallreduce& x, int dead) {
    x.phase = dead >= 0 ? 3 : 2;
    x.dead = dead;
    std::erase(_open, &x);
    _nopen.fetch_sub(1, std::memory_order_release);
    finish_locked(x.op);
    return true;
  }

  // Whether member r's process is alive (as the engine knows it).
  bool alive(int r) const { return st().session->peer_alive(_world[static_cast<std::size_t>(r)]); }
  // Waits until member `from` has published op in c: -1, or `from` found dead.
  int await(const cell& c, std::uint64_t op, int from) {
    return wait([&] { return c.seq.load(std::memory_order_acquire) >= op; }, [&](int x) { return x == from; });
  }

 private:
  void* _base;
  std::size_t _bytes;
  int _n, _rank;
  bool _cma;                // the ranks may read one another's memory
  std::vector<int> _world;  // comm rank -> session rank
  rank_block* _blocks;
  std::uint64_t _op = 0;
  std::uint64_t _min_done = 0;
  std::uint64_t _last_pairs = 0;  // the last op that wrote pair slots
  // Non-blocking allreduces not closed yet, oldest first (_nbmu), their
  // count (read without the lock by finish()), the last op finished here.
  std::mutex _nbmu;
  std::vector<iallreduce*> _open;
  std::atomic<int> _nopen{0};
  std::uint64_t _finished = 0;
};

namespace {

bool knob_on() {
  static const bool on = [] {
    try {
      return nmad::config::word("NMAD_COLL_SHM") != "off";
    } catch (const std::exception&) {
      return false;
    }
  }();
  return on;
}

// Whether c may have an area: the same answer on every rank of c.
bool eligible(const comm_obj& c) {
  if (c.inter || c.size() < 2 || c.size() > kMaxProcs || !knob_on()) return false;
  const nmad::session* s = st().session.get();
  if (!s || s->driver_name().find("shm") == std::string::npos) return false;
  return comm_on_one_host(c);
}

std::string new_name() {
  static unsigned counter = 0;  // (incremented under unique_name's lock)
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "nmad-%08x-", static_cast<unsigned>(::geteuid()) * 2654435761u);
  return shm::unique_name(prefix, "coll", counter);
}

void* map_fd(int fd, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Rank 0: the segment, initialised, its creator's shared lock held on fd.
void* create(const std::string& name, int n, int& fd) {
  std::string why;  // (a rank that cannot create the area says no; the engine path serves)
  const shm::locked_segment seg = shm::create_locked(name, segment_bytes(n), false, why);
  fd = seg.lock_fd;
  void* p = seg.base;
  if (!p) return nullptr;
  auto* h = ::new (p) header{};
  auto* blocks = reinterpret_cast<rank_block*>(static_cast<std::byte*>(p) + sizeof(header));
  // Default-initialised, not value-initialised: the sequence words and
  // counters get their zeros, the payload bytes are left alone, so a
  // segment's pages (fresh from ftruncate: zeros already) are touched only
  // where a ring is used (the large slots are most of the segment).
  for (int r = 0; r < n; ++r) ::new (&blocks[r]) rank_block;
  h->layout = kLayout;
  h->nprocs = static_cast<std::uint32_t>(n);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = shm::kSegmentMagic;
  return p;
}

void* attach(const std::string& name, int n) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  const std::size_t bytes = segment_bytes(n);
  struct stat sb {};
  void* p = nullptr;
  if (::fstat(fd, &sb) == 0 && sb.st_uid == ::geteuid() && static_cast<std::size_t>(sb.st_size) == bytes)
    p = map_fd(fd, bytes);
  ::close(fd);
  if (!p) return nullptr;
  const auto* h = static_cast<const header*>(p);
  if (h->magic != shm::kSegmentMagic || h->layout != kLayout || h->nprocs != static_cast<std::uint32_t>(n)) {
    ::munmap(p, bytes);
    return nullptr;
  }
  return p;
}

// What rank 0 sends at set-up: the segment's name (empty: none), and its
// pid and the address of kProbe, for the others' test of single copy.
struct setup_message {
  char name[80];
  std::int64_t pid;
  std::uint64_t probe;
};
constexpr std::uint64_t kProbe = 0x53494e474c45434fULL;  // "SINGLECO"
constexpr std::byte kMapped{1}, kCanRead{2};

bool cma_wanted() {
  static const bool on = [] {
    try {
      return nmad::config::flag("NMAD_SHM_CMA");
    } catch (const std::exception&) {
      return false;
    }
  }();
  return on;
}

// Whether this process can read `bytes` at `remote` in process `pid` into
// `local`, all of it: 0 yes; else the errno of the failure (0 < n < bytes
// read is retried from where it stopped).
int read_remote(pid_t pid, std::byte* local, std::uintptr_t remote, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    iovec l{local + done, bytes - done};
    iovec r{reinterpret_cast<void*>(remote + done), bytes - done};
    const ssize_t got = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EIO;
    done += static_cast<std::size_t>(got);
  }
  return 0;
}

// The set-up's test of single copy: kProbe read out of rank 0's memory.
bool can_read(pid_t pid, std::uint64_t probe) {
  if (!cma_wanted() || pid <= 0 || probe == 0) return false;
  std::uint64_t word = 0;
  return read_remote(pid, reinterpret_cast<std::byte*>(&word), static_cast<std::uintptr_t>(probe), sizeof word) == 0 &&
         word == kProbe;
}

}  // namespace

area* area_of(comm_obj& c) {
  const int state = c.shm_state.load(std::memory_order_acquire);
  if (state == 1) return c.shm_area.get();
  if (state == 2) return nullptr;
  if (!eligible(c)) {
    c.shm_state.store(2, std::memory_order_release);
    return nullptr;
  }
  // Set-up, the same steps on every rank: rank 0 sends the name, each
  // rank answers whether it mapped the segment, rank 0 sends the verdict
  // (and unlinks the name: from then on only the mappings hold it).
  // Each rank's answer carries two bits: it mapped the segment (kMapped),
  // and it could read a word of rank 0's memory (kCanRead; rank 0: of its
  // own), which decides single copy for everyone.
  const int n = c.size();
  const bool root = c.rank == 0;
  setup_message msg{};
  void* base = nullptr;
  int fd = -1;
  std::string nm;
  if (root) {
    nm = new_name();
    base = create(nm, n, fd);
    std::snprintf(msg.name, sizeof msg.name, "%s", base ? nm.c_str() : "");
    msg.pid = static_cast<std::int64_t>(::getpid());
    msg.probe = reinterpret_cast<std::uintptr_t>(&kProbe);
  }
  std::string why;
  auto step = [&](bool root_sends, std::byte* p, std::size_t bytes, std::byte* all) {
    // One exchange with rank 0: it sends p to everyone, or collects every
    // rank's p into all (bytes each).
    return coll_direct_step(c, root_sends, p, bytes, all, why);
  };
  std::vector<std::byte> oks(static_cast<std::size_t>(n));
  int failed = step(true, reinterpret_cast<std::byte*>(&msg), sizeof msg, nullptr);
  std::byte ok{0};
  if (failed < 0) {
    msg.name[sizeof msg.name - 1] = '\0';
    if (!root && msg.name[0]) base = attach(msg.name, n);
    if (base) ok |= kMapped;
    if (can_read(static_cast<pid_t>(msg.pid), msg.probe)) ok |= kCanRead;
    failed = step(false, &ok, 1, oks.data());
  }
  std::byte verdict{0};
  if (failed < 0) {
    if (root) {
      oks[0] = ok;
      verdict = kMapped | kCanRead;
      for (std::byte b : oks) verdict &= b;
    }
    failed = step(true, &verdict, 1, nullptr);
  }
  if (root && fd >= 0) {
    ::shm_unlink(nm.c_str());
    ::close(fd);  // (the lock goes with it; the name is gone already)
  }
  if (failed >= 0 || (verdict & kMapped) == std::byte{0}) {
    if (base) ::munmap(base, segment_bytes(n));
    if (failed >= 0) throw std::runtime_error(why);
    c.shm_state.store(2, std::memory_order_release);
    return nullptr;
  }
  std::vector<int> world = c.world_of;
  c.shm_area = std::make_shared<area>(base, segment_bytes(n), n, c.rank, std::move(world),
                                      (verdict & kCanRead) != std::byte{0});
  c.shm_state.store(1, std::memory_order_release);
  return c.shm_area.get();
}

void release(comm_obj& c) {
  c.shm_area.reset();
  c.shm_state.store(2, std::memory_order_release);
}

int barrier(area& a) {
  const std::uint64_t op = a.next_op();
  if (const int d = a.writable(op, 0); d >= 0) return d;
  cell_of(a.of(a.rank()).out, op, 0).seq.store(op, std::memory_order_release);
  for (int r = 0; r < a.size(); ++r) {
    if (r == a.rank()) continue;
    const int d = a.await(cell_of(a.of(r).out, op, 0), op, r);
    if (d >= 0) return d;
  }
  a.finish(op);
  return -1;
}

int ibarrier_start(area& a, std::uint64_t& op) {
  op = a.next_op();
  if (const int d = a.writable(op, 0); d >= 0) return d;
  cell_of(a.of(a.rank()).out, op, 0).seq.store(op, std::memory_order_release);
  a.finish(op);  // nothing of op is read here any more but sequence words (see shm.hpp)
  return -1;
}

int ibarrier_test(area& a, std::uint64_t op, bool check_alive) {
  int missing = -1;
  for (int r = 0; r < a.size() && missing < 0; ++r)
    if (r != a.rank() && cell_of(a.of(r).out, op, 0).seq.load(std::memory_order_acquire) < op) missing = r;
  if (missing < 0) return -1;
  if (check_alive)
    for (int r = missing; r < a.size(); ++r)
      if (r != a.rank() && cell_of(a.of(r).out, op, 0).seq.load(std::memory_order_acquire) < op &&
          !a.alive(r))
        return r;
  return -2;
}

void iallreduce_start(area& a, iallreduce& x) { a.open_op(x); }

void iallreduce_drop(area& a, iallreduce& x) { a.drop(x); }

int iallreduce_test(area& a, iallreduce& x) { return a.test(x); }

int bcast(area& a, int root, void* buf, std::size_t bytes) {
  const std::uint64_t op = a.next_op();
  const cell c = cell_of(a.of(root).out, op, bytes);
  if (a.rank() == root) {
    if (const int d = a.writable(op, bytes); d >= 0) return d;
    std::memcpy(c.data, buf, bytes);
    c.seq.store(op, std::memory_order_release);
  } else {
    const int d = a.await(c, op, root);
    if (d >= 0) return d;
    std::memcpy(buf, c.data, bytes);
  }
  a.finish(op);
  return -1;
}

int gather(area& a, int root, const void* mine, void* all, std::size_t block) {
  const std::uint64_t op = a.next_op();
  if (a.rank() != root) {
    if (const int d = a.writable(op, block); d >= 0) return d;
    const cell c = cell_of(a.of(a.rank()).out, op, block);
    std::memcpy(c.data, mine, block);
    c.seq.store(op, std::memory_order_release);
  } else {
    auto* out = static_cast<std::byte*>(all);
    if (mine) std::memcpy(out + static_cast<std::size_t>(root) * block, mine, block);
    for (int r = 0; r < a.size(); ++r) {
      if (r == root) continue;
      const cell c = cell_of(a.of(r).out, op, block);
      const int d = a.await(c, op, r);
      if (d >= 0) return d;
      std::memcpy(out + static_cast<std::size_t>(r) * block, c.data, block);
    }
  }
  a.finish(op);
  return -1;
}

int scatter(area& a, int root, const void* all, void* mine, std::size_t block) {
  const std::uint64_t op = a.next_op();
  if (a.rank() == root) {
    if (const int d = a.writable(op, block); d >= 0) return d;
    const auto* in = static_cast<const std::byte*>(all);
    for (int r = 0; r < a.size(); ++r) {
      if (r == root) continue;
      const cell c = cell_of(a.of(r).in, op, block);
      std::memcpy(c.data, in + static_cast<std::size_t>(r) * block, block);
      c.seq.store(op, std::memory_order_release);
    }
    if (mine) std::memcpy(mine, in + static_cast<std::size_t>(root) * block, block);
  } else {
    const cell c = cell_of(a.of(a.rank()).in, op, block);
    const int d = a.await(c, op, root);
    if (d >= 0) return d;
    std::memcpy(mine, c.data, block);
  }
  a.finish(op);
  return -1;
}

int allreduce(area& a, const void* mine, void* result, std::size_t bytes, std::size_t count,
              nmad::coll::reducer& red) {
  const std::uint64_t op = a.next_op();
  if (const int d = a.writable(op, bytes); d >= 0) return d;
  const cell own = cell_of(a.of(a.rank()).out, op, bytes);
  std::memcpy(own.data, mine, bytes);
  own.seq.store(op, std::memory_order_release);
  for (int r = 0; r < a.size(); ++r) {
    if (r == a.rank()) continue;
    const cell c = cell_of(a.of(r).out, op, bytes);
    const int d = a.await(c, op, r);
    if (d >= 0) return d;
  }
  // acc = a[n-1]; then acc = a[r] op acc for r = n-2 .. 0.
  auto* acc = static_cast<std::byte*>(result);
  std::memcpy(acc, cell_of(a.of(a.size() - 1).out, op, bytes).data, bytes);
  for (int r = a.size() - 2; r >= 0; --r) red.apply(cell_of(a.of(r).out, op, bytes).data, acc, count);
  a.finish(op);
  return -1;
}

int reduce(area& a, int root, const void* mine, void* result, std::size_t bytes, std::size_t count,
           nmad::coll::reducer& red) {
  const std::uint64_t op = a.next_op();
  if (const int d = a.writable(op, bytes); d >= 0) return d;
  const cell own = cell_of(a.of(a.rank()).out, op, bytes);
  std::memcpy(own.data, mine, bytes);
  own.seq.store(op, std::memory_order_release);
  if (a.rank() == root) {
    for (int r = 0; r < a.size(); ++r) {
      if (r == root) continue;
      if (const int d = a.await(cell_of(a.of(r).out, op, bytes), op, r); d >= 0) return d;
    }
    // The canonical order, as allreduce: a0 op (a1 op (... op an-1)).
    auto* acc = static_cast<std::byte*>(result);
    std::memcpy(acc, cell_of(a.of(a.size() - 1).out, op, bytes).data, bytes);
    for (int r = a.size() - 2; r >= 0; --r) red.apply(cell_of(a.of(r).out, op, bytes).data, acc, count);
  }
  a.finish(op);  // (a non-root is done once its operand is published)
  return -1;
}

int allgather(area& a, const void* mine, void* all, std::size_t block) {
  const std::uint64_t op = a.next_op();
  if (const int d = a.writable(op, block); d >= 0) return d;
  auto* out = static_cast<std::byte*>(all);
  const std::size_t at = static_cast<std::size_t>(a.rank()) * block;
  const void* own_block = mine ? mine : out + at;
  const cell own = cell_of(a.of(a.rank()).out, op, block);
  std::memcpy(own.data, own_block, block);
  own.seq.store(op, std::memory_order_release);
  if (mine) std::memcpy(out + at, mine, block);
  for (int k = 1; k < a.size(); ++k) {
    const int r = (a.rank() + k) % a.size();
    const cell c = cell_of(a.of(r).out, op, block);
    if (const int d = a.await(c, op, r); d >= 0) return d;
    std::memcpy(out + static_cast<std::size_t>(r) * block, c.data, block);
  }
  a.finish(op);
  return -1;
}

namespace {
// Alltoall whose row (size() blocks) does not fit a slot: block j of this
// rank goes to slot (first + j) of its ring, one slot per peer. The op
// takes kDepth op numbers, first .. last, and publishes every block under
// `last`: before writing, every rank finished first - 1 (so nothing still
// reads the ring), and an op after it, writing slot (last + 1) % kDepth,
// waits for every rank's done >= last + 1 - kDepth = first, which only a
// rank that finished this op has (done goes from below first to last).
int alltoall_wide(area& a, const void* in, void* out, std::size_t block) {
  const std::uint64_t first = a.next_op();
  const std::uint64_t last = a.reserve(kDepth - 1);
  if (const int d = a.writable(last, kSlotBytes); d >= 0) return d;
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  const int me = a.rank();
  const auto slot_of = [&](int owner, int j) -> slot& {
    return a.of(owner).out.slots[(first + static_cast<std::uint64_t>(j)) % kDepth];
  };
  for (int j = 0; j < a.size(); ++j) {
    if (j == me) continue;
    slot& s = slot_of(me, j);
    std::memcpy(s.data, src + static_cast<std::size_t>(j) * block, block);
    s.seq.store(last, std::memory_order_release);
  }
  // (In place, src == dst: this rank's own block is already where it goes,
  // and the others' are overwritten only after this rank's are published.)
  if (src != dst)
    std::memcpy(dst + static_cast<std::size_t>(me) * block, src + static_cast<std::size_t>(me) * block, block);
  for (int r = 0; r < a.size(); ++r) {
    if (r == me) continue;
    slot& s = slot_of(r, me);
    const int d = a.await(cell{s.seq, s.data}, last, r);
    if (d >= 0) return d;
    std::memcpy(dst + static_cast<std::size_t>(r) * block, s.data, block);
  }
  a.finish(last);
  return -1;
}
}  // namespace

bool single_copy(const area& a) { return a.cma(); }

namespace {
// What a rank publishes for a single-copy op: where its blocks are.
struct published_buffer {
  std::uint64_t addr;
  std::int64_t pid;
};
static_assert(sizeof(published_buffer) <= kLineBytes);

// This rank's buffer p, published under op (its line slot).
void publish_buffer(area& a, std::uint64_t op, const void* p) {
  const cell own = cell_of(a.of(a.rank()).out, op, 0);
  const published_buffer b{reinterpret_cast<std::uintptr_t>(p), static_cast<std::int64_t>(::getpid())};
  std::memcpy(own.data, &b, sizeof b);
  own.seq.store(op, std::memory_order_release);
}
// This rank has reached op (its line slot, no payload).
void publish_mark(area& a, std::uint64_t op) {
  cell_of(a.of(a.rank()).out, op, 0).seq.store(op, std::memory_order_release);
}
// Waits for rank r's buffer published under op and reads `bytes` at
// `offset` in it into `into`. Returns r if r was found dead while waiting,
// else -1; a read that failed (r gone since, or its memory unreadable)
// sets `unreadable` to r if it is not set yet, and the caller goes on (its
// marks must still be published: the others wait for them).
int read_published(area& a, int r, std::uint64_t op, std::size_t offset, void* into, std::size_t bytes,
                   int& unreadable) {
  const cell c = cell_of(a.of(r).out, op, 0);
  if (const int d = a.await(c, op, r); d >= 0) return d;
  published_buffer theirs{};
  std::memcpy(&theirs, c.data, sizeof theirs);
  if (read_remote(static_cast<pid_t>(theirs.pid), static_cast<std::byte*>(into),
                  static_cast<std::uintptr_t>(theirs.addr) + offset, bytes) != 0 &&
      unreadable < 0)
    unreadable = r;
  return -1;
}
// Waits until every rank but `except` (and this one) has published mark op
// or is found dead: -1, or the first rank found dead. (It does not stop at
// a dead rank: the live ones may still be reading this rank's buffer.)
int await_marks(area& a, std::uint64_t op, int except) {
  int dead = -1;
  for (int r = 0; r < a.size(); ++r) {
    if (r == a.rank() || r == except) continue;
    if (const int d = a.await(cell_of(a.of(r).out, op, 0), op, r); d >= 0 && dead < 0) dead = d;
  }
  return dead;
}
}  // namespace

// Every single-copy op takes two op numbers, both line slots: `op` (the
// buffers read from are published) and `end` (the reads are done, so
// those buffers may be reused), written once every rank finished
// end - kLineDepth.
int alltoall_cma(area& a, const void* in, void* out, std::size_t block) {
  if (!a.cma()) return kDeclined;
  const int n = a.size(), me = a.rank();
  const std::size_t row = block * static_cast<std::size_t>(n);
  std::vector<std::byte> aside;
  if (in == out) {  // in place: the others read the blocks this rank overwrites
    aside.assign(static_cast<const std::byte*>(in), static_cast<const std::byte*>(in) + row);
    in = aside.data();
  }
  const std::uint64_t op = a.next_op();
  const std::uint64_t end = a.next_op();
  if (const int d = a.writable(end, 0); d >= 0) return d;
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  publish_buffer(a, op, src);
  std::memcpy(dst + static_cast<std::size_t>(me) * block, src + static_cast<std::size_t>(me) * block, block);
  // Peers in turn from the next rank up, so that the ranks do not all
  // read the same one first.
  // A peer found dead is skipped: the others still read this rank's blocks
  // and wait for its mark.
  int failed = -1;
  for (int k = 1; k < n; ++k) {
    const int r = (me + k) % n;
    if (const int d = read_published(a, r, op, static_cast<std::size_t>(me) * block,
                                     dst + static_cast<std::size_t>(r) * block, block, failed);
        d >= 0 && failed < 0)
      failed = d;
  }
  publish_mark(a, end);  // (even after a failure: the others wait for it)
  if (const int d = await_marks(a, end, -1); d >= 0 && failed < 0) failed = d;
  a.finish(end);
  return failed;
}

namespace {
// The root publishes src; every other rank reads n bytes of it, at
// offset_of(its rank), into `into` and marks the end; the root returns
// once every mark is there.
template <class Offset>
int root_publishes(area& a, int root, const void* src, Offset offset_of, void* into, std::size_t n) {
  const std::uint64_t op = a.next_op();
  const std::uint64_t end = a.next_op();
  if (const int d = a.writable(end, 0); d >= 0) return d;
  int unreadable = -1;
  if (a.rank() == root) {
    publish_buffer(a, op, src);
    unreadable = await_marks(a, end, root);
  } else {
    // (A dead root: nobody waits for this rank's mark.)
    if (const int d = read_published(a, root, op, offset_of(a.rank()), into, n, unreadable); d >= 0) return d;
    publish_mark(a, end);
  }
  a.finish(end);
  return unreadable;
}
}  // namespace

int bcast_cma(area& a, int root, void* buf, std::size_t bytes) {
  if (!a.cma()) return kDeclined;
  return root_publishes(a, root, buf, [](int) { return std::size_t{0}; }, buf, bytes);
}

int scatter_cma(area& a, int root, const void* all, void* mine, std::size_t block) {
  if (!a.cma()) return kDeclined;
  const auto at = [block](int r) { return static_cast<std::size_t>(r) * block; };
  if (a.rank() == root && mine) std::memcpy(mine, static_cast<const std::byte*>(all) + at(root), block);
  return root_publishes(a, root, all, at, mine, block);
}

// Every other rank publishes its block; the root reads them all and marks
// the end, which they wait for (their blocks are read until then).
int gather_cma(area& a, int root, const void* mine, void* all, std::size_t block) {
  if (!a.cma()) return kDeclined;
  const std::uint64_t op = a.next_op();
  const std::uint64_t end = a.next_op();
  if (const int d = a.writable(end, 0); d >= 0) return d;
  int unreadable = -1;
  if (a.rank() != root) {
    publish_buffer(a, op, mine);
    if (const int d = a.await(cell_of(a.of(root).out, end, 0), end, root); d >= 0) return d;
  } else {
    auto* out = static_cast<std::byte*>(all);
    if (mine) std::memcpy(out + static_cast<std::size_t>(root) * block, mine, block);
    // A rank found dead is skipped: the others wait for the root's mark.
    for (int k = 1; k < a.size(); ++k) {
      const int r = (root + k) % a.size();
      if (const int d = read_published(a, r, op, 0, out + static_cast<std::size_t>(r) * block, block, unreadable);
          d >= 0 && unreadable < 0)
        unreadable = d;
    }
    publish_mark(a, end);
  }
  a.finish(end);
  return unreadable;
}

namespace {
// Alltoall of more than kSlotBytes per peer (up to kBigBytes): rank i
// writes its block for j into j's pair slot from[i] and publishes it; j
// copies each out as soon as it is there, in whatever order they come.
// One op number; the pair slots are reused once every rank finished the
// op that last wrote them (pairs_writable).
int alltoall_pairs(area& a, const void* in, void* out, std::size_t block) {
  const std::uint64_t op = a.next_op();
  const int n = a.size(), me = a.rank();
  if (const int d = a.pairs_writable(op); d >= 0) return d;
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  for (int k = 1; k < n; ++k) {
    const int j = (me + k) % n;
    big_slot& s = a.of(j).from[me];
    std::memcpy(s.data, src + static_cast<std::size_t>(j) * block, block);
    s.seq.store(op, std::memory_order_release);
  }
  // (In place, src == dst: the others' blocks are written below only once
  // this rank's own are published.)
  if (src != dst)
    std::memcpy(dst + static_cast<std::size_t>(me) * block, src + static_cast<std::size_t>(me) * block, block);
  std::uint32_t pending = 0;  // bit i: rank i's block still to copy
  for (int i = 0; i < n; ++i)
    if (i != me) pending |= 1u << i;
  auto copy_ready = [&] {
    for (int i = 0; i < n; ++i) {
      if (!(pending & (1u << i))) continue;
      big_slot& s = a.of(me).from[i];
      if (s.seq.load(std::memory_order_acquire) < op) continue;
      std::memcpy(dst + static_cast<std::size_t>(i) * block, s.data, block);
      pending &= ~(1u << i);
    }
    return pending == 0;
  };
  if (const int d = a.wait(copy_ready, [&](int i) { return (pending & (1u << i)) != 0; }); d >= 0) return d;
  a.finish(op);
  return -1;
}
}  // namespace

// ---- v-collectives: blocks of any size, each copied through the slot
// its size selects (as cell_of: a line, a 1 KiB slot, a 64 KiB slot) or,
// above kBigBytes, read in place by single copy (its address in a line
// slot; its owner waits for its readers' marks). Both sides of a block
// know its size. Two op numbers as the single-copy ops (`op`: the blocks,
// `end`: the reads done). Only on an area with single copy: else a block
// above kBigBytes has no way through, and only the root of a gatherv or
// scatterv knows every block's size, so the others could not tell.

namespace {
// Puts `bytes` of p in ring r for op: copied, or p's address.
void put_block(ring& r, std::uint64_t op, const void* p, std::size_t bytes) {
  if (bytes <= kBigBytes) {
    const cell c = cell_of(r, op, bytes);
    if (bytes) std::memcpy(c.data, p, bytes);
    c.seq.store(op, std::memory_order_release);
    return;
  }
  const cell c = cell_of(r, op, 0);
  const published_buffer b{reinterpret_cast<std::uintptr_t>(p), static_cast<std::int64_t>(::getpid())};
  std::memcpy(c.data, &b, sizeof b);
  c.seq.store(op, std::memory_order_release);
}
// Takes `bytes` from ring r (published under op by rank `from`) into p:
// -1, or `from` if found dead while waiting; a failed read sets unreadable.
int take_block(area& a, ring& r, std::uint64_t op, int from, void* p, std::size_t bytes, int& unreadable) {
  const cell c = cell_of(r, op, bytes <= kBigBytes ? bytes : 0);
  if (const int d = a.await(c, op, from); d >= 0) return d;
  if (bytes <= kBigBytes) {
    if (bytes) std::memcpy(p, c.data, bytes);
    return -1;
  }
  published_buffer theirs{};
  std::memcpy(&theirs, c.data, sizeof theirs);
  if (read_remote(static_cast<pid_t>(theirs.pid), static_cast<std::byte*>(p),
                  static_cast<std::uintptr_t>(theirs.addr), bytes) != 0 &&
      unreadable < 0)
    unreadable = from;
  return -1;
}
// The largest block (at most kBigBytes) this rank copies into slots, for
// the ring-depth check (a line is always written: the end mark).
std::size_t copied(std::size_t bytes) { return bytes <= kBigBytes ? bytes : 0; }
}  // namespace

int gatherv(area& a, int root, const void* mine, std::size_t send_bytes, void* all,
            std::span<const std::size_t> bytes, std::span<const std::size_t> displs) {
  if (!a.cma()) return kDeclined;
  const std::uint64_t op = a.next_op();
  const std::uint64_t end = a.next_op();
  const bool is_root = a.rank() == root;
  if (const int d = a.writable(end, is_root ? 0 : copied(send_bytes)); d >= 0) return d;
  int failed = -1;
  if (!is_root) {
    put_block(a.of(a.rank()).out, op, mine, send_bytes);
    // Read in place by the root: wait for its mark.
    if (send_bytes > kBigBytes)
      if (const int d = a.await(cell_of(a.of(root).out, end, 0), end, root); d >= 0) return d;
  } else {
    auto* out = static_cast<std::byte*>(all);
    if (mine && send_bytes) std::memcpy(out + displs[static_cast<std::size_t>(root)], mine, send_bytes);
    for (int k = 1; k < a.size(); ++k) {
      const int r = (root + k) % a.size();
      const auto i = static_cast<std::size_t>(r);
      if (bytes[i] == 0) continue;
      if (const int d = take_block(a, a.of(r).out, op, r, out + displs[i], bytes[i], failed); d >= 0 && failed < 0)
        failed = d;  // (skipped: the others wait for the root's mark)
    }
    publish_mark(a, end);
  }
  a.finish(end);
  return failed;
}

int scatterv(area& a, int root, const void* all, std::span<const std::size_t> bytes,
             std::span<const std::size_t> displs, void* mine, std::size_t recv_bytes) {
  if (!a.cma()) return kDeclined;
  const std::uint64_t op = a.next_op();
  const std::uint64_t end = a.next_op();
  const bool is_root = a.rank() == root;
  std::size_t widest = 0;
  if (is_root)
    for (int r = 0; r < a.size(); ++r)
      if (r != root) widest = std::max(widest, copied(bytes[static_cast<std::size_t>(r)]));
  if (const int d = a.writable(end, widest); d >= 0) return d;
  int failed = -1;
  if (is_root) {
    const auto* in = static_cast<const std::byte*>(all);
    for (int r = 0; r < a.size(); ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (r == root || bytes[i] == 0) continue;
      put_block(a.of(r).in, op, in + displs[i], bytes[i]);
    }
    if (mine && recv_bytes) std::memcpy(mine, in + displs[static_cast<std::size_t>(root)], recv_bytes);
    // The readers of blocks read in place mark the end.
    for (int r = 0; r < a.size(); ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (r == root || bytes[i] <= kBigBytes) continue;
      if (const int d = a.await(cell_of(a.of(r).out, end, 0), end, r); d >= 0 && failed < 0) failed = d;
    }
  } else if (recv_bytes) {
    if (const int d = take_block(a, a.of(a.rank()).in, op, root, mine, recv_bytes, failed); d >= 0) return d;
    if (recv_bytes > kBigBytes) publish_mark(a, end);
  }
  a.finish(end);
  return failed;
}

int allgatherv(area& a, const void* mine, std::size_t send_bytes, void* all, std::span<const std::size_t> bytes,
               std::span<const std::size_t> displs) {
  if (!a.cma()) return kDeclined;
  const std::uint64_t op = a.next_op();
  const std::uint64_t end = a.next_op();
  if (const int d = a.writable(end, copied(send_bytes)); d >= 0) return d;
  const int me = a.rank();
  auto* out = static_cast<std::byte*>(all);
  const auto my = static_cast<std::size_t>(me);
  const void* own = mine ? mine : out + displs[my];
  put_block(a.of(me).out, op, own, send_bytes);
  if (mine && send_bytes) std::memcpy(out + displs[my], mine, send_bytes);
  int failed = -1;
  bool read_in_place = false;
  for (int k = 1; k < a.size(); ++k) {
    const int r = (me + k) % a.size();
    const auto i = static_cast<std::size_t>(r);
    if (bytes[i] == 0) continue;
    read_in_place |= bytes[i] > kBigBytes;
    if (const int d = take_block(a, a.of(r).out, op, r, out + displs[i], bytes[i], failed); d >= 0 && failed < 0)
      failed = d;
  }
  if (read_in_place) publish_mark(a, end);
  // Read in place by every other rank: wait for their marks.
  if (send_bytes > kBigBytes)
    if (const int d = await_marks(a, end, -1); d >= 0 && failed < 0) failed = d;
  a.finish(end);
  return failed;
}

int alltoall(area& a, const void* in, void* out, std::size_t block) {
  if (block > kSlotBytes) return alltoall_pairs(a, in, out, block);
  if (block * static_cast<std::size_t>(a.size()) > kSlotBytes) return alltoall_wide(a, in, out, block);
  const std::uint64_t op = a.next_op();
  const std::size_t bytes = block * static_cast<std::size_t>(a.size());
  if (const int d = a.writable(op, bytes); d >= 0) return d;
  const cell own = cell_of(a.of(a.rank()).out, op, bytes);
  std::memcpy(own.data, in, bytes);
  own.seq.store(op, std::memory_order_release);
  auto* dst = static_cast<std::byte*>(out);
  const std::size_t mine = static_cast<std::size_t>(a.rank()) * block;
  for (int r = 0; r < a.size(); ++r) {
    const cell c = cell_of(a.of(r).out, op, bytes);
    if (r != a.rank()) {
      const int d = a.await(c, op, r);
      if (d >= 0) return d;
    }
    std::memcpy(dst + static_cast<std::size_t>(r) * block, c.data + mine, block);
  }
  a.finish(op);
  return -1;
}

}  // namespace nmad::mpi::shmcoll
