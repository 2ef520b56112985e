// The phases of intercommunicator collectives (inter.hpp).
#include "mpi_layer/coll/inter.hpp"

#include <string>

namespace nmad::mpi::coll_call::inter {

// Validates a root argument: MPI_ROOT (this process is the root),
// MPI_PROC_NULL (another process of this group is), or a remote rank.
int root_of(call& x, int root) {
  if (root == MPI_ROOT) return is_root;
  if (root == MPI_PROC_NULL) return proc_null;
  if (root < 0 || root >= x.size)
    x.fail(MPI_ERR_ROOT, "root " + std::to_string(root) + " is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the " +
                             std::to_string(x.size) + "-process remote group");
  return root;
}

void no_in_place(call& x, const void* a, const void* b) {
  if (a == MPI_IN_PLACE || b == MPI_IN_PLACE)
    x.fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is not allowed on an intercommunicator");
}

void local_phase(call& x, schedule&& s) { x.sch.append(std::move(s), x.lmap); }

// Leader of this group: send `out` to and receive `in` from the remote leader.
void leaders_exchange(call& x, std::uint32_t tag, const std::byte* out, std::size_t out_bytes, std::byte* in,
                      std::size_t in_bytes) {
  x.sch.new_round();
  if (x.rank != 0) return;
  x.sch.send(x.rmap[0], tag, out, out_bytes);
  x.sch.recv(x.rmap[0], tag, in, in_bytes);
}

void barrier(call& x) {
  const std::uint32_t tag = schedule::make_tag(x.sch.tag_block(), 0);
  local_phase(x, coll::build_barrier(x.rank, x.lsize));
  leaders_exchange(x, tag, g_dummy, 0, g_dummy, 0);
  local_phase(x, coll::build_bcast(x.rank, x.lsize, g_dummy, 0, 0));
}

void bcast(call& x, void* buf, Count count, const tinfo& t, int root) {
  const std::uint32_t tag = schedule::make_tag(x.sch.tag_block(), 0);
  const int r = root_of(x, root);
  if (r == proc_null) return;
  const std::size_t bytes = sz(count, t);
  if (r == is_root) {
    x.sch.send(x.rmap[0], tag, x.in(buf, count, t), bytes);
    return;
  }
  std::byte* p = x.out(buf, count, t, false);
  if (x.rank == 0) x.sch.recv(x.rmap[r], tag, p, bytes);
  local_phase(x, coll::build_bcast(x.rank, x.lsize, p, bytes, 0));
}

// Reduce (root given) or allreduce (all = true).
void reduce(call& x, const void* sbuf, void* rbuf, Count count, const tinfo& t, int root, bool all) {
  const std::uint32_t tag = schedule::make_tag(x.sch.tag_block(), 0);
  const std::size_t bytes = sz(count, t), n = static_cast<std::size_t>(count);
  const int r = all ? 0 : root_of(x, root);
  if (r == proc_null) return;
  if (r == is_root) {
    x.sch.recv(x.rmap[0], tag, x.out(rbuf, count, t, false), bytes);
    return;
  }
  const std::byte* in = x.in(sbuf, count, t);
  std::byte* partial = x.rank == 0 ? x.temp(bytes) : nullptr;
  local_phase(x, coll::build_reduce(x.rank, x.lsize, in, partial, n, t.size, *x.red, 0));
  if (!all) {
    x.sch.new_round();
    if (x.rank == 0) x.sch.send(x.rmap[r], tag, partial, bytes);
    return;
  }
  std::byte* out = x.out(rbuf, count, t, false);
  leaders_exchange(x, tag, partial, bytes, out, bytes);
  local_phase(x, coll::build_bcast(x.rank, x.lsize, out, bytes, 0));
}

// Reduce_scatter(_block): every process of this group gives `total`
// elements (the sum of `counts`, one count per LOCAL process, equal to the
// remote group's total); this group's reduction goes to the remote group,
// and the remote group's reduction is scattered here, counts[i] elements to
// local rank i.
void reduce_scatter(call& x, const void* sbuf, void* rbuf, const std::vector<std::size_t>& counts, const tinfo& t) {
  const std::uint32_t tag = schedule::make_tag(x.sch.tag_block(), 0);
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  const std::size_t bytes = total * t.size;
  std::vector<std::size_t> block_bytes(counts.size()), displs(counts.size());
  for (std::size_t i = 0, at = 0; i < counts.size(); ++i) {
    block_bytes[i] = counts[i] * t.size;
    displs[i] = at;
    at += block_bytes[i];
  }
  const Count mine = static_cast<Count>(counts[x.rank]);
  const std::byte* in = x.in(sbuf, static_cast<Count>(total), t);
  std::byte* partial = x.rank == 0 ? x.temp(bytes) : nullptr;  // ours, reduced
  std::byte* theirs = x.rank == 0 ? x.temp(bytes) : nullptr;   // the remote group's
  local_phase(x, coll::build_reduce(x.rank, x.lsize, in, partial, total, t.size, *x.red, 0));
  leaders_exchange(x, tag, partial, bytes, theirs, bytes);
  std::byte* out = x.out(rbuf, mine, t, false);
  local_phase(x, coll::build_scatterv(x.rank, x.lsize, theirs, block_bytes, displs, mine ? out : g_dummy,
                                      block_bytes[x.rank], 0));
}

// Direct transfers: block i of `out` to remote rank i and block i of `in`
// from remote rank i (null bases skip that direction).
void exchange(call& x, std::uint32_t tag, const call::vblocks* out, const call::vblocks* in) {
  x.sch.new_round();
  for (int i = 0; i < x.size; ++i) {
    if (in) x.sch.recv(x.rmap[i], tag, in->base + in->displs[i], in->bytes[i]);
    if (out) x.sch.send(x.rmap[i], tag, out->base + out->displs[i], out->bytes[i]);
  }
}

// n equal blocks of `block` bytes from base.
call::vblocks even(std::byte* base, std::size_t block, int n) {
  call::vblocks v;
  v.base = base;
  v.bytes.assign(n, block);
  v.displs.resize(n);
  for (int i = 0; i < n; ++i) v.displs[i] = block * static_cast<std::size_t>(i);
  return v;
}

// This process's send block, the same for every remote process.
call::vblocks my_block(call& x, const void* sbuf, Count scount, MPI_Datatype stype) {
  x.count(scount, "sendcount");
  const tinfo t = x.type(stype, "sendtype");
  x.buffer(sbuf, scount, t, "send buffer");
  call::vblocks v = even(const_cast<std::byte*>(x.in(sbuf, scount, t)), sz(scount, t), x.size);
  for (auto& d : v.displs) d = 0;
  return v;
}

// Scatter(v) outside the root group: this process's block from the root.
void recv_from_root(call& x, std::uint32_t tag, int root, void* rbuf, Count rcount, MPI_Datatype rtype) {
  x.count(rcount, "recvcount");
  const tinfo t = x.type(rtype, "recvtype");
  x.buffer(rbuf, rcount, t, "receive buffer");
  x.sch.new_round();
  x.sch.recv(x.rmap[root], tag, x.out(rbuf, rcount, t, false), sz(rcount, t));
}

}  // namespace nmad::mpi::coll_call::inter
