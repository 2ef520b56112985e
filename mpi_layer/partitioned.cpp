// Partitioned point-to-point communication (MPI 4.0 chapter 4):
// MPI_Psend_init, MPI_Precv_init, MPI_Pready(_range, _list), MPI_Parrived.
//
// One partitioned transfer is one engine message (session::psend_begin /
// precv): MPI_Start opens it, each MPI_Pready hands the partition to the
// engine as a piece of that message (session::psend_piece, any thread, any
// order), so the active strategy decides how partitions ready close
// together leave (`aggreg`: in one packet; `default`: each at once; a
// partition of the rendezvous size by rendezvous, straight from the user's
// buffer). The receive sees the message as its own partitions
// (session::precv's parts), which may be more or fewer than the sender's:
// MPI_Parrived asks the engine whether every byte of a partition is in.
//
// Matching: the k-th MPI_Psend_init on (communicator, destination, tag)
// pairs with the destination's k-th MPI_Precv_init on (communicator,
// source, tag), for good (MPI 4.0 4.2.1: initialisation calls match in
// order). Each pair has an engine context of its own (kPartitionedContext,
// the pair's number k and the communicator's slot), so its messages never
// meet ordinary point-to-point traffic or another pair's, and the n-th
// MPI_Start of the send meets the n-th of the receive.
//
// Datatypes: contiguous layouts go in place; others are packed partition
// by partition at MPI_Pready into a staging image (send), or received into
// one and unpacked partition by partition when MPI_Parrived first sees the
// partition, the rest at completion (receive).
//
// Errors: arguments are checked at init (MPI_ERR_COUNT, MPI_ERR_ARG for a
// negative partition count, MPI_ERR_RANK, MPI_ERR_TAG, MPI_ERR_TYPE);
// MPI_Pready of a partition out of range, already ready in this start, or
// of a request that is not an active partitioned send is MPI_ERR_ARG /
// MPI_ERR_REQUEST; so is MPI_Parrived on a request that is not a
// partitioned receive. A longer message than the receive completes with
// MPI_ERR_TRUNCATE; a dead peer with the engine's error naming it.
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

// Engine context of a partitioned pair: far above the communicators'
// (2 * slot, 2 * slot + 1 < 2 * kContextSlots).
constexpr std::uint32_t kPartitionedContext = 0x80000000u;
constexpr std::uint32_t kMaxPairs = 1u << 21;  // per (communicator, peer, tag)
static_assert(kContextSlots <= 1024, "the pair number sits above 10 bits of slot");

struct part_state {
  bool send = false;
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  int partitions = 0;
  MPI_Count count = 0;            // elements per partition
  Datatype type;                  // the element type (kept alive past MPI_Type_free)
  bool contiguous = true;         // partitions go in place
  std::size_t part_bytes = 0;     // packed bytes of one partition
  std::size_t total = 0;          // partitions * part_bytes
  std::byte* base = nullptr;      // in place: the first partition's first byte
  int world_peer = -1;            // -1: MPI_PROC_NULL
  int tag = 0;
  nmad::tag_t engine_tag = 0;
  std::vector<std::byte> stage;   // non-contiguous: the packed image
  // Send: partitions marked ready in this start. Receive (non-contiguous):
  // partitions unpacked into the user's buffer in this start.
  std::unique_ptr<std::atomic<bool>[]> flags;
  std::mutex unpack_mu;           // receive: unpacking a partition

  Aint stride() const { return static_cast<Aint>(count) * type.extent(); }
  std::byte* image() { return contiguous ? base : stage.data(); }
};

part_state* state_of_request(request_obj* r, request_obj::part_kind k) {
  if (!r || r->partitioned != k) return nullptr;
  return static_cast<part_state*>(r->extra.get());
}

// Unpacks partition p of a non-contiguous receive (once per start).
void unpack_partition(part_state& p, int i) {
  std::lock_guard g(p.unpack_mu);
  if (p.flags[i].load(std::memory_order_relaxed)) return;
  Count pos = 0;
  p.type.unpack(p.stage.data() + static_cast<std::size_t>(i) * p.part_bytes, static_cast<Count>(p.part_bytes), pos,
                static_cast<std::byte*>(p.rbuf) + static_cast<Aint>(i) * p.stride(), p.count);
  p.flags[i].store(true, std::memory_order_release);
}

int start_partitioned(request_obj& r, part_state& p) {
  nmad::session& s = *st().session;
  for (int i = 0; i < p.partitions; ++i) p.flags[i].store(false, std::memory_order_relaxed);
  empty_status(&r.local_status);
  r.on_complete = [&p](request_obj& rq, std::string& detail) {
    if (p.world_peer < 0) {  // MPI_PROC_NULL
      empty_status(&rq.local_status);
      if (!p.send) rq.local_status.MPI_SOURCE = MPI_PROC_NULL, rq.local_status.MPI_TAG = MPI_ANY_TAG;
      return MPI_SUCCESS;
    }
    const nmad::errc ec = rq.engine.error();
    const int err = ec == nmad::errc::ok ? MPI_SUCCESS : from_errc(ec);
    if (ec != nmad::errc::ok) detail = rq.engine.error_message();
    if (p.send) {
      empty_status(&rq.local_status);
      rq.local_status.MPI_ERROR = err;
      return err;
    }
    fill_status(&rq.local_status, rq.comm, rq.engine.status(), err);
    rq.local_status.MPI_TAG = p.tag;
    // Non-contiguous: what Parrived did not unpack yet (what arrived of a
    // shorter message, all of a truncated one: as a receive does).
    if (!p.contiguous && (ec == nmad::errc::ok || ec == nmad::errc::truncated)) {
      const std::size_t got = std::min<std::size_t>(rq.engine.status().length, p.total);
      for (int i = 0; i < p.partitions; ++i)
        if (static_cast<std::size_t>(i + 1) * p.part_bytes <= got) unpack_partition(p, i);
    }
    return err;
  };
  if (p.world_peer < 0) {
    r.local_done = true;
    empty_status(&r.local_status);
    return MPI_SUCCESS;
  }
  // (Errors found here, a dead peer, complete the engine request with them.)
  if (p.send) s.psend_begin(p.world_peer, p.engine_tag, p.total, r.engine, send_options_of(*r.comm));
  else s.precv(p.world_peer, p.engine_tag, p.image(), p.total, p.part_bytes, r.engine);
  return MPI_SUCCESS;
}

int make_partitioned(const char* fn, bool send, const void* buf, int partitions, MPI_Count count,
                     MPI_Datatype datatype, int peer, int tag, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  if (partitions < 0) return mpi_raise(fn, c, MPI_ERR_ARG, "partitions " + std::to_string(partitions) + " is negative");
  if (count < 0) return mpi_raise(fn, c, MPI_ERR_COUNT, "count " + std::to_string(count) + " is negative");
  if (!(peer == MPI_PROC_NULL || (peer >= 0 && peer < c->size())))
    return mpi_raise(fn, c, MPI_ERR_RANK,
                     "rank " + std::to_string(peer) + " not in [0, " + std::to_string(c->size()) + ")" +
                         (peer == MPI_ANY_SOURCE ? " (partitioned receives name their source)" : ""));
  if (tag < 0 || tag > MPI_TAG_UB_VALUE)
    return mpi_raise(fn, c, MPI_ERR_TAG,
                     "tag " + std::to_string(tag) + (tag == MPI_ANY_TAG ? " (partitioned receives name their tag)" : ""));
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  std::string detail;
  auto p = std::make_shared<part_state>();
  if (int e = lookup_comm_type(datatype, p->type, detail)) return mpi_raise(fn, c, e, detail);
  const Count size = p->type.size();
  const Count part_bytes = count * size;
  if (size != 0 && (count > static_cast<MPI_Count>(std::numeric_limits<std::int64_t>::max() / size) ||
                    (partitions > 0 && part_bytes > std::numeric_limits<std::int64_t>::max() / partitions)))
    return mpi_raise(fn, c, MPI_ERR_COUNT, std::to_string(partitions) + " partitions of " + std::to_string(count) +
                                               " elements overflow a byte count");
  if (partitions > 0 && count > 0 && !buf && p->type.true_lb() == 0 && plain_size(datatype) >= 0)
    return mpi_raise(fn, c, MPI_ERR_BUFFER, "null buffer with " + std::to_string(count) + " elements per partition");
  p->send = send;
  p->sbuf = buf;
  p->rbuf = const_cast<void*>(buf);
  p->partitions = partitions;
  p->count = count;
  p->part_bytes = static_cast<std::size_t>(part_bytes);
  p->total = p->part_bytes * static_cast<std::size_t>(partitions);
  // In place when all partitions * count elements are one block.
  p->contiguous = p->type.is_contiguous() && p->type.extent() == static_cast<Aint>(size);
  if (p->contiguous) p->base = static_cast<std::byte*>(const_cast<void*>(buf)) + p->type.true_lb();
  else p->stage.resize(p->total);
  p->flags = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(std::max(partitions, 1)));
  p->tag = tag;
  if (peer != MPI_PROC_NULL) {
    std::uint32_t pair = 0;
    {
      std::lock_guard g(st().mu);
      pair = c->part_inits[{peer, tag, send ? 0 : 1}]++;
    }
    if (pair >= kMaxPairs)
      return mpi_raise(fn, c, MPI_ERR_INTERN,
                       "more than " + std::to_string(kMaxPairs) + " partitioned requests with rank " +
                           std::to_string(peer) + " and tag " + std::to_string(tag));
    p->world_peer = c->world_of[peer];
    p->engine_tag = engine_tag(kPartitionedContext | (pair << 10) | static_cast<std::uint32_t>(c->slot), tag);
  }
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->persistent = true;
  r->active = false;
  r->comm = c;
  r->peer = peer;
  r->tag = tag;
  r->partitioned = send ? request_obj::part_kind::send : request_obj::part_kind::recv;
  r->extra = p;
  part_state* ps = p.get();
  r->on_start = [ps](request_obj& rq) { return start_partitioned(rq, *ps); };
  r->poll = [](request_obj& rq) { return rq.engine.completed(); };
  *request = r->handle;
  return MPI_SUCCESS;
}

// Hands partitions [lo, hi) ... of an active partitioned send to the engine.
int ready_one(const char* fn, request_obj& r, part_state& p, int i) {
  if (i < 0 || i >= p.partitions)
    return mpi_raise(fn, r.comm, MPI_ERR_ARG,
                     "partition " + std::to_string(i) + " not in [0, " + std::to_string(p.partitions) + ")");
  if (p.flags[i].exchange(true, std::memory_order_acq_rel))
    return mpi_raise(fn, r.comm, MPI_ERR_ARG, "partition " + std::to_string(i) + " is already ready in this start");
  if (p.world_peer < 0 || p.part_bytes == 0) return MPI_SUCCESS;
  const std::size_t off = static_cast<std::size_t>(i) * p.part_bytes;
  if (!p.contiguous) {
    Count pos = 0;
    p.type.pack(static_cast<const std::byte*>(p.sbuf) + static_cast<Aint>(i) * p.stride(), p.count,
                p.stage.data() + off, static_cast<Count>(p.part_bytes), pos);
  }
  const nmad::errc e = st().session->psend_piece(r.engine, off, p.image() + off, p.part_bytes);
  // A failed peer completes the request with the error (reported by Wait/Test).
  if (e != nmad::errc::ok && e != nmad::errc::peer_failed)
    return mpi_raise(fn, r.comm, from_errc(e), "the engine refused partition " + std::to_string(i));
  return MPI_SUCCESS;
}

// The active partitioned send behind a handle, or an error raised.
int send_request(const char* fn, MPI_Request request, request_obj*& r, part_state*& p) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  r = lookup_request(request);
  p = state_of_request(r, request_obj::part_kind::send);
  if (!p) return mpi_raise(fn, r ? r->comm : nullptr, MPI_ERR_REQUEST, "not a partitioned send request");
  if (!r->active) return mpi_raise(fn, r->comm, MPI_ERR_REQUEST, "the partitioned send is not started (MPI_Start)");
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Psend_init(const void* buf, int partitions, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return make_partitioned("MPI_Psend_init", true, buf, partitions, count, datatype, dest, tag, comm, info, request);
}

int PMPI_Precv_init(void* buf, int partitions, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                    MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return make_partitioned("MPI_Precv_init", false, buf, partitions, count, datatype, source, tag, comm, info, request);
}

int PMPI_Pready(int partition, MPI_Request request) {
  request_obj* r;
  part_state* p;
  if (int e = send_request("MPI_Pready", request, r, p)) return e;
  return ready_one("MPI_Pready", *r, *p, partition);
}

int PMPI_Pready_range(int partition_low, int partition_high, MPI_Request request) {
  request_obj* r;
  part_state* p;
  if (int e = send_request("MPI_Pready_range", request, r, p)) return e;
  if (partition_low > partition_high)
    return mpi_raise("MPI_Pready_range", r->comm, MPI_ERR_ARG,
                     "partition_low " + std::to_string(partition_low) + " above partition_high " +
                         std::to_string(partition_high));
  for (int i = partition_low; i <= partition_high; ++i)
    if (int e = ready_one("MPI_Pready_range", *r, *p, i)) return e;
  return MPI_SUCCESS;
}

int PMPI_Pready_list(int length, const int array_of_partitions[], MPI_Request request) {
  request_obj* r;
  part_state* p;
  if (int e = send_request("MPI_Pready_list", request, r, p)) return e;
  if (length < 0 || (length > 0 && !array_of_partitions))
    return mpi_raise("MPI_Pready_list", r->comm, MPI_ERR_ARG,
                     length < 0 ? "length " + std::to_string(length) + " is negative" : std::string("null partition list"));
  for (int k = 0; k < length; ++k)
    if (int e = ready_one("MPI_Pready_list", *r, *p, array_of_partitions[k])) return e;
  return MPI_SUCCESS;
}

int PMPI_Parrived(MPI_Request request, int partition, int* flag) {
  const char* fn = "MPI_Parrived";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  request_obj* r = lookup_request(request);
  part_state* p = state_of_request(r, request_obj::part_kind::recv);
  if (!p) return mpi_raise(fn, r ? r->comm : nullptr, MPI_ERR_REQUEST, "not a partitioned receive request");
  if (!flag) return mpi_raise(fn, r->comm, MPI_ERR_ARG, "null flag");
  if (partition < 0 || partition >= p->partitions)
    return mpi_raise(fn, r->comm, MPI_ERR_ARG,
                     "partition " + std::to_string(partition) + " not in [0, " + std::to_string(p->partitions) + ")");
  // An inactive request (never started, or completed): nothing to wait for.
  if (!r->active || r->local_done || p->part_bytes == 0) {
    *flag = 1;
    return MPI_SUCCESS;
  }
  struct probe {
    request_obj* r;
    int i;
    static bool done(void* a) {
      auto* q = static_cast<probe*>(a);
      return q->r->engine.completed() || st().session->parrived(q->r->engine, static_cast<std::size_t>(q->i));
    }
  } q{r, partition};
  if (!probe::done(&q)) test_progress(&probe::done, &q);
  bool in = st().session->parrived(r->engine, static_cast<std::size_t>(partition));
  if (!in && r->engine.completed()) {
    // Done with an error (truncated: its partitions are in; failed: report it).
    const nmad::errc ec = r->engine.error();
    if (ec != nmad::errc::ok && ec != nmad::errc::truncated)
      return mpi_raise(fn, r->comm, from_errc(ec), r->engine.error_message());
  }
  if (in && !p->contiguous) unpack_partition(*p, partition);
  *flag = in ? 1 : 0;
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Psend_init = PMPI_Psend_init
#pragma weak MPI_Precv_init = PMPI_Precv_init
#pragma weak MPI_Pready = PMPI_Pready
#pragma weak MPI_Pready_range = PMPI_Pready_range
#pragma weak MPI_Pready_list = PMPI_Pready_list
#pragma weak MPI_Parrived = PMPI_Parrived
