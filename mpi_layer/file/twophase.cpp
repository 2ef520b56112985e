// MPI-IO collective data access: two-phase aggregation (as ROMIO's
// "collective buffering", Thakur et al. 1999), as a state machine that the
// MPI layer's progress machinery advances.
//
// The algorithm. Every process describes its access (first and last file
// byte, whether it is one contiguous block) in one allgather. When every
// access is contiguous, or atomic mode is on, or the romio_cb_read/
// romio_cb_write hint says "disable", each process accesses the file on its
// own (a contiguous access gains nothing from aggregation; atomic mode
// locks each access). Otherwise the byte range [min, max) the processes
// touch is cut into cb_nodes contiguous file domains, one per aggregator
// (f.aggregator_order: by the topology, the first process of each NUMA
// node of each host, then the second, ...), and each domain is processed in windows of cb_buffer_size bytes,
// one window per aggregator per round:
//   write: every process sends each aggregator the (offset, length) pieces
//          of its blocks that fall in that aggregator's window and their
//          bytes (an alltoall of the sizes, alltoallv of the lists and of
//          the data); the aggregator fills a buffer covering the pieces
//          (reading it first when the pieces leave holes, so the holes keep
//          the file's bytes) and writes it with one pwrite;
//   read:  the aggregator reads the window's covered range with one pread
//          and sends each process its pieces back.
// All processes run the same number of rounds (computed from the agreed
// range), so the exchange needs no further agreement. A failed pread or
// pwrite on an aggregator does not stop the rounds (the others would wait
// for it): its class is agreed at the end, every process returns it, the
// failing one with its detail.
//
// How it is driven. A collective_job holds the state; advance() never
// blocks: it advances the current communication phase (a coll::executor
// over the file communicator's transport, the schedules of
// coll/algorithms.hpp), and between phases either starts the next one or
// hands the step that touches the file or copies bulk data to the
// background I/O thread (io.cpp's post_io), then returns. So
//   * a blocking collective (MPI_File_write_all...) waits in the session's
//     wait_until on advance(), doing its file steps inline (the caller is
//     the application thread, no lock held);
//   * a non-blocking one (MPI_File_iwrite_all..., the split _begin/_end)
//     is also registered with one session progress task (like the
//     non-blocking collectives' progress_hook; twophase_progress.cpp), so any engine progress —
//     the progress thread (NMAD_PROGRESS) while the application computes,
//     or a wait on any other request — moves it from phase to phase, and
//     its file steps run on the I/O thread. Its MPI request polls advance().
// Phases reuse the sequence number the job took when it started (taken in
// call order, like every collective on the communicator), each phase in
// its own band of local tags (see start()).
// Thread safety: one thread advances a job at a time (a try-lock, as the
// executor's); a file step on the I/O thread owns the fields it writes
// until it publishes io_done (release), which advance() reads (acquire)
// before it looks at them.
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "api/nmad/services/config.hpp"
#include "mpi_layer/coll/algorithms.hpp"
#include "mpi_layer/coll/session_transport.hpp"
#include "mpi_layer/file/file_impl.hpp"

namespace nmad::mpi::io {

namespace {

struct piece {
  std::int64_t off, len;
};

enum cb_mode : long long { cb_disable = 0, cb_auto = 1, cb_enable = 2, cb_atomic = 3 };

cb_mode mode_of(const std::string& hint, bool atomic) {
  if (atomic) return cb_atomic;
  if (hint == "disable") return cb_disable;
  if (hint == "enable") return cb_enable;
  return cb_auto;
}

// A buffer address for the schedule builders: an empty vector's data() may
// be null, which they read as MPI_IN_PLACE.
template <class T>
void* buffer_of(std::vector<T>& v) {
  static std::byte none;
  return v.empty() ? static_cast<void*>(&none) : static_cast<void*>(v.data());
}

// A buffer of the exchange: allocated without zeroing, kept across
// rounds and, through the pool below, across calls. Fresh memory costs a
// page fault per 4 KiB on first touch (here about 0.2 s for 16 MiB), more
// than the exchange and the write of the same bytes.
struct scratch {
  std::unique_ptr<std::byte[]> p;
  std::size_t cap = 0, size = 0;
  std::byte* resize(std::size_t n) {
    if (n > cap) {
      p.reset(new std::byte[n]);
      cap = n;
    }
    size = n;
    return data();
  }
  std::byte* data() {
    static std::byte none;  // never null: the builders read null as MPI_IN_PLACE
    return cap ? p.get() : &none;
  }
};

void* buffer_of(scratch& s) { return s.data(); }

// The buffers of the last collective accesses, for the next ones: at most
// three (one access's), so a process keeps at most 3 x cb_buffer_size.
struct scratch_pool {
  std::mutex mu;
  std::vector<scratch> spare;
};
scratch_pool& pool() {
  static auto* p = new scratch_pool();
  return *p;
}
scratch take_scratch() {
  scratch_pool& p = pool();
  std::lock_guard g(p.mu);
  if (p.spare.empty()) return {};
  scratch s = std::move(p.spare.back());
  p.spare.pop_back();
  return s;
}
void give_scratch(scratch& s) {
  if (s.cap == 0) return;
  scratch_pool& p = pool();
  std::lock_guard g(p.mu);
  if (p.spare.size() < 3) p.spare.push_back(std::move(s));
  s = scratch{};
}

// Writes [p, p + n) pieces of `iov`, which cover the file from `off` with
// no gap, with as few pwritev calls as IOV_MAX allows.
int pwritev_full(int fd, std::vector<iovec>& iov, std::int64_t off, std::string& detail) {
  std::size_t first = 0;
  while (first < iov.size()) {
    const int cnt = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    const ssize_t w = ::pwritev(fd, iov.data() + first, cnt, off);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      detail = "pwritev at offset " + std::to_string(off) + ": " + std::strerror(e);
      return errno_class(e);
    }
    if (w == 0) {
      detail = "pwritev at offset " + std::to_string(off) + " wrote nothing";
      return MPI_ERR_IO;
    }
    off += w;
    std::size_t left = static_cast<std::size_t>(w);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<std::byte*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return MPI_SUCCESS;
}

std::vector<std::size_t> to_sizes(const std::vector<std::int64_t>& v) {
  return std::vector<std::size_t>(v.begin(), v.end());
}

}  // namespace

struct collective_job : std::enable_shared_from_this<collective_job> {
  // ---- what to do ----
  std::shared_ptr<file_obj> file;
  bool write = false;
  user_data u;
  std::int64_t pos = 0;
  view v;
  hints h;
  bool atomic = false;
  bool background = false;        // file steps on the I/O thread (non-blocking forms)
  int check = -1;                 // >= 0: this process's argument check, agreed first
  std::string check_detail;
  const char* fn = "";

  // ---- engine ----
  std::shared_ptr<coll::session_transport> tr;
  std::uint64_t seq = 0;
  std::unique_ptr<coll::executor> ex;

  // ---- progress ----
  enum class phase {
    check, checked, ranges, ranges_gather, decide, round_start, round_counts, round_lists, round_data, round_write,
    round_read_back, round_place, round_end, agree, agreed, done
  };
  phase at = phase::check;
  bool io_pending = false;
  std::atomic<bool> io_done{false};
  std::atomic<bool> busy{false};
  std::atomic<bool> finished{false};
  io_result res;

  // ---- two-phase state ----
  std::vector<piece> blocks;       // this process's file blocks, ascending
  std::vector<std::int64_t> at_stream;  // stream offset of each block
  long long mine[4] = {};
  std::vector<long long> all;      // allgather results (ranges, then error classes)
  int err_mine = 0;
  std::vector<int> err_all;
  std::vector<std::byte> stage;
  std::byte* data = nullptr;       // the stream: what is written, or where it is read to
  std::vector<int> aggs;
  int me_agg = -1;
  std::int64_t gmin = -1, gmax = -1, domain = 0, cbs = 0, rounds = 0, round = 0;
  std::vector<int> counts_out, counts_in;  // per peer: pieces, bytes
  std::vector<piece> meta_out, meta_in;
  scratch data_out, data_in, window;  // from the pool (decide()), back at the end
  struct ref {
    std::size_t block;
    std::int64_t skip, len;
  };
  std::vector<std::vector<ref>> refs;  // per aggregator: where its pieces go in the stream
  std::vector<std::int64_t> dcount_out, ddisp_out, dcount_in, ddisp_in;
  std::int64_t lo = -1, hi = -1;
  bool holes = false;

  int rank() const { return file->rank; }
  int size() const { return file->size; }

  bool advance() {
    if (finished.load(std::memory_order_acquire)) return true;
    if (busy.exchange(true, std::memory_order_acquire)) return false;
    const bool done = run();
    if (done) {
      ex.reset();
      give_scratch(data_out);
      give_scratch(data_in);
      give_scratch(window);
      file->pending.fetch_sub(1, std::memory_order_acq_rel);
      finished.store(true, std::memory_order_release);
    }
    busy.store(false, std::memory_order_release);
    return done;
  }

 private:
  bool run() {
    for (;;) {
      if (io_pending) {
        if (!io_done.load(std::memory_order_acquire)) return false;
        io_pending = false;
      }
      if (ex) {
        if (!ex->advance()) return false;
        const nmad::errc e = ex->error();
        if (e != nmad::errc::ok) {
          // The exchange itself failed (a peer is gone): the protocol
          // cannot go on, nor can the outcome be agreed.
          int cls = from_errc(e);
          res.err = cls == MPI_SUCCESS ? MPI_ERR_OTHER : cls;
          res.detail = "two-phase exchange failed: " + ex->error_message();
          at = phase::done;
        }
        ex.reset();
      }
      if (at == phase::done) return true;
      next();
    }
  }

  // Starts a phase. All phases share the job's sequence number; each gets
  // its own band of local tags (8 bands, used in turn), so that a message
  // of one phase can only match a receive of the same phase (the direct
  // collectives separate their phases the same way), without relying on
  // per-(peer, tag) order across phases. A process cannot be 8 phases
  // ahead of another: every round has an alltoall.
  void start(coll::schedule&& s) {
    if (identity.empty())
      for (int r = 0; r < size(); ++r) identity.push_back(r);
    coll::schedule banded;
    banded.skip_to_block(static_cast<std::uint32_t>(phases_started++ % tag_bands) * blocks_per_band);
    banded.append(std::move(s), identity);
    ex = std::make_unique<coll::executor>(std::move(banded), *tr, seq);
  }
  static constexpr std::uint32_t tag_bands = 8, blocks_per_band = 8;  // 64 blocks of local tags in all
  std::uint64_t phases_started = 0;
  std::vector<int> identity;

  // Runs fn where file steps run: inline for a blocking call, else on the
  // I/O thread (advance() then waits for io_done).
  template <class Fn>
  void file_step(Fn&& fn) {
    if (!background) {
      fn();
      return;
    }
    io_pending = true;
    io_done.store(false, std::memory_order_relaxed);
    post_io([self = shared_from_this(), fn = std::forward<Fn>(fn)]() mutable {
      fn();
      self->io_done.store(true, std::memory_order_release);
      st().session->notify_waiters();  // a thread may sleep in MPI_Wait on it
    });
  }

  void gather(const void* in, void* out, std::size_t bytes) {
    if (size() == 1) {
      std::memcpy(out, in, bytes);
      return;
    }
    start(coll::build_allgather(rank(), size(), in, out, bytes));
  }

  void next() {
    switch (at) {
      case phase::check:
        if (check < 0) {
          at = phase::ranges;
          return;
        }
        err_mine = check;
        err_all.assign(static_cast<std::size_t>(size()), 0);
        gather(&err_mine, err_all.data(), sizeof(int));
        at = phase::checked;
        return;
      case phase::checked: {
        const int worst = *std::max_element(err_all.begin(), err_all.end());
        if (worst != MPI_SUCCESS) {
          res.err = check != MPI_SUCCESS ? check : worst;
          res.detail = check != MPI_SUCCESS ? check_detail
                                            : std::string("the collective call failed its checks on another process (") +
                                                  error_name(worst) + ")";
          at = phase::done;
          return;
        }
        at = phase::ranges;
        return;
      }
      case phase::ranges:
        // Walking the filetype costs as much as its blocks: a file step.
        file_step([this] { describe_blocks(); });
        at = phase::ranges_gather;
        return;
      case phase::ranges_gather:
        all.assign(static_cast<std::size_t>(4 * size()), 0);
        gather(mine, all.data(), sizeof mine);
        at = phase::decide;
        return;
      case phase::decide:
        decide();
        return;
      case phase::round_start:
        if (round >= rounds) {
          at = phase::agree;
          return;
        }
        // Packing the pieces copies up to a window of data: a file step.
        file_step([this] { prepare_round(); });
        at = phase::round_counts;
        return;
      case phase::round_counts:
        counts_in.assign(static_cast<std::size_t>(2 * size()), 0);
        start(coll::build_alltoall(rank(), size(), counts_out.data(), counts_in.data(), 2 * sizeof(int)));
        at = phase::round_lists;
        return;
      case phase::round_lists: {
        std::vector<std::int64_t> sc(size()), sd(size()), rc(size()), rd(size());
        std::int64_t so = 0, ro = 0;
        for (int r = 0; r < size(); ++r) {
          sc[r] = counts_out[2 * r] * static_cast<std::int64_t>(sizeof(piece));
          sd[r] = so;
          so += sc[r];
          rc[r] = counts_in[2 * r] * static_cast<std::int64_t>(sizeof(piece));
          rd[r] = ro;
          ro += rc[r];
        }
        meta_in.resize(static_cast<std::size_t>(ro) / sizeof(piece));
        start(coll::build_alltoallv(rank(), size(), buffer_of(meta_out), to_sizes(sc), to_sizes(sd), buffer_of(meta_in),
                                    to_sizes(rc), to_sizes(rd)));
        at = phase::round_data;
        return;
      }
      case phase::round_data:
        exchange_data();
        return;
      case phase::round_write:
        if (lo >= 0) file_step([this] { write_window(); });
        at = phase::round_end;
        return;
      case phase::round_read_back:
        // The aggregators' reads are in data_in: every process gets its pieces.
        data_out.resize(static_cast<std::size_t>(sum(dcount_out)));  // every byte received
        start(coll::build_alltoallv(rank(), size(), buffer_of(data_in), to_sizes(dcount_in), to_sizes(ddisp_in),
                                    buffer_of(data_out), to_sizes(dcount_out), to_sizes(ddisp_out)));
        at = phase::round_place;
        return;
      case phase::round_place:
        file_step([this] { place_read_pieces(); });
        at = phase::round_end;
        return;
      case phase::round_end:
        ++round;
        at = phase::round_start;
        return;
      case phase::agree:
        if (size() == 1) {
          at = phase::agreed;
          err_all.assign(1, res.err);
          return;
        }
        err_mine = res.err;
        err_all.assign(static_cast<std::size_t>(size()), 0);
        gather(&err_mine, err_all.data(), sizeof(int));
        at = phase::agreed;
        return;
      case phase::agreed: {
        const int worst = *std::max_element(err_all.begin(), err_all.end());
        if (worst != MPI_SUCCESS && res.err == MPI_SUCCESS) {
          res.err = worst;
          res.detail = "the collective access failed on another process (" + std::string(error_name(worst)) + ")";
        }
        at = phase::done;
        // The independent path counted its bytes; two-phase counts them now.
        if (res.err == MPI_SUCCESS && !independent) file_step([this] { finish(); });
        return;
      }
      case phase::done:
        return;
    }
  }

  static std::int64_t sum(const std::vector<std::int64_t>& v) {
    std::int64_t s = 0;
    for (auto x : v) s += x;
    return s;
  }

  bool independent = false;  // no aggregation: each process accessed on its own

  void decide() {
    bool noncontig = false, any_disable = false, any_enable = false;
    for (int r = 0; r < size(); ++r) {
      const long long* a = &all[static_cast<std::size_t>(4 * r)];
      if (a[0] >= 0) {
        gmin = gmin < 0 ? a[0] : std::min<std::int64_t>(gmin, a[0]);
        gmax = std::max<std::int64_t>(gmax, a[1]);
      }
      noncontig |= a[2] != 0;
      any_disable |= a[3] == cb_disable || a[3] == cb_atomic;
      any_enable |= a[3] == cb_enable;
    }
    const bool two_phase = size() > 1 && gmin >= 0 && !any_disable && (any_enable || noncontig);
    if (!two_phase) {
      independent = true;
      file_step([this] { res = access_independent(*file, v, h, atomic, write, u, pos); });
      at = phase::agree;
      return;
    }
    // The stream: the user's buffer itself when contiguous; in external32,
    // the whole access converted (a file step); else none, each piece is
    // packed from (unpacked into) the user's buffer as it moves, so a
    // non-contiguous buffer costs no copy of the whole access.
    file_step([this] {
      if (direct_access(v, u) || v.external32)
        data = write ? const_cast<std::byte*>(stage_for_write(v, u, stage)) : read_target(v, u, stage);
      at_stream.resize(blocks.size());
      std::int64_t s = 0;
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        at_stream[i] = s;
        s += blocks[i].len;
      }
    });
    const int naggs = std::clamp(h.cb_nodes, 1, size());
    aggs.assign(file->aggregator_order.begin(), file->aggregator_order.begin() + naggs);
    me_agg = -1;
    for (int a = 0; a < naggs; ++a)
      if (aggs[a] == rank()) me_agg = a;
    domain = (gmax - gmin + naggs - 1) / naggs;
    cbs = std::max<std::int64_t>(h.cb_buffer_size, 4096);
    rounds = (domain + cbs - 1) / cbs;
    round = 0;
    refs.assign(static_cast<std::size_t>(size()), {});
    data_out = take_scratch();
    data_in = take_scratch();
    window = take_scratch();
    at = phase::round_start;
  }

  // This process's file blocks (adjacent ones merged) and its line of the
  // ranges allgather.
  void describe_blocks() {
    for_each_file_block(v, pos, u.file_bytes, [&](std::int64_t off, std::int64_t n) {
      if (!blocks.empty() && blocks.back().off + blocks.back().len == off)
        blocks.back().len += n;
      else
        blocks.push_back({off, n});
    });
    mine[0] = blocks.empty() ? -1 : blocks.front().off;
    mine[1] = blocks.empty() ? -1 : blocks.back().off + blocks.back().len;
    mine[2] = blocks.size() > 1 ? 1 : 0;
    mine[3] = mode_of(write ? h.cb_write : h.cb_read, atomic);
  }

  // The pieces of this process's blocks in every aggregator's window of
  // this round, per destination in rank order, and their bytes (write).
  void prepare_round() {
    meta_out.clear();
    counts_out.assign(static_cast<std::size_t>(2 * size()), 0);
    for (auto& r : refs) r.clear();
    std::vector<std::pair<int, std::pair<std::int64_t, std::int64_t>>> windows;  // rank, [lo, hi)
    for (std::size_t a = 0; a < aggs.size(); ++a) {
      const std::int64_t dlo = gmin + static_cast<std::int64_t>(a) * domain, dhi = std::min(gmax, dlo + domain);
      const std::int64_t wlo = dlo + round * cbs, whi = std::min(dhi, wlo + cbs);
      windows.push_back({aggs[a], {wlo, whi}});
    }
    std::sort(windows.begin(), windows.end());
    std::int64_t total = 0;
    for (auto& [dest, w] : windows) {
      const auto [wlo, whi] = w;
      std::size_t nbytes = 0, npieces = 0;
      if (wlo < whi) {
        auto it = std::partition_point(blocks.begin(), blocks.end(),
                                       [&](const piece& b) { return b.off + b.len <= wlo; });
        for (; it != blocks.end() && it->off < whi; ++it) {
          const std::int64_t plo = std::max(it->off, wlo), phi = std::min(it->off + it->len, whi);
          if (phi <= plo) continue;
          const std::size_t bi = static_cast<std::size_t>(it - blocks.begin());
          meta_out.push_back({plo, phi - plo});
          refs[static_cast<std::size_t>(dest)].push_back({bi, plo - it->off, phi - plo});
          nbytes += static_cast<std::size_t>(phi - plo);
          ++npieces;
        }
      }
      counts_out[static_cast<std::size_t>(2 * dest)] = static_cast<int>(npieces);
      counts_out[static_cast<std::size_t>(2 * dest + 1)] = static_cast<int>(nbytes);
      total += static_cast<std::int64_t>(nbytes);
    }
    if (!write) return;
    // The bytes, per destination in rank order (the order of meta_out).
    std::byte* out = data_out.resize(static_cast<std::size_t>(total));
    for (int r = 0; r < size(); ++r)
      for (const ref& x : refs[static_cast<std::size_t>(r)]) {
        if (data)
          std::memcpy(out, data + at_stream[x.block] + x.skip, static_cast<std::size_t>(x.len));
        else
          u.type.pack_range(u.buf, u.count, at_stream[x.block] + x.skip, x.len, out);
        out += x.len;
      }
  }

  // The piece lists are in: the aggregator's window, then the data moves
  // (write: to the aggregators, which write; read: the aggregators read).
  void exchange_data() {
    dcount_out.assign(static_cast<std::size_t>(size()), 0);
    ddisp_out = dcount_in = ddisp_in = dcount_out;
    std::int64_t so = 0, ro = 0;
    for (int r = 0; r < size(); ++r) {
      dcount_out[r] = counts_out[2 * r + 1];
      ddisp_out[r] = so;
      so += dcount_out[r];
      dcount_in[r] = counts_in[2 * r + 1];
      ddisp_in[r] = ro;
      ro += dcount_in[r];
    }
    lo = hi = -1;
    holes = false;
    if (me_agg >= 0 && !meta_in.empty()) {
      std::vector<piece> sorted = meta_in;
      std::sort(sorted.begin(), sorted.end(), [](const piece& a, const piece& b) { return a.off < b.off; });
      lo = sorted.front().off;
      std::int64_t reach = lo;
      for (const piece& p : sorted) {
        if (p.off > reach) holes = true;
        reach = std::max(reach, p.off + p.len);
      }
      hi = reach;
    }
    data_in.resize(static_cast<std::size_t>(ro));
    if (write) {
      start(coll::build_alltoallv(rank(), size(), buffer_of(data_out), to_sizes(dcount_out), to_sizes(ddisp_out),
                                  buffer_of(data_in), to_sizes(dcount_in), to_sizes(ddisp_in)));
      at = phase::round_write;
      return;
    }
    // Read: the aggregator reads the covered range once and cuts it into
    // the pieces each process asked for.
    if (lo >= 0) file_step([this] { read_window(); });
    at = phase::round_read_back;
  }

  void read_window() {
    std::byte* w = window.resize(static_cast<std::size_t>(hi - lo));
    std::int64_t got = 0;
    if (res.err == MPI_SUCCESS) {
      std::string detail;
      if (int e = pread_full(file->fd, w, hi - lo, lo, got, detail)) {
        res.err = e;
        res.detail = detail;
        got = 0;
      }
    }
    if (got < hi - lo) std::memset(w + got, 0, static_cast<std::size_t>(hi - lo - got));  // past the end of file
    std::byte* dst = data_in.data();
    for (const piece& p : meta_in) {
      std::memcpy(dst, w + (p.off - lo), static_cast<std::size_t>(p.len));
      dst += p.len;
    }
  }

  void write_window() {
    if (res.err != MPI_SUCCESS) return;  // an earlier window failed: agreed at the end
    std::string detail;
    if (!holes) {
      // The pieces tile [lo, hi): written straight from the received bytes,
      // in file order, with no window copy (overlapping pieces, which MPI
      // leaves undefined, take the window path).
      std::vector<std::pair<piece, std::int64_t>> order;  // piece, its offset in data_in
      order.reserve(meta_in.size());
      std::int64_t src = 0;
      for (const piece& p : meta_in) {
        order.push_back({p, src});
        src += p.len;
      }
      std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first.off < b.first.off; });
      bool tiled = true;
      std::int64_t reach = lo;
      std::vector<iovec> iov;
      iov.reserve(order.size());
      for (const auto& [p, at] : order) {
        if (p.off != reach) {
          tiled = false;
          break;
        }
        reach += p.len;
        if (!iov.empty() && static_cast<std::byte*>(iov.back().iov_base) + iov.back().iov_len == data_in.data() + at)
          iov.back().iov_len += static_cast<std::size_t>(p.len);
        else
          iov.push_back({data_in.data() + at, static_cast<std::size_t>(p.len)});
      }
      if (tiled) {
        if (int e = pwritev_full(file->fd, iov, lo, detail)) {
          res.err = e;
          res.detail = detail;
        }
        return;
      }
    }
    std::byte* w = window.resize(static_cast<std::size_t>(hi - lo));
    if (holes) {
      // The holes keep the file's bytes (zeros past its end).
      std::int64_t got = 0;
      if (int e = pread_full(file->fd, w, hi - lo, lo, got, detail)) {
        res.err = e;
        res.detail = detail;
        return;
      }
      if (got < hi - lo) std::memset(w + got, 0, static_cast<std::size_t>(hi - lo - got));
    }
    std::int64_t src = 0;
    for (const piece& p : meta_in) {
      std::memcpy(w + (p.off - lo), data_in.data() + src, static_cast<std::size_t>(p.len));
      src += p.len;
    }
    if (int e = pwrite_full(file->fd, w, hi - lo, lo, detail)) {
      res.err = e;
      res.detail = detail;
    }
  }

  void place_read_pieces() {
    for (int r = 0; r < size(); ++r) {
      std::int64_t src = ddisp_out[r];
      for (const ref& x : refs[static_cast<std::size_t>(r)]) {
        if (data)
          std::memcpy(data + at_stream[x.block] + x.skip, data_out.data() + src, static_cast<std::size_t>(x.len));
        else
          u.type.unpack_range(data_out.data() + src, at_stream[x.block] + x.skip, x.len, u.buf, u.count);
        src += x.len;
      }
    }
  }

  // Bytes moved: a write moved everything; a read, the stream up to the
  // first block that ends past the end of the file.
  void finish() {
    if (write) {
      res.bytes = u.mem_bytes;
      return;
    }
    struct stat sb {};
    ::fstat(file->fd, &sb);
    std::int64_t got = 0;
    for (const piece& b : blocks) {
      const std::int64_t have = std::clamp<std::int64_t>(sb.st_size - b.off, 0, b.len);
      got += have;
      if (have < b.len) break;
    }
    // (Without a stream buffer, the pieces are in the user's buffer already.)
    res.bytes = data ? finish_read(v, u, data, got) : got;
  }
};

// The progress task (twophase_progress.cpp) holds jobs only through these.
bool advance_job(collective_job& j) { return j.advance(); }
bool job_finished(const collective_job& j) { return j.finished.load(std::memory_order_acquire); }


std::shared_ptr<collective_job> start_collective(const char* fn, const std::shared_ptr<file_obj>& f, const view& v,
                                                 const hints& h, bool atomic, bool write, const user_data& u,
                                                 std::int64_t pos, int check, std::string check_detail,
                                                 bool background) {
  auto j = std::make_shared<collective_job>();
  j->fn = fn;
  j->file = f;
  j->write = write;
  j->u = u;
  j->pos = pos;
  j->v = v;
  j->h = h;
  j->atomic = atomic;
  j->check = f->size > 1 ? check : -1;
  j->check_detail = std::move(check_detail);
  j->background = background;
  if (f->size > 1) {
    comm_obj* c = lookup_comm(f->comm);
    j->tr = collective_transport(*c);
    j->seq = j->tr->next_sequence();  // in call order, on the calling thread (see the top)
  }
  f->pending.fetch_add(1, std::memory_order_acq_rel);
  if (background) register_job(j);
  return j;
}

io_result finish_collective(const std::shared_ptr<collective_job>& j) {
  if (!j->advance()) st().session->wait_until([&] { return j->advance(); });
  return j->res;
}

int collective_request(const std::shared_ptr<collective_job>& j, MPI_Request* request) {
  request_obj* r = new_request();
  collective_job* p = j.get();
  arm_file_request(r, *j->file, j, p->fn, [p] { return p->advance(); }, &p->res);
  *request = r->handle;
  return MPI_SUCCESS;
}
}  // namespace nmad::mpi::io
