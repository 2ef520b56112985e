// RMA operations: MPI_Put, MPI_Get, MPI_Accumulate, MPI_Get_accumulate,
// MPI_Fetch_and_op, MPI_Compare_and_swap, their request-based forms and
// their large-count (_c) forms. One function, issue(), checks the
// arguments and the epoch, flattens the target datatype into blocks and
// takes the direct path (this process's memory, or a shared segment) or
// the message path (rma.hpp).
#include <atomic>
#include <cstring>
#include <thread>

#include "mpi_layer/rma/rma.hpp"

namespace nmad::mpi::rma {

namespace {

struct op_args {
  kind k = kind::put;
  const void* origin = nullptr;
  MPI_Count ocount = 0;
  MPI_Datatype otype = MPI_BYTE;
  void* result = nullptr;
  MPI_Count rcount = 0;
  MPI_Datatype rtype = MPI_BYTE;
  const void* compare = nullptr;
  int target = 0;
  MPI_Aint disp = 0;
  MPI_Count tcount = 0;
  MPI_Datatype ttype = MPI_BYTE;
  MPI_Op op = MPI_REPLACE;
};

// A datatype argument: live and committed.
int need_type(MPI_Datatype h, const char* what, Datatype& out, std::string& detail) {
  if (check_datatype(h, out, detail) != MPI_SUCCESS) {
    detail = std::string(what) + ": " + detail;
    return MPI_ERR_TYPE;
  }
  return MPI_SUCCESS;
}

// The origin's data as packed bytes: in place when contiguous.
const std::byte* packed(const void* buf, MPI_Count count, const Datatype& d, std::vector<std::byte>& stage) {
  const auto bytes = static_cast<std::size_t>(count * d.size());
  if (bytes == 0) return nullptr;
  if (d.is_contiguous()) return static_cast<const std::byte*>(buf) + d.true_lb();
  stage.resize(bytes);
  Count pos = 0;
  d.pack(buf, count, stage.data(), static_cast<Count>(bytes), pos);
  return stage.data();
}

// Unpacks len packed bytes into count elements of d at buf.
void unpack_into(const std::byte* data, std::size_t len, void* buf, MPI_Count count, const Datatype& d) {
  if (len == 0) return;
  Count pos = 0;
  d.unpack(data, static_cast<Count>(len), pos, buf, count);
}

// The blocks of count elements of d, relative to the target address.
void flatten(const Datatype& d, MPI_Count count, std::vector<wire_block>& out) {
  if (count == 0 || d.size() == 0) return;
  if (d.is_contiguous()) {
    out.push_back({static_cast<std::int64_t>(d.true_lb()), static_cast<std::int64_t>(count * d.size())});
    return;
  }
  constexpr std::uintptr_t kOrigin = std::uintptr_t{1} << 44;
  d.for_each_block(reinterpret_cast<const void*>(kOrigin), count, [&](const void* p, std::size_t n) {
    const auto off = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) - kOrigin);
    if (!out.empty() && out.back().off + out.back().len == off)
      out.back().len += static_cast<std::int64_t>(n);
    else
      out.push_back({off, static_cast<std::int64_t>(n)});
  });
}

// Spin lock of a direct target's accumulates.
struct acc_guard {
  std::atomic<std::uint32_t>& word;
  explicit acc_guard(std::atomic<std::uint32_t>& w) : word(w) {
    std::uint32_t expected = 0;
    while (!word.compare_exchange_weak(expected, 1, std::memory_order_acquire)) {
      expected = 0;
      std::this_thread::yield();
    }
  }
  ~acc_guard() { word.store(0, std::memory_order_release); }
};

bool in_epoch_locked(const window& w, int t) {
  if (w.fence_open || w.lock_all || w.lock_type[static_cast<std::size_t>(t)] != 0) return true;
  if (w.access_pscw)
    for (int g : w.access_group)
      if (g == t) return true;
  return false;
}

// Performs a on memory mapped here (own window, or a direct window).
int apply_here(window& w, const op_args& a, std::byte* at, const std::vector<wire_block>& blocks,
               const std::byte* data, std::size_t len, std::size_t result_len, const Datatype& rtype, PredefinedOp pop,
               BasicType basic) {
  const std::size_t n = blocks.size();
  std::vector<std::byte> tmp;
  switch (a.k) {
    case kind::put:
      scatter_blocks(at, blocks.data(), n, data);
      return MPI_SUCCESS;
    case kind::get:
      if (rtype.is_contiguous()) {  // straight into the caller's memory
        gather_blocks(at, blocks.data(), n, static_cast<std::byte*>(a.result) + rtype.true_lb());
        return MPI_SUCCESS;
      }
      tmp.resize(result_len);
      gather_blocks(at, blocks.data(), n, tmp.data());
      unpack_into(tmp.data(), result_len, a.result, a.rcount, rtype);
      return MPI_SUCCESS;
    default:
      break;
  }
  // Accumulates: atomic with every other accumulate on that memory.
  const bool want_old = a.k != kind::acc;
  tmp.resize(want_old ? result_len : 0);
  {
    std::unique_lock<std::mutex> local;
    std::optional<acc_guard> shared;
    if (w.direct)
      shared.emplace(w.lines[a.target].acc_lock);
    else
      local = std::unique_lock(w.data_mu);
    if (a.k == kind::cas) {
      std::byte* p = at + (n ? blocks[0].off : 0);
      const std::size_t sz = result_len;
      std::memcpy(tmp.data(), p, sz);
      if (std::memcmp(p, a.compare, sz) == 0) std::memcpy(p, data, sz);
    } else if (pop == PredefinedOp::NoOp) {
      if (want_old) gather_blocks(at, blocks.data(), n, tmp.data());
    } else {
      accumulate_blocks(at, blocks.data(), n, data, len, pop, basic, want_old ? tmp.data() : nullptr);
    }
  }
  if (want_old) unpack_into(tmp.data(), result_len, a.result, a.rcount, rtype);
  return MPI_SUCCESS;
}

// Checks and starts one operation. rec_out (request-based forms) receives
// the record when the operation went by message (null: it is complete).
int issue(const char* fn, MPI_Win win, const op_args& a, std::shared_ptr<op_record>* rec_out) {
  int rc = MPI_SUCCESS;
  auto wp = need_window(fn, win, rc);
  if (!wp) return rc;
  window& w = *wp;
  auto fail = [&](int code, const std::string& d) { return raise_win(fn, &w, code, d); };
  if (a.target != MPI_PROC_NULL && (a.target < 0 || a.target >= w.size))
    return fail(MPI_ERR_RANK, "target rank " + std::to_string(a.target) + " is not in the window's group of " +
                                  std::to_string(w.size));
  if (a.ocount < 0 || a.rcount < 0 || a.tcount < 0) return fail(MPI_ERR_COUNT, "negative count");
  std::string detail;
  Datatype ot, rt, tt;
  const bool has_origin = a.k == kind::put || a.k == kind::acc || a.k == kind::get_acc || a.k == kind::cas;
  const bool has_result = a.k == kind::get || a.k == kind::get_acc || a.k == kind::cas;
  Op op;
  PredefinedOp pop = PredefinedOp::Replace;
  if (a.k == kind::acc || a.k == kind::get_acc) {
    if (!op_of(a.op, op)) return fail(MPI_ERR_OP, "invalid op " + std::to_string(a.op));
    if (!op.is_predefined())
      return fail(MPI_ERR_OP, op_display_name(a.op) + ": accumulates take predefined ops only");
    pop = op.predefined_op();
    if (a.k == kind::acc && pop == PredefinedOp::NoOp)
      return fail(MPI_ERR_OP, "MPI_NO_OP is for MPI_Get_accumulate and MPI_Fetch_and_op, not MPI_Accumulate");
  }
  if (a.disp < 0 && a.target != MPI_PROC_NULL && w.fl != flavor::dynamic)
    return fail(MPI_ERR_DISP, "negative target displacement " + std::to_string(a.disp));
  if (a.k == kind::cas) {
    // C integer, logical, byte and multi-language types only (MPI 4.1 12.3.4).
    const std::optional<BasicType> b = basic_of(a.ttype);
    bool ok = false;
    if (b) switch (*b) {
        case BasicType::Char: case BasicType::SignedChar: case BasicType::UnsignedChar: case BasicType::Byte:
        case BasicType::Short: case BasicType::UnsignedShort: case BasicType::Int: case BasicType::Unsigned:
        case BasicType::Long: case BasicType::UnsignedLong: case BasicType::LongLong:
        case BasicType::UnsignedLongLong: case BasicType::CBool: case BasicType::Int8: case BasicType::Int16:
        case BasicType::Int32: case BasicType::Int64: case BasicType::UInt8: case BasicType::UInt16:
        case BasicType::UInt32: case BasicType::UInt64: case BasicType::Aint: case BasicType::Offset:
        case BasicType::Count: case BasicType::WChar:
          ok = true;
          break;
        default:
          break;
      }
    if (!ok)
      return fail(MPI_ERR_TYPE, type_handle_text(a.ttype) + ": MPI_Compare_and_swap takes an integer, logical, "
                                                          "byte or multi-language predefined type");
  }
  const bool origin_used = has_origin && !(a.k == kind::get_acc && pop == PredefinedOp::NoOp);
  if (origin_used)
    if (int e = need_type(a.otype, "origin datatype", ot, detail)) return fail(e, detail);
  if (has_result)
    if (int e = need_type(a.rtype, "result datatype", rt, detail)) return fail(e, detail);
  if (int e = need_type(a.ttype, "target datatype", tt, detail)) return fail(e, detail);
  BasicType basic = BasicType::Byte;
  if (a.k == kind::acc || a.k == kind::get_acc || a.k == kind::cas) {
    const std::optional<BasicType> b = tt.uniform_basic_type();
    if (!b && tt.size() > 0) return fail(MPI_ERR_TYPE, "the target datatype of an accumulate must be built from one basic type");
    if (b) basic = *b;
    if (a.k != kind::cas && pop != PredefinedOp::Replace && pop != PredefinedOp::NoOp && b && !op_allowed(pop, *b))
      return fail(MPI_ERR_OP, op_display_name(a.op) + " is not defined on " + basic_type_info(*b).name);
    if (origin_used && ot.size() > 0 && a.ocount > 0 && a.tcount > 0 && tt.size() > 0 && ot.uniform_basic_type() != b)
      return fail(MPI_ERR_TYPE, "the origin and target datatypes of an accumulate have different basic types");
  }
  const std::size_t tbytes = static_cast<std::size_t>(a.tcount * tt.size());
  if (origin_used && static_cast<std::size_t>(a.ocount * ot.size()) != tbytes)
    return fail(MPI_ERR_TYPE, "the origin data (" + std::to_string(a.ocount * ot.size()) +
                                  " bytes) does not match the target's (" + std::to_string(tbytes) + " bytes)");
  if (has_result && static_cast<std::size_t>(a.rcount * rt.size()) != tbytes)
    return fail(MPI_ERR_TYPE, "the result buffer (" + std::to_string(a.rcount * rt.size()) +
                                  " bytes) does not match the target data (" + std::to_string(tbytes) + " bytes)");
  {
    std::lock_guard g(w.mu);
    if (a.target != MPI_PROC_NULL && !in_epoch_locked(w, a.target))
      return fail(MPI_ERR_RMA_SYNC, "no access epoch is open towards window rank " + std::to_string(a.target) +
                                        " (a fence, MPI_Win_start, a lock or lock_all opens one)");
  }
  if (a.target == MPI_PROC_NULL || tbytes == 0) {
    if (rec_out) rec_out->reset();
    return MPI_SUCCESS;
  }
  const auto ti = static_cast<std::size_t>(a.target);
  const std::int64_t toff = static_cast<std::int64_t>(a.disp) * w.disp_units[ti];
  if (w.fl != flavor::dynamic) {
    const std::int64_t lo = toff + tt.true_lb();
    const std::int64_t hi = toff + static_cast<std::int64_t>(a.tcount - 1) * tt.extent() + tt.true_ub();
    if (lo < 0 || hi > w.sizes[ti])
      return fail(MPI_ERR_RMA_RANGE, "bytes [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                         ") are outside window rank " + std::to_string(a.target) + "'s " +
                                         std::to_string(w.sizes[ti]) + " bytes");
  }
  std::vector<wire_block> blocks;
  flatten(tt, a.tcount, blocks);
  std::vector<std::byte> ostage;
  const std::byte* data = nullptr;
  std::size_t len = 0;
  try {
    if (a.k == kind::cas) {
      ostage.resize(2 * tbytes);
      std::memcpy(ostage.data(), a.compare, tbytes);
      std::memcpy(ostage.data() + tbytes, a.origin, tbytes);
      data = ostage.data();
      len = 2 * tbytes;
    } else if (origin_used) {
      data = packed(a.origin, a.ocount, ot, ostage);
      len = tbytes;
    }
  } catch (const DatatypeError& e) {
    return fail(datatype_error_class(e), e.what());
  }
  const std::size_t result_len = has_result ? tbytes : 0;

  // ---- direct path ----
  if (w.direct && target_failed(w, a.target, detail)) return fail(MPI_ERR_PROC_FAILED, detail);
  if (w.direct || a.target == w.rank) {
    std::byte* at = nullptr;
    if (w.fl == flavor::dynamic) {
      at = reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(toff));
      std::lock_guard g(w.mu);
      std::int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (auto& b : blocks) lo = std::min(lo, b.off), hi = std::max(hi, b.off + b.len);
      if (!attached_covers(w, static_cast<std::uintptr_t>(toff + lo), static_cast<std::uintptr_t>(toff + hi))) return fail(MPI_ERR_RMA_RANGE, "the memory addressed is not attached to the dynamic window");
    } else {
      at = (w.direct ? w.mapped[ti] : static_cast<std::byte*>(w.base)) + toff;
    }
    op_args b = a;
    if (a.k == kind::cas) b.compare = ostage.data();
    const std::byte* d = a.k == kind::cas ? ostage.data() + tbytes : data;
    try {
      apply_here(w, b, at, blocks, d, a.k == kind::cas ? tbytes : len, result_len, rt, pop, basic);
    } catch (const std::exception& e) {
      return fail(MPI_ERR_OTHER, e.what());
    }
    if (rec_out) rec_out->reset();
    return MPI_SUCCESS;
  }

  // ---- message path ----
  auto r = std::make_shared<op_record>();
  r->target = a.target;
  wire_header h{};
  h.kind = static_cast<std::uint8_t>(a.k);
  h.op = static_cast<std::uint8_t>(pop);
  h.basic = static_cast<std::uint8_t>(basic);
  h.nblocks = static_cast<std::uint32_t>(blocks.size());
  h.target_off = toff;
  h.data_len = len;
  h.result_len = result_len;
  const std::size_t bl = blocks.size() * sizeof(wire_block);
  const bool inline_all = sizeof h + bl + len <= kInlineBytes;
  const bool blocks_inline = sizeof h + bl <= kInlineBytes;
  if (!inline_all) h.flags = kFlagFollow | (blocks_inline ? 0u : kFlagBlocksFollow);
  nmad::session& s = *st().session;
  std::lock_guard g(w.mu);
  h.tag = w.take_tag();
  const int world = w.world_of(a.target);
  if (w.lock_all && !w.lock_all_nocheck && !w.lock_sent[ti]) {
    if (int e = send_control_locked(w, a.target, kind::lock, MPI_LOCK_SHARED, detail)) return fail(e, detail);
    w.lock_sent[ti] = true;
  }
  if (a.k == kind::get && result_len > kInlineBytes && rt.is_contiguous()) {
    // Received in place (the data alone; an error is a wire_ack alone).
    h.flags |= kFlagRawAnswer;
    r->wants_answer = true;
    r->raw_answer = true;
    r->result_buf = static_cast<std::byte*>(a.result) + rt.true_lb();
    s.irecv(world, w.tag(static_cast<int>(h.tag)), r->result_buf, result_len, r->answer);
  } else if (has_result) {
    r->wants_answer = true;
    r->answer_bytes.resize(sizeof(wire_ack) + result_len);
    r->result_buf = a.result;
    r->result_count = a.rcount;
    r->result_type = rt;
    s.irecv(world, w.tag(static_cast<int>(h.tag)), r->answer_bytes.data(), r->answer_bytes.size(), r->answer);
  }
  r->wire.resize(sizeof h + (blocks_inline ? bl : 0) + (inline_all ? len : 0));
  std::memcpy(r->wire.data(), &h, sizeof h);
  if (blocks_inline && bl) std::memcpy(r->wire.data() + sizeof h, blocks.data(), bl);
  if (inline_all && len) std::memcpy(r->wire.data() + sizeof h + bl, data, len);
  nmad::errc e = s.isend(world, w.tag(kTagRequest), r->wire.data(), r->wire.size(), r->hdr);
  if (e == nmad::errc::ok && !inline_all) {
    // The follow-up: the blocks (if they did not fit) and the data.
    r->has_follow = true;
    if (blocks_inline && data == ostage.data() && !ostage.empty()) {
      r->follow_bytes = std::move(ostage);
      e = s.isend(world, w.tag(static_cast<int>(h.tag | kFollowTagBit)), r->follow_bytes.data(), len, r->follow);
    } else if (blocks_inline) {
      // Contiguous origin data, sent in place (zero copy for large puts):
      // the caller may not touch it before the operation completes locally.
      e = s.isend(world, w.tag(static_cast<int>(h.tag | kFollowTagBit)), data, len, r->follow);
    } else {
      r->follow_bytes.resize(bl + len);
      std::memcpy(r->follow_bytes.data(), blocks.data(), bl);
      if (len) std::memcpy(r->follow_bytes.data() + bl, data, len);
      e = s.isend(world, w.tag(static_cast<int>(h.tag | kFollowTagBit)), r->follow_bytes.data(), r->follow_bytes.size(), r->follow);
    }
  }
  ++w.sent[ti];
  ++w.unflushed[ti];
  if (e != nmad::errc::ok) {
    w.inflight.push_back(r);
    return fail(from_errc(e), "window rank " + std::to_string(a.target) + " (world rank " + std::to_string(world) +
                                  "): " + r->hdr.error_message());
  }
  w.inflight.push_back(r);
  if (rec_out) *rec_out = r;
  return MPI_SUCCESS;
}

// The request of a request-based operation: done once its record is
// finished (at once for the direct path).
int make_request(const char* fn, MPI_Win win, const op_args& a, MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!request) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null request pointer");
  *request = MPI_REQUEST_NULL;
  std::shared_ptr<op_record> rec;
  if (int e = issue(fn, win, a, &rec)) return e;
  auto w = lookup_window(win);
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->comm = nullptr;
  r->active = true;
  r->poll = [w, rec](request_obj& rq) {
    if (rec) {
      std::lock_guard g(w->mu);
      reap_locked(*w);
      if (!rec->finished) return false;
    }
    empty_status(&rq.local_status);
    if (rec && rec->error != MPI_SUCCESS) rq.local_status.MPI_ERROR = rec->error;
    return true;
  };
  *request = r->handle;
  return MPI_SUCCESS;
}

}  // namespace

}  // namespace nmad::mpi::rma

using namespace nmad::mpi;
using namespace nmad::mpi::rma;

namespace {

op_args put_args(const void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt) {
  op_args a;
  a.k = kind::put;
  a.origin = o, a.ocount = oc, a.otype = ot, a.target = t, a.disp = d, a.tcount = tc, a.ttype = tt;
  return a;
}
op_args get_args(void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt) {
  op_args a;
  a.k = kind::get;
  a.result = o, a.rcount = oc, a.rtype = ot, a.target = t, a.disp = d, a.tcount = tc, a.ttype = tt;
  return a;
}
op_args acc_args(const void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt,
                 MPI_Op op) {
  op_args a = put_args(o, oc, ot, t, d, tc, tt);
  a.k = kind::acc;
  a.op = op;
  return a;
}
op_args gacc_args(const void* o, MPI_Count oc, MPI_Datatype ot, void* r, MPI_Count rc, MPI_Datatype rt, int t,
                  MPI_Aint d, MPI_Count tc, MPI_Datatype tt, MPI_Op op) {
  op_args a = acc_args(o, oc, ot, t, d, tc, tt, op);
  a.k = kind::get_acc;
  a.result = r, a.rcount = rc, a.rtype = rt;
  return a;
}

}  // namespace

extern "C" {

int PMPI_Put(const void* o, int oc, MPI_Datatype ot, int t, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win win) {
  return issue("MPI_Put", win, put_args(o, oc, ot, t, d, tc, tt), nullptr);
}
int PMPI_Put_c(const void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt,
               MPI_Win win) {
  return issue("MPI_Put_c", win, put_args(o, oc, ot, t, d, tc, tt), nullptr);
}
int PMPI_Get(void* o, int oc, MPI_Datatype ot, int t, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win win) {
  return issue("MPI_Get", win, get_args(o, oc, ot, t, d, tc, tt), nullptr);
}
int PMPI_Get_c(void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt,
               MPI_Win win) {
  return issue("MPI_Get_c", win, get_args(o, oc, ot, t, d, tc, tt), nullptr);
}
int PMPI_Accumulate(const void* o, int oc, MPI_Datatype ot, int t, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Op op,
                    MPI_Win win) {
  return issue("MPI_Accumulate", win, acc_args(o, oc, ot, t, d, tc, tt, op), nullptr);
}
int PMPI_Accumulate_c(const void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc,
                      MPI_Datatype tt, MPI_Op op, MPI_Win win) {
  return issue("MPI_Accumulate_c", win, acc_args(o, oc, ot, t, d, tc, tt, op), nullptr);
}
int PMPI_Get_accumulate(const void* o, int oc, MPI_Datatype ot, void* r, int rc, MPI_Datatype rt, int t, MPI_Aint d,
                        int tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
  return issue("MPI_Get_accumulate", win, gacc_args(o, oc, ot, r, rc, rt, t, d, tc, tt, op), nullptr);
}
int PMPI_Get_accumulate_c(const void* o, MPI_Count oc, MPI_Datatype ot, void* r, MPI_Count rc, MPI_Datatype rt,
                          int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
  return issue("MPI_Get_accumulate_c", win, gacc_args(o, oc, ot, r, rc, rt, t, d, tc, tt, op), nullptr);
}
int PMPI_Fetch_and_op(const void* o, void* r, MPI_Datatype dt, int t, MPI_Aint d, MPI_Op op, MPI_Win win) {
  return issue("MPI_Fetch_and_op", win, gacc_args(o, 1, dt, r, 1, dt, t, d, 1, dt, op), nullptr);
}
int PMPI_Compare_and_swap(const void* o, const void* c, void* r, MPI_Datatype dt, int t, MPI_Aint d, MPI_Win win) {
  op_args a = gacc_args(o, 1, dt, r, 1, dt, t, d, 1, dt, MPI_REPLACE);
  a.k = kind::cas;
  a.compare = c;
  if (!c || !o || !r) {
    if (!check_initialized("MPI_Compare_and_swap")) return MPI_ERR_OTHER;
    auto w = lookup_window(win);
    return raise_win("MPI_Compare_and_swap", w.get(), MPI_ERR_BUFFER, "null origin, compare or result buffer");
  }
  return issue("MPI_Compare_and_swap", win, a, nullptr);
}

int PMPI_Rput(const void* o, int oc, MPI_Datatype ot, int t, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win win,
              MPI_Request* request) {
  return make_request("MPI_Rput", win, put_args(o, oc, ot, t, d, tc, tt), request);
}
int PMPI_Rput_c(const void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt,
                MPI_Win win, MPI_Request* request) {
  return make_request("MPI_Rput_c", win, put_args(o, oc, ot, t, d, tc, tt), request);
}
int PMPI_Rget(void* o, int oc, MPI_Datatype ot, int t, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win win,
              MPI_Request* request) {
  return make_request("MPI_Rget", win, get_args(o, oc, ot, t, d, tc, tt), request);
}
int PMPI_Rget_c(void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt,
                MPI_Win win, MPI_Request* request) {
  return make_request("MPI_Rget_c", win, get_args(o, oc, ot, t, d, tc, tt), request);
}
int PMPI_Raccumulate(const void* o, int oc, MPI_Datatype ot, int t, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Op op,
                     MPI_Win win, MPI_Request* request) {
  return make_request("MPI_Raccumulate", win, acc_args(o, oc, ot, t, d, tc, tt, op), request);
}
int PMPI_Raccumulate_c(const void* o, MPI_Count oc, MPI_Datatype ot, int t, MPI_Aint d, MPI_Count tc,
                       MPI_Datatype tt, MPI_Op op, MPI_Win win, MPI_Request* request) {
  return make_request("MPI_Raccumulate_c", win, acc_args(o, oc, ot, t, d, tc, tt, op), request);
}
int PMPI_Rget_accumulate(const void* o, int oc, MPI_Datatype ot, void* r, int rc, MPI_Datatype rt, int t,
                         MPI_Aint d, int tc, MPI_Datatype tt, MPI_Op op, MPI_Win win, MPI_Request* request) {
  return make_request("MPI_Rget_accumulate", win, gacc_args(o, oc, ot, r, rc, rt, t, d, tc, tt, op), request);
}
int PMPI_Rget_accumulate_c(const void* o, MPI_Count oc, MPI_Datatype ot, void* r, MPI_Count rc, MPI_Datatype rt,
                           int t, MPI_Aint d, MPI_Count tc, MPI_Datatype tt, MPI_Op op, MPI_Win win,
                           MPI_Request* request) {
  return make_request("MPI_Rget_accumulate_c", win, gacc_args(o, oc, ot, r, rc, rt, t, d, tc, tt, op), request);
}

}  // extern "C"

#pragma weak MPI_Put = PMPI_Put
#pragma weak MPI_Put_c = PMPI_Put_c
#pragma weak MPI_Get = PMPI_Get
#pragma weak MPI_Get_c = PMPI_Get_c
#pragma weak MPI_Accumulate = PMPI_Accumulate
#pragma weak MPI_Accumulate_c = PMPI_Accumulate_c
#pragma weak MPI_Get_accumulate = PMPI_Get_accumulate
#pragma weak MPI_Get_accumulate_c = PMPI_Get_accumulate_c
#pragma weak MPI_Fetch_and_op = PMPI_Fetch_and_op
#pragma weak MPI_Compare_and_swap = PMPI_Compare_and_swap
#pragma weak MPI_Rput = PMPI_Rput
#pragma weak MPI_Rput_c = PMPI_Rput_c
#pragma weak MPI_Rget = PMPI_Rget
#pragma weak MPI_Rget_c = PMPI_Rget_c
#pragma weak MPI_Raccumulate = PMPI_Raccumulate
#pragma weak MPI_Raccumulate_c = PMPI_Raccumulate_c
#pragma weak MPI_Rget_accumulate = PMPI_Rget_accumulate
#pragma weak MPI_Rget_accumulate_c = PMPI_Rget_accumulate_c
