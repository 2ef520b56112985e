// Blocking collectives (MPI_Barrier, Bcast, Reduce, Allreduce) over the
// schedules of mpi_layer/coll, for the basic datatypes and predefined ops.
//
// Each communicator gets one coll::session_transport, made on first use:
// its members in comm-rank order and a base tag of
// (0x800000 | collective context) << 40, whose high bit keeps collective
// traffic apart from every point-to-point and internal context (< 2^31).
// MPI requires collectives to be called in the same order on every member,
// which keeps the transports' sequence numbers in step.
#include <map>
#include <memory>

#include "mpi_layer/coll/algorithms.hpp"
#include "mpi_layer/coll/session_transport.hpp"
#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/op/op.hpp"

namespace nmad::mpi {
namespace {

std::map<const comm_obj*, std::unique_ptr<coll::session_transport>>& transports() {
  static std::map<const comm_obj*, std::unique_ptr<coll::session_transport>> t;
  return t;
}

coll::session_transport& transport_of(comm_obj& c) {
  std::lock_guard guard(st().mu);
  auto& t = transports()[&c];
  const nmad::tag_t base = static_cast<nmad::tag_t>(0x800000u | c.coll_ctx) << coll::tag_bits_total;
  // A communicator object may be reused for a new communicator after a free.
  if (!t || t->base_tag() != base || t->size() != c.size() || t->rank() != c.rank)
    t = std::make_unique<coll::session_transport>(*st().session, c.world_of, base);
  return *t;
}

bool basic_of(MPI_Datatype t, BasicType& out) {
  auto b = nmad::mpi::basic_of(t);
  if (b) out = *b;
  return b.has_value();
}

struct basic_reducer final : coll::reducer {
  Op op;
  BasicType type;
  MPI_Datatype handle;
  basic_reducer(PredefinedOp o, BasicType t, MPI_Datatype h) : op(o), type(t), handle(h) {}
  void apply(const void* in, void* inout, std::size_t count) override {
    op.reduce(in, inout, static_cast<Count>(count), type, handle);
  }
  bool commutative() const override { return op.is_commutative(); }
};

int checks(const char* fn, comm_obj* c, int count, MPI_Datatype t, std::string& detail) {
  if (!c) return MPI_ERR_COMM;
  if (count < 0) {
    detail = "negative count " + std::to_string(count);
    return MPI_ERR_COUNT;
  }
  BasicType b;
  if (!basic_of(t, b)) {
    detail = "datatype " + std::to_string(t) + " is not a basic datatype";
    return MPI_ERR_TYPE;
  }
  return MPI_SUCCESS;
}

int run(const char* fn, comm_obj& c, coll::schedule s) {
  std::string why;
  const nmad::errc e = coll::run(std::move(s), transport_of(c), transport_of(c).next_sequence(), &why);
  if (e == nmad::errc::ok) return MPI_SUCCESS;
  return mpi_raise(fn, &c, from_errc(e), why);
}

}  // namespace
}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Barrier(MPI_Comm comm) {
  if (!check_initialized("MPI_Barrier")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise_handle("MPI_Barrier", comm, MPI_ERR_COMM, "invalid communicator");
  return run("MPI_Barrier", *c, nmad::coll::build_barrier(c->rank, c->size()));
}

int PMPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!check_initialized("MPI_Bcast")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  std::string detail;
  if (int e = checks("MPI_Bcast", c, count, datatype, detail))
    return c ? mpi_raise("MPI_Bcast", c, e, detail) : mpi_raise_handle("MPI_Bcast", comm, e, "invalid communicator");
  if (root < 0 || root >= c->size())
    return mpi_raise("MPI_Bcast", c, MPI_ERR_ROOT, "root " + std::to_string(root) + " out of range");
  const std::size_t bytes = static_cast<std::size_t>(count) * static_cast<std::size_t>(type_size(datatype));
  return run("MPI_Bcast", *c, nmad::coll::build_bcast(c->rank, c->size(), buffer, bytes, root));
}

static int reduce_common(const char* fn, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, int root, MPI_Comm comm, bool all) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  std::string detail;
  if (int e = checks(fn, c, count, datatype, detail))
    return c ? mpi_raise(fn, c, e, detail) : mpi_raise_handle(fn, comm, e, "invalid communicator");
  if (!all && (root < 0 || root >= c->size()))
    return mpi_raise(fn, c, MPI_ERR_ROOT, "root " + std::to_string(root) + " out of range");
  if (op < MPI_MAX || op > MPI_NO_OP || op == 11 || op == 12)
    return mpi_raise(fn, c, MPI_ERR_OP, "op " + std::to_string(op) + " is not supported here");
  BasicType type;
  basic_of(datatype, type);
  const auto pop = static_cast<PredefinedOp>(op - 1);
  if (!op_allowed(pop, type))
    return mpi_raise(fn, c, MPI_ERR_OP,
                     std::string(op_name(pop)) + " is not defined on datatype " + std::to_string(datatype));
  basic_reducer red(pop, type, datatype);
  const void* in = sendbuf == MPI_IN_PLACE ? nullptr : sendbuf;
  const std::size_t n = static_cast<std::size_t>(count), elem = static_cast<std::size_t>(type_size(datatype));
  if (all) return run(fn, *c, nmad::coll::build_allreduce(c->rank, c->size(), in, recvbuf, n, elem, red));
  return run(fn, *c, nmad::coll::build_reduce(c->rank, c->size(), in, recvbuf, n, elem, red, root));
}

int PMPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm) {
  return reduce_common("MPI_Reduce", sendbuf, recvbuf, count, datatype, op, root, comm, false);
}

int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm) {
  return reduce_common("MPI_Allreduce", sendbuf, recvbuf, count, datatype, op, 0, comm, true);
}

}  // extern "C"

#pragma weak MPI_Barrier = PMPI_Barrier
#pragma weak MPI_Bcast = PMPI_Bcast
#pragma weak MPI_Reduce = PMPI_Reduce
#pragma weak MPI_Allreduce = PMPI_Allreduce
