#pragma once
// Private to the datatype engine (not part of its contract, datatype.hpp):
// the type tree behind a Datatype handle. A node is built once by a
// constructor (datatype.cpp), which computes its size and bounds; commit
// flattens it into (offset, length) blocks, or leaves it a tree when that
// list would be too long. Packing (pack.cpp) walks either form. Nodes are
// immutable once built except for the forms built lazily under `mu`.
#include "mpi_layer/datatype/datatype.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>

namespace nmad::mpi {

// Every engine error goes through here (a DatatypeError with its class).
[[noreturn]] inline void fail(DatatypeErrc c, const std::string& what) {
  throw DatatypeError(c, "nmad::mpi datatype: " + what);
}

inline Count checked_mul(Count a, Count b, const char* what) {
  Count r;
  if (__builtin_mul_overflow(a, b, &r)) fail(DatatypeErrc::invalid_count, std::string(what) + " overflows");
  return r;
}
inline Count checked_add(Count a, Count b, const char* what) {
  Count r;
  if (__builtin_add_overflow(a, b, &r)) fail(DatatypeErrc::invalid_count, std::string(what) + " overflows");
  return r;
}

inline void check_nonneg_count(Count c) {
  if (c < 0) fail(DatatypeErrc::invalid_count, "negative count " + std::to_string(c));
}
inline void check_blocklength(Count b) {
  if (b < 0) fail(DatatypeErrc::negative_blocklength, "negative blocklength " + std::to_string(b));
}

// Types whose flattened form would exceed this many blocks per element stay
// in tree form (see "Cost" in datatype.hpp). Set by set_flat_block_limit.
extern std::atomic<Count> g_flat_block_limit;

struct TypeImpl {
  // One component: `repeat` groups (group r at byte displacement
  // disp + r * stride), each group `blocklength` consecutive copies of `child`
  // (copy k at + k * child extent). vector/hvector use one part with
  // repeat = count, so construction is O(1) whatever the count: this is the
  // (count, stride, sub-type) loop node packing evaluates lazily.
  struct Part {
    std::shared_ptr<TypeImpl> child;
    Count blocklength;
    Aint disp;
    Count repeat = 1;
    Aint stride = 0;
  };

  Combiner combiner = Combiner::Named;
  std::optional<BasicType> basic;
  std::vector<Part> parts;
  TypeContents contents{Combiner::Named, {}, {}, {}};

  // Computed at construction.
  Count size = 0;
  Count nelements = 0;
  Aint lb = 0, ub = 0, true_lb = 0, true_ub = 0;
  bool has_entries = false;   // type map non-empty (data or markers)
  bool lb_sticky = false, ub_sticky = false;
  std::size_t align = 1;
  std::optional<BasicType> uniform;  // every data entry has this basic type

  // Built once (ensure_flat, at commit): either the flat block list (small
  // types) or, when that list would exceed g_flat_block_limit blocks,
  // nothing but `part_start` (tree form, walked by walk_tree).
  std::once_flag flat_once;
  bool tree = false;         // not flattened: pack by walking `parts`
  std::vector<Block> flat;   // when !tree
  std::vector<Aint> prefix;  // packed offset of each flat block
  std::vector<Count> part_start;  // packed offset of each part in one element
  std::atomic<bool> committed{false};
  // Built on first use (element_runs, for reductions; only when `uniform`).
  std::once_flag eruns_once;
  std::vector<ElementRun> eruns;

  void ensure_flat() {
    std::call_once(flat_once, [this] { build_flat(); });
  }
  void ensure_eruns() {
    std::call_once(eruns_once, [this] { build_eruns(); });
  }

  static void emit(std::vector<Block>& out, Aint off, Aint len) {
    if (len == 0) return;
    if (!out.empty() && out.back().offset + out.back().length == off) {
      out.back().length += len;
    } else {
      out.push_back(Block{off, len});
    }
  }
  static void emit_erun(std::vector<ElementRun>& out, Aint off, Count n, Aint bext) {
    if (n == 0) return;
    if (!out.empty() && out.back().offset + static_cast<Aint>(out.back().count) * bext == off) {
      out.back().count += n;
    } else {
      out.push_back(ElementRun{off, n});
    }
  }
  static Count sat_add(Count a, Count b) {
    Count r;
    return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Count>::max() : r;
  }
  static Count sat_mul(Count a, Count b) {
    Count r;
    return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<Count>::max() : r;
  }
  bool dense() const {  // one block exactly one extent long: copies abut
    return !tree && flat.size() == 1 && flat[0].length == ub - lb;
  }

  // Upper bound of the flat block count, from the children's flat forms
  // (infinite if a child stayed a tree). Prepares every child (ensure_flat).
  // O(number of parts).
  Count estimate_blocks() {
    Count est = 0;
    for (const Part& p : parts) {
      if (p.blocklength == 0 || p.repeat == 0) continue;
      TypeImpl& c = *p.child;
      c.ensure_flat();
      if (c.size == 0) continue;
      if (c.tree) {  // (every child is still prepared: packing may reach it)
        est = std::numeric_limits<Count>::max();
        continue;
      }
      const Aint ext = c.ub - c.lb;
      Count n;
      if (c.dense())
        n = (p.repeat == 1 || p.stride == static_cast<Aint>(p.blocklength) * ext) ? 1 : p.repeat;
      else
        n = sat_mul(sat_mul(p.repeat, p.blocklength), static_cast<Count>(c.flat.size()));
      est = sat_add(est, n);
    }
    return est;
  }

  void build_flat() {
    if (basic) {
      const BasicTypeInfo& bi = basic_type_info(*basic);
      for (int m = 0; m < bi.num_members; ++m)
        emit(flat, static_cast<Aint>(bi.members[m].offset), static_cast<Aint>(bi.members[m].size));
    } else {
      Count at = 0;
      part_start.reserve(parts.size());
      for (const Part& p : parts) {
        part_start.push_back(at);
        at += p.blocklength * p.repeat * p.child->size;
      }
      if (estimate_blocks() > g_flat_block_limit.load(std::memory_order_relaxed)) {
        tree = true;
        return;
      }
      for (const Part& p : parts) {
        if (p.blocklength == 0 || p.repeat == 0) continue;
        const TypeImpl& c = *p.child;
        if (c.size == 0) continue;
        const Aint ext = c.ub - c.lb;
        if (c.dense() && (p.repeat == 1 || p.stride == static_cast<Aint>(p.blocklength) * ext)) {
          emit(flat, p.disp + c.flat[0].offset, static_cast<Aint>(p.blocklength * p.repeat) * ext);
          continue;
        }
        for (Count r = 0; r < p.repeat; ++r) {
          const Aint gbase = p.disp + static_cast<Aint>(r) * p.stride;
          if (c.dense()) {
            emit(flat, gbase + c.flat[0].offset, static_cast<Aint>(p.blocklength) * ext);
            continue;
          }
          for (Count k = 0; k < p.blocklength; ++k) {
            const Aint base = gbase + static_cast<Aint>(k) * ext;
            for (const Block& b : c.flat) emit(flat, base + b.offset, b.length);
          }
        }
      }
    }
    prefix.reserve(flat.size());
    Aint acc = 0;
    for (const Block& b : flat) {
      prefix.push_back(acc);
      acc += b.length;
    }
  }

  void build_eruns() {
    if (!uniform) return;
    if (basic) {
      eruns.push_back(ElementRun{0, 1});
      return;
    }
    const Aint bext = static_cast<Aint>(basic_type_info(*uniform).extent);
    for (const Part& p : parts) {
      if (p.blocklength == 0 || p.repeat == 0) continue;
      TypeImpl& c = *p.child;
      if (c.size == 0) continue;
      c.ensure_eruns();
      const Aint ext = c.ub - c.lb;
      const bool edense = c.eruns.size() == 1 && static_cast<Aint>(c.eruns[0].count) * bext == ext;
      if (edense && (p.repeat == 1 || p.stride == static_cast<Aint>(p.blocklength) * ext)) {
        emit_erun(eruns, p.disp + c.eruns[0].offset, c.eruns[0].count * p.blocklength * p.repeat, bext);
        continue;
      }
      for (Count r = 0; r < p.repeat; ++r) {
        const Aint gbase = p.disp + static_cast<Aint>(r) * p.stride;
        if (edense) {
          emit_erun(eruns, gbase + c.eruns[0].offset, c.eruns[0].count * p.blocklength, bext);
          continue;
        }
        for (Count k = 0; k < p.blocklength; ++k) {
          const Aint base = gbase + static_cast<Aint>(k) * ext;
          for (const ElementRun& e : c.eruns) emit_erun(eruns, base + e.offset, e.count, bext);
        }
      }
    }
  }

  // MPI_Get_elements on the first nbytes of a packed stream of these
  // elements, by descending the tree: O(depth * parts), no flat form needed.
  std::optional<Count> elements_in(Count nbytes) const {
    if (size == 0) return nbytes == 0 ? std::optional<Count>(0) : std::nullopt;
    Count elems = (nbytes / size) * nelements;
    Count rem = nbytes % size;
    if (rem == 0) return elems;
    if (basic) {  // inside one basic object: only a pair's first member ends cleanly
      const BasicTypeInfo& bi = basic_type_info(*basic);
      if (bi.num_members == 2 && rem == static_cast<Count>(bi.members[0].size)) return elems + 1;
      return std::nullopt;
    }
    for (const Part& p : parts) {
      const TypeImpl& c = *p.child;
      const Count copies = p.blocklength * p.repeat;
      const Count psize = copies * c.size;
      if (rem >= psize) {
        elems += copies * c.nelements;
        rem -= psize;
        continue;
      }
      const std::optional<Count> sub = c.elements_in(rem);
      if (!sub) return std::nullopt;
      return elems + *sub;
    }
    return rem == 0 ? std::optional<Count>(elems) : std::nullopt;
  }

  // Computes size/bounds/alignment from `parts`; `pad_epsilon` for structs.
  void compute_bounds(bool pad_epsilon) {
    size = 0;
    nelements = 0;
    align = 1;
    uniform.reset();
    bool mixed = false;
    bool any_sticky_lb = false, any_sticky_ub = false, any_entry = false, any_data = false;
    Aint slb = std::numeric_limits<Aint>::max(), sub = std::numeric_limits<Aint>::min();
    Aint dlb = std::numeric_limits<Aint>::max(), dub = std::numeric_limits<Aint>::min();
    Aint tlb = std::numeric_limits<Aint>::max(), tub = std::numeric_limits<Aint>::min();
    for (const Part& p : parts) {
      const TypeImpl& c = *p.child;
      if (p.blocklength == 0 || p.repeat == 0 || !c.has_entries) continue;
      align = std::max(align, c.align);
      const Count copies = checked_mul(p.blocklength, p.repeat, "type size");
      size = checked_add(size, checked_mul(copies, c.size, "type size"), "type size");
      nelements = checked_add(nelements, checked_mul(copies, c.nelements, "element count"),
                              "element count");
      const Aint ext = c.ub - c.lb;
      const Aint last = checked_mul(p.blocklength - 1, ext, "displacement");
      const Aint lastr = checked_mul(p.repeat - 1, p.stride, "displacement");
      const Aint lo = p.disp + std::min<Aint>(0, last) + std::min<Aint>(0, lastr);
      const Aint hi = p.disp + std::max<Aint>(0, last) + std::max<Aint>(0, lastr);
      any_entry = true;
      if (c.lb_sticky) {
        any_sticky_lb = true;
        slb = std::min(slb, lo + c.lb);
      } else {
        dlb = std::min(dlb, lo + c.lb);
      }
      if (c.ub_sticky) {
        any_sticky_ub = true;
        sub = std::max(sub, hi + c.ub);
      } else {
        dub = std::max(dub, hi + c.ub);
      }
      if (c.size > 0) {
        any_data = true;
        tlb = std::min(tlb, lo + c.true_lb);
        tub = std::max(tub, hi + c.true_ub);
        if (!c.uniform || (uniform && *uniform != *c.uniform)) mixed = true;
        if (!uniform) uniform = c.uniform;
      }
    }
    if (mixed) uniform.reset();
    has_entries = any_entry;
    lb_sticky = any_sticky_lb;
    ub_sticky = any_sticky_ub;
    if (!any_entry) {
      lb = ub = true_lb = true_ub = 0;
      return;
    }
    lb = any_sticky_lb ? slb : dlb;
    ub = any_sticky_ub ? sub : dub;
    if (any_data) {
      true_lb = tlb;
      true_ub = tub;
    } else {
      true_lb = true_ub = 0;
    }
    if (pad_epsilon && !any_sticky_lb && !any_sticky_ub && align > 1) {
      const Aint ext = ub - lb;
      const Aint a = static_cast<Aint>(align);
      const Aint rem = ((ext % a) + a) % a;
      if (rem != 0) ub += a - rem;
    }
  }
};

}  // namespace nmad::mpi
