// MPI_Type_create_darray: built dimension by dimension, fastest-varying
// first, from the existing constructors. Each step selects this process's
// indices along one dimension of a type T whose extent is one "row" of the
// faster dimensions, then resizes the result to the whole dimension:
//   BLOCK     one run of copies of T (hindexed_block with one displacement)
//   CYCLIC(k) a (count, stride) loop over this process's full cycles
//             (hvector of k copies every psize * k rows), plus the last,
//             partial cycle if the dimension ends inside it (struct)
//   NONE      the whole dimension
// So the result has O(ndims) nodes whatever the sizes, and its type map is
// the owned elements in increasing address order.
#include <algorithm>
#include <string>
#include <vector>

#include "mpi_layer/datatype/datatype.hpp"

namespace nmad::mpi {

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw DatatypeError(DatatypeErrc::invalid_argument, "nmad::mpi datatype: darray: " + what);
}
Aint mul(Aint a, Aint b) {
  Aint r;
  if (__builtin_mul_overflow(a, b, &r))
    throw DatatypeError(DatatypeErrc::invalid_count, "nmad::mpi datatype: darray: array size overflows");
  return r;
}

// The indices [first, first + n) of one dimension as n copies of t
// (extent row) starting at row `first`.
Datatype run(const Datatype& t, Aint row, Count first, Count n) {
  const Aint disp[] = {mul(first, row)};
  return Datatype::hindexed_block(n, disp, t);
}

}  // namespace

Datatype Datatype::create_darray(int size, int rank, std::span<const int> gsizes,
                                 std::span<const Distribution> distribs, std::span<const int> dargs,
                                 std::span<const int> psizes, Order order, const Datatype& old) {
  const std::vector<Count> g(gsizes.begin(), gsizes.end());
  return create_darray(size, rank, std::span<const Count>(g), distribs, dargs, psizes, order, old);
}

Datatype Datatype::create_darray(int size, int rank, std::span<const Count> gsizes,
                                 std::span<const Distribution> distribs, std::span<const int> dargs,
                                 std::span<const int> psizes, Order order, const Datatype& old) {
  old.checked();
  const std::size_t nd = gsizes.size();
  if (nd == 0 || distribs.size() != nd || dargs.size() != nd || psizes.size() != nd)
    bad("needs ndims >= 1 and arrays of ndims entries");
  if (size < 1) bad("size " + std::to_string(size) + " is not positive");
  if (rank < 0 || rank >= size) bad("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")");
  Count procs = 1;
  for (std::size_t d = 0; d < nd; ++d) {
    const std::string dim = "dimension " + std::to_string(d) + ": ";
    if (gsizes[d] < 1) bad(dim + "gsize " + std::to_string(gsizes[d]) + " is not positive");
    if (psizes[d] < 1) bad(dim + "psize " + std::to_string(psizes[d]) + " is not positive");
    if (dargs[d] != kDefaultDarg && dargs[d] < 1)
      bad(dim + "darg " + std::to_string(dargs[d]) + " is neither positive nor MPI_DISTRIBUTE_DFLT_DARG");
    switch (distribs[d]) {
      case Distribution::None:
        if (psizes[d] != 1) bad(dim + "MPI_DISTRIBUTE_NONE needs psize 1, not " + std::to_string(psizes[d]));
        break;
      case Distribution::Block:
        if (dargs[d] != kDefaultDarg && static_cast<Count>(dargs[d]) * psizes[d] < gsizes[d])
          bad(dim + "blocks of " + std::to_string(dargs[d]) + " on " + std::to_string(psizes[d]) +
              " processes cannot hold " + std::to_string(gsizes[d]) + " elements");
        break;
      case Distribution::Cyclic: break;
      default: bad(dim + "unknown distribution");
    }
    procs *= psizes[d];
    if (procs > size) break;
  }
  if (procs != size)
    bad("the process grid (product of psizes) does not have size " + std::to_string(size) + " processes");

  // This process's coordinates in the row-major process grid.
  std::vector<int> coord(nd);
  for (int r = rank, d = static_cast<int>(nd) - 1; d >= 0; --d) {
    coord[static_cast<std::size_t>(d)] = r % psizes[static_cast<std::size_t>(d)];
    r /= psizes[static_cast<std::size_t>(d)];
  }

  Datatype t = old;
  Aint row = old.extent();
  for (std::size_t k = 0; k < nd; ++k) {
    const std::size_t d = order == Order::C ? nd - 1 - k : k;
    const Count g = gsizes[d], p = psizes[d], c = coord[d];
    Datatype sel;
    switch (distribs[d]) {
      case Distribution::None: sel = run(t, row, 0, g); break;
      case Distribution::Block: {
        const Count b = dargs[d] == kDefaultDarg ? (g + p - 1) / p : dargs[d];
        const Count first = std::min(c * b, g);
        sel = run(t, row, first, std::min(first + b, g) - first);
        break;
      }
      case Distribution::Cyclic: {
        const Count kk = dargs[d] == kDefaultDarg ? 1 : dargs[d];
        const Count cycles = (g + kk - 1) / kk;  // blocks of kk over the dimension
        const Count mine = c < cycles ? (cycles - c + p - 1) / p : 0;
        if (mine == 0) {
          sel = run(t, row, 0, 0);
          break;
        }
        const Count last = c + (mine - 1) * p;  // my last block
        const Count last_len = std::min(kk, g - last * kk);
        const Count full = last_len == kk ? mine : mine - 1;
        const Datatype loop = hvector(full, kk, mul(mul(p, kk), row), t);
        if (full == mine) {
          const Aint disp[] = {mul(mul(c, kk), row)};
          sel = hindexed_block(1, disp, loop);
        } else {
          const int bl[] = {1, 1};
          const Aint disp[] = {mul(mul(c, kk), row), 0};
          const Datatype parts[] = {loop, run(t, row, last * kk, last_len)};
          sel = create_struct(bl, disp, parts);
        }
        break;
      }
    }
    row = mul(row, g);
    t = create_resized(sel, 0, row);
  }

  TypeContents ct{Combiner::Darray, {size, rank, static_cast<Count>(nd)}, {}, {old}};
  for (Count v : gsizes) ct.ints.push_back(v);
  for (Distribution v : distribs) ct.ints.push_back(static_cast<int>(v));
  for (int v : dargs) ct.ints.push_back(v);
  for (int v : psizes) ct.ints.push_back(v);
  ct.ints.push_back(order == Order::C ? 0 : 1);
  t.relabel(std::move(ct));
  return t;
}

}  // namespace nmad::mpi
