// MPI-IO collective data access: two-phase aggregation (as ROMIO's
// "collective buffering", Thakur et al. 1999).
//
// Every process describes its access (first and last file byte, whether it
// is one contiguous block) in one allgather. When every access is
// contiguous, or atomic mode is on, or the romio_cb_read/romio_cb_write
// hint says "disable", each process accesses the file on its own (a
// contiguous access gains nothing from aggregation; atomic mode locks each
// access). Otherwise the byte range [min, max) the processes touch is cut
// into cb_nodes contiguous file domains, one per aggregator (f.aggregator_order:
// the first process of each host, then the second, ...), and each domain is
// processed in windows of cb_buffer_size bytes, one window per aggregator
// per round:
//   write: every process sends each aggregator the (offset, length) pieces
//          of its blocks that fall in that aggregator's window and their
//          bytes (MPI_Alltoall of the sizes, MPI_Alltoallv of the lists and
//          the data); the aggregator fills a buffer covering the pieces
//          (reading it first when the pieces leave holes, so the holes keep
//          the file's bytes) and writes it with one pwrite;
//   read:  the aggregator reads the window's covered range with one pread
//          and sends each process its pieces back.
// All processes run the same number of rounds (computed from the agreed
// range), so the exchange needs no further agreement. Errors (a failed
// pwrite on an aggregator) are agreed at the end: every process returns
// the class, the failing one with its detail.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "mpi_layer/file_impl.hpp"

namespace nmad::mpi::io {

namespace {

struct piece {
  std::int64_t off, len;
};

// The agreed outcome: the largest class any process reports.
void agree(file_obj& f, io_result& res) {
  int mine = res.err, all = MPI_SUCCESS;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, f.comm);
  if (all != MPI_SUCCESS && res.err == MPI_SUCCESS) {
    res.err = all;
    res.detail = "the collective access failed on another process (" + std::string(error_name(all)) + ")";
  }
}

enum cb_mode : long long { cb_disable = 0, cb_auto = 1, cb_enable = 2, cb_atomic = 3 };

cb_mode mode_of(const std::string& hint, bool atomic) {
  if (atomic) return cb_atomic;
  if (hint == "disable") return cb_disable;
  if (hint == "enable") return cb_enable;
  return cb_auto;
}

}  // namespace

io_result access_collective(file_obj& f, bool write, const user_data& u, std::int64_t pos) {
  view v;
  hints h;
  bool atomic = false;
  {
    std::lock_guard g(f.mu);
    v = f.v;
    h = f.h;
    atomic = f.atomic;
  }
  // This process's file blocks, in stream order (ascending offsets).
  std::vector<piece> blocks;
  for_each_file_block(v, pos, u.file_bytes, [&](std::int64_t off, std::int64_t n) {
    if (!blocks.empty() && blocks.back().off + blocks.back().len == off)
      blocks.back().len += n;
    else
      blocks.push_back({off, n});
  });
  const long long mine[4] = {blocks.empty() ? -1 : blocks.front().off,
                             blocks.empty() ? -1 : blocks.back().off + blocks.back().len,
                             blocks.size() > 1 ? 1 : 0, mode_of(write ? h.cb_write : h.cb_read, atomic)};
  std::vector<long long> all(static_cast<std::size_t>(4 * f.size));
  io_result res;
  if (f.size > 1) {
    if (int e = PMPI_Allgather(mine, 4, MPI_LONG_LONG, all.data(), 4, MPI_LONG_LONG, f.comm)) {
      res.err = e;
      res.detail = "exchange of the access ranges failed";
      return res;
    }
  } else {
    std::copy(mine, mine + 4, all.begin());
  }
  std::int64_t gmin = -1, gmax = -1;
  bool noncontig = false, any_disable = false, any_enable = false;
  for (int r = 0; r < f.size; ++r) {
    const long long* a = &all[static_cast<std::size_t>(4 * r)];
    if (a[0] >= 0) {
      gmin = gmin < 0 ? a[0] : std::min<std::int64_t>(gmin, a[0]);
      gmax = std::max<std::int64_t>(gmax, a[1]);
    }
    noncontig |= a[2] != 0;
    any_disable |= a[3] == cb_disable || a[3] == cb_atomic;
    any_enable |= a[3] == cb_enable;
  }
  const bool two_phase = f.size > 1 && gmin >= 0 && !any_disable && (any_enable || noncontig);
  if (!two_phase) {
    res = access_independent(f, v, h, atomic, write, u, pos);
    if (f.size > 1) agree(f, res);
    return res;
  }

  // Stream data: what this process writes, or where it reads to.
  std::vector<std::byte> stage;
  std::byte* data = write ? const_cast<std::byte*>(stage_for_write(v, u, stage)) : read_target(v, u, stage);
  // Stream offset of each block.
  std::vector<std::int64_t> at(blocks.size());
  {
    std::int64_t s = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      at[i] = s;
      s += blocks[i].len;
    }
  }

  const int naggs = std::clamp(h.cb_nodes, 1, f.size);
  std::vector<int> aggs(f.aggregator_order.begin(), f.aggregator_order.begin() + naggs);
  std::vector<int> agg_index(static_cast<std::size_t>(f.size), -1);
  for (int a = 0; a < naggs; ++a) agg_index[static_cast<std::size_t>(aggs[a])] = a;
  const std::int64_t span = gmax - gmin;
  const std::int64_t domain = (span + naggs - 1) / naggs;
  const std::int64_t cbs = std::max<std::int64_t>(h.cb_buffer_size, 4096);
  const std::int64_t rounds = (domain + cbs - 1) / cbs;
  const int me_agg = agg_index[static_cast<std::size_t>(f.rank)];

  std::vector<int> scount(f.size), sdisp(f.size), rcount(f.size), rdisp(f.size);
  std::vector<int> counts_out(2 * f.size), counts_in(2 * f.size);
  std::vector<piece> meta_out, meta_in;
  std::vector<std::byte> data_out, data_in, window;
  // Per destination: the (block index, offset inside it, length) of the
  // pieces sent, to place the returned data of a read.
  struct ref {
    std::size_t block;
    std::int64_t skip, len;
  };
  std::vector<std::vector<ref>> refs(static_cast<std::size_t>(f.size));

  for (std::int64_t round = 0; round < rounds && res.err == MPI_SUCCESS; ++round) {
    meta_out.clear();
    data_out.clear();
    std::fill(counts_out.begin(), counts_out.end(), 0);
    for (auto& r : refs) r.clear();
    // Pieces for every aggregator's window of this round, in rank order.
    std::vector<std::pair<int, std::pair<std::int64_t, std::int64_t>>> windows;  // rank, [lo, hi)
    for (int a = 0; a < naggs; ++a) {
      const std::int64_t dlo = gmin + a * domain, dhi = std::min(gmax, dlo + domain);
      const std::int64_t wlo = dlo + round * cbs, whi = std::min(dhi, wlo + cbs);
      windows.push_back({aggs[a], {wlo, whi}});
    }
    std::sort(windows.begin(), windows.end());
    std::vector<std::size_t> meta_start(static_cast<std::size_t>(f.size), 0);
    for (auto& [dest, w] : windows) {
      const auto [wlo, whi] = w;
      meta_start[static_cast<std::size_t>(dest)] = meta_out.size();
      std::size_t nbytes = 0, npieces = 0;
      if (wlo < whi) {
        auto it = std::partition_point(blocks.begin(), blocks.end(),
                                       [&](const piece& b) { return b.off + b.len <= wlo; });
        for (; it != blocks.end() && it->off < whi; ++it) {
          const std::int64_t lo = std::max(it->off, wlo), hi = std::min(it->off + it->len, whi);
          if (hi <= lo) continue;
          const std::size_t bi = static_cast<std::size_t>(it - blocks.begin());
          meta_out.push_back({lo, hi - lo});
          refs[static_cast<std::size_t>(dest)].push_back({bi, lo - it->off, hi - lo});
          if (write) {
            const std::byte* src = data + at[bi] + (lo - it->off);
            data_out.insert(data_out.end(), src, src + (hi - lo));
          }
          nbytes += static_cast<std::size_t>(hi - lo);
          ++npieces;
        }
      }
      counts_out[static_cast<std::size_t>(2 * dest)] = static_cast<int>(npieces);
      counts_out[static_cast<std::size_t>(2 * dest + 1)] = static_cast<int>(nbytes);
    }
    if (int e = PMPI_Alltoall(counts_out.data(), 2, MPI_INT, counts_in.data(), 2, MPI_INT, f.comm)) {
      res.err = e;
      res.detail = "two-phase exchange of piece counts failed";
      break;
    }
    // Piece lists to the aggregators.
    int so = 0, ro = 0;
    for (int r = 0; r < f.size; ++r) {
      scount[r] = counts_out[2 * r] * static_cast<int>(sizeof(piece));
      sdisp[r] = so;
      so += scount[r];
      rcount[r] = counts_in[2 * r] * static_cast<int>(sizeof(piece));
      rdisp[r] = ro;
      ro += rcount[r];
    }
    meta_in.resize(static_cast<std::size_t>(ro) / sizeof(piece));
    if (int e = PMPI_Alltoallv(meta_out.data(), scount.data(), sdisp.data(), MPI_BYTE, meta_in.data(), rcount.data(),
                               rdisp.data(), MPI_BYTE, f.comm)) {
      res.err = e;
      res.detail = "two-phase exchange of piece lists failed";
      break;
    }
    // Data byte counts and displacements (the same on both sides for both
    // directions: what a process sends an aggregator in a write is what it
    // gets back in a read).
    std::vector<int> dcount_out(f.size), ddisp_out(f.size), dcount_in(f.size), ddisp_in(f.size);
    so = ro = 0;
    for (int r = 0; r < f.size; ++r) {
      dcount_out[r] = counts_out[2 * r + 1];
      ddisp_out[r] = so;
      so += dcount_out[r];
      dcount_in[r] = counts_in[2 * r + 1];
      ddisp_in[r] = ro;
      ro += dcount_in[r];
    }
    // The aggregator's window: the range its pieces cover.
    std::int64_t lo = -1, hi = -1;
    bool holes = false;
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
      window.assign(static_cast<std::size_t>(hi - lo), std::byte{0});
    }
    if (write) {
      data_in.resize(static_cast<std::size_t>(ro));
      if (int e = PMPI_Alltoallv(data_out.data(), dcount_out.data(), ddisp_out.data(), MPI_BYTE, data_in.data(),
                                 dcount_in.data(), ddisp_in.data(), MPI_BYTE, f.comm)) {
        res.err = e;
        res.detail = "two-phase exchange of data failed";
        break;
      }
      if (lo >= 0) {
        if (holes) {
          std::int64_t got = 0;
          res.err = pread_full(f.fd, window.data(), hi - lo, lo, got, res.detail);
        }
        std::size_t k = 0;
        std::int64_t src = 0;
        for (const piece& p : meta_in) {
          std::memcpy(window.data() + (p.off - lo), data_in.data() + src, static_cast<std::size_t>(p.len));
          src += p.len;
          ++k;
        }
        if (res.err == MPI_SUCCESS) res.err = pwrite_full(f.fd, window.data(), hi - lo, lo, res.detail);
      }
    } else {
      // Read the covered range once, send each process its pieces back.
      data_in.resize(static_cast<std::size_t>(ro));
      if (lo >= 0) {
        std::int64_t got = 0;
        res.err = pread_full(f.fd, window.data(), hi - lo, lo, got, res.detail);
        std::int64_t dst = 0;
        for (const piece& p : meta_in) {
          std::memcpy(data_in.data() + dst, window.data() + (p.off - lo), static_cast<std::size_t>(p.len));
          dst += p.len;
        }
      }
      data_out.resize(static_cast<std::size_t>(so));
      if (int e = PMPI_Alltoallv(data_in.data(), dcount_in.data(), ddisp_in.data(), MPI_BYTE, data_out.data(),
                                 dcount_out.data(), ddisp_out.data(), MPI_BYTE, f.comm)) {
        res.err = e;
        res.detail = "two-phase exchange of data failed";
        break;
      }
      for (int r = 0; r < f.size; ++r) {
        std::int64_t src = ddisp_out[r];
        for (const ref& x : refs[static_cast<std::size_t>(r)]) {
          std::memcpy(data + at[x.block] + x.skip, data_out.data() + src, static_cast<std::size_t>(x.len));
          src += x.len;
        }
      }
    }
  }
  agree(f, res);
  if (res.err != MPI_SUCCESS) return res;
  if (write) {
    res.bytes = u.mem_bytes;
    return res;
  }
  // Bytes read: the stream up to the first block that ends past the end of
  // the file.
  struct stat sb {};
  ::fstat(f.fd, &sb);
  std::int64_t got = 0;
  for (const piece& b : blocks) {
    const std::int64_t have = std::clamp<std::int64_t>(sb.st_size - b.off, 0, b.len);
    got += have;
    if (have < b.len) break;
  }
  res.bytes = finish_read(v, u, data, got);
  return res;
}

}  // namespace nmad::mpi::io
