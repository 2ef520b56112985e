// Neighbourhood collectives (MPI-3.1 7.6, 7.7): MPI_Neighbor_allgather(v),
// MPI_Neighbor_alltoall(v,w) and their non-blocking MPI_Ineighbor_* forms,
// on Cartesian, graph and distributed-graph communicators.
//
// Each call is one coll::schedule of a single round: a receive of block k
// from sources[k] and a send of block k to destinations[k] for every
// neighbour (topo.hpp, neighbours_of), all posted at once, then the unpack
// steps of non-contiguous receive blocks. It runs on the communicator's
// collective transport through launch_schedule (collectives.cpp), so blocking and
// non-blocking forms share the code and a pending MPI_Ineighbor_* progresses
// like every other non-blocking collective. MPI_PROC_NULL neighbours
// (Cartesian edges) get no message and their receive blocks are untouched.
// Repeated neighbours match in order (same tag, posted in block order);
// Cartesian messages carry their direction in the tag, so periodic
// dimensions of size 1 or 2 pair a send towards -1 with the receive from +1
// as on a larger grid. Datatypes: contiguous blocks move in place (buffer +
// true lower bound), others are packed into schedule temporaries when the
// call starts and unpacked when it completes. Sizes are not compared across
// processes: a message longer than its receive block fails the collective
// with MPI_ERR_TRUNCATE.
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi_layer/coll/schedule.hpp"
#include "mpi_layer/coll/args.hpp"
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/coll/entries.hpp"
#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/topo.hpp"

namespace nmad::mpi {
namespace {

std::byte g_empty[1];  // a non-null address for empty blocks

struct neighbor_error : std::runtime_error {
  neighbor_error(int c, const std::string& d) : std::runtime_error(d), code(c) {}
  int code;
};
[[noreturn]] void fail(int code, const std::string& detail) { throw neighbor_error(code, detail); }

std::byte* at(const void* buf, Aint off) { return addr_at(buf, off); }

tinfo type_info(MPI_Datatype h, const std::string& what) {
  tinfo ti;
  std::string detail;
  if (int e = describe_type(h, ti, detail)) fail(e, what + ": " + detail);
  return ti;
}

void check_count(Count n, const std::string& what) {
  if (n < 0) fail(MPI_ERR_COUNT, what + " = " + std::to_string(n) + " is negative");
}

void check_buffer(const void* buf, long long n, const tinfo& t, const char* what) {
  if (buf == MPI_IN_PLACE) fail(MPI_ERR_BUFFER, std::string("MPI_IN_PLACE is not allowed for the ") + what +
                                                    " of a neighbourhood collective");
  if (n > 0 && t.size > 0 && buf == nullptr && basic_of(t.h))
    fail(MPI_ERR_BUFFER, std::string("null ") + what + " with count " + std::to_string(n));
}

// Block k of an alltoallv/w buffer, at buf + displacement: with MPI_BOTTOM
// (null) the displacements are absolute addresses, so only the block's own
// address is checked (null with data of a predefined type).
void check_block(const void* buf, const std::byte* addr, long long n, const tinfo& t, const char* what, int k) {
  if (buf == MPI_IN_PLACE) fail(MPI_ERR_BUFFER, std::string("MPI_IN_PLACE is not allowed for the ") + what +
                                                    " of a neighbourhood collective");
  if (n > 0 && t.size > 0 && addr == nullptr && basic_of(t.h))
    fail(MPI_ERR_BUFFER, std::string("null address for ") + what + " block " + std::to_string(k) +
                             (buf ? "" : " (MPI_BOTTOM + displacement 0)") + " with count " + std::to_string(n));
}

template <class T>
const T* need_array(const T* a, std::size_t n, const char* what) {
  if (n > 0 && !a) fail(MPI_ERR_ARG, std::string("null ") + what + " array");
  return a;
}
void need_array(count_array a, std::size_t n, const char* what) {
  if (n > 0 && !a) fail(MPI_ERR_ARG, std::string("null ") + what + " array");
}

// One neighbourhood collective being built.
class neighbor_call {
 public:
  neighbor_call(comm_obj* c, neighbourhood nb) : _c(c), _nb(std::move(nb)), _block(_sch.tag_block()) {}

  int indegree() const { return static_cast<int>(_nb.sources.size()); }
  int outdegree() const { return static_cast<int>(_nb.destinations.size()); }

  // Contiguous bytes of `n` elements of t at buf: the buffer itself or a
  // packed copy made now.
  const std::byte* input(const void* buf, Count n, const tinfo& t) {
    const std::size_t bytes = static_cast<std::size_t>(n) * t.size;
    if (bytes == 0) return g_empty;
    if (t.contig) return at(buf, t.true_lb);
    std::byte* tmp = _sch.temp(bytes);
    Count pos = 0;
    t.type().pack(buf, n, tmp, static_cast<Count>(bytes), pos);
    if (persistent_building())  // replayed: the buffer's contents at each start
      _sch.on_restart([dt = t.type(), buf, n, tmp, bytes] {
        Count p = 0;
        dt.pack(buf, n, tmp, static_cast<Count>(bytes), p);
      });
    return tmp;
  }
  void send(int k, const std::byte* data, std::size_t bytes) {
    const int peer = _nb.destinations[k];
    if (peer == MPI_PROC_NULL) return;
    _sch.send(peer, coll::schedule::make_tag(_block, static_cast<std::size_t>(_nb.send_tags[k])), data, bytes);
  }
  void send(int k, const void* buf, Count n, const tinfo& t) {
    if (_nb.destinations[k] == MPI_PROC_NULL) return;  // nothing packed for it either
    send(k, input(buf, n, t), static_cast<std::size_t>(n) * t.size);
  }
  // Block k of the receive side: n elements of t at buf, from sources[k].
  void recv(int k, void* buf, Count n, const tinfo& t) {
    const int peer = _nb.sources[k];
    if (peer == MPI_PROC_NULL) return;  // its block stays untouched
    const std::size_t bytes = static_cast<std::size_t>(n) * t.size;
    std::byte* dst = g_empty;
    if (bytes > 0 && t.contig) {
      dst = at(buf, t.true_lb);
    } else if (bytes > 0) {
      dst = _sch.temp(bytes);
      Datatype dt = t.type();
      _unpacks.push_back([dt, dst, buf, n] {
        Count pos = 0;
        dt.unpack(dst, dt.packed_size(n), pos, buf, n);
      });
    }
    _sch.recv(peer, coll::schedule::make_tag(_block, static_cast<std::size_t>(_nb.recv_tags[k])), dst, bytes);
  }

  int launch(const char* fn, MPI_Request* req) {
    for (auto& f : _unpacks) _sch.call(std::move(f));  // after every receive of the round
    _unpacks.clear();
    return launch_schedule(fn, _c, std::move(_sch), req);
  }

 private:
  comm_obj* _c;
  neighbourhood _nb;
  coll::schedule _sch;
  std::uint32_t _block;
  std::vector<std::function<void()>> _unpacks;
};

// Runs body(call) (checks + build), then launches; every failure is an MPI
// error raised on the communicator.
template <class Body>
int neighbor_collective(const char* fn, MPI_Comm comm, MPI_Request* req, Body&& body) {
  if (g_persistent_build) fn = g_persistent_build->fn;  // errors under the _init call's name
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (req) *req = MPI_REQUEST_NULL;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  const auto topo = topology_of(comm);
  if (!topo)
    return mpi_raise(fn, c, MPI_ERR_TOPOLOGY,
                     std::string(c->inter ? "an intercommunicator" : "the communicator") +
                         " has no process topology (Cartesian, graph or distributed graph)");
  if (topo->k == topology::kind::graph && !topo->symmetric)
    return mpi_raise(fn, c, MPI_ERR_TOPOLOGY,
                     "neighbourhood collectives need a symmetric graph (as many edges a->b as b->a, MPI-3.1 7.6)");
  if (!req && std::strncmp(fn, "MPI_I", 5) == 0) return mpi_raise(fn, c, MPI_ERR_ARG, "null request pointer");
  try {
    neighbor_call x(c, neighbours_of(*topo, c->rank));
    body(x);
    return x.launch(fn, req);
  } catch (const neighbor_error& e) {
    return mpi_raise(fn, c, e.code, e.what());
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, c, e.code() == DatatypeErrc::invalid_count ? MPI_ERR_COUNT : MPI_ERR_TYPE, e.what());
  } catch (const std::bad_alloc&) {
    return mpi_raise(fn, c, MPI_ERR_NO_MEM, "out of memory for the collective's temporaries");
  } catch (const std::exception& e) {
    return mpi_raise(fn, c, MPI_ERR_INTERN, e.what());
  }
}

}  // namespace

namespace neighbor {

int allgather(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
              MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  return neighbor_collective(fn, comm, req, [&](neighbor_call& x) {
    check_count(scount, "sendcount");
    check_count(rcount, "recvcount");
    const tinfo st = type_info(stype, "sendtype"), rt = type_info(rtype, "recvtype");
    check_buffer(sbuf, scount, st, "send buffer");
    check_buffer(rbuf, static_cast<long long>(rcount) * x.indegree(), rt, "receive buffer");
    const std::byte* data = x.outdegree() > 0 ? x.input(sbuf, scount, st) : g_empty;
    for (int k = 0; k < x.indegree(); ++k) x.recv(k, at(rbuf, static_cast<Aint>(k) * rcount * rt.extent), rcount, rt);
    for (int k = 0; k < x.outdegree(); ++k) x.send(k, data, static_cast<std::size_t>(scount) * st.size);
  });
}

int allgatherv(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf,
               count_array rcounts, count_array displs, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  return neighbor_collective(fn, comm, req, [&](neighbor_call& x) {
    check_count(scount, "sendcount");
    const tinfo st = type_info(stype, "sendtype"), rt = type_info(rtype, "recvtype");
    check_buffer(sbuf, scount, st, "send buffer");
    need_array(rcounts, x.indegree(), "recvcounts");
    need_array(displs, x.indegree(), "displs");
    for (int k = 0; k < x.indegree(); ++k) {
      check_count(rcounts[k], "recvcounts[" + std::to_string(k) + "]");
      check_buffer(rbuf, rcounts[k], rt, "receive buffer");
    }
    const std::byte* data = x.outdegree() > 0 ? x.input(sbuf, scount, st) : g_empty;
    for (int k = 0; k < x.indegree(); ++k) x.recv(k, at(rbuf, static_cast<Aint>(displs[k]) * rt.extent), rcounts[k], rt);
    for (int k = 0; k < x.outdegree(); ++k) x.send(k, data, static_cast<std::size_t>(scount) * st.size);
  });
}

int alltoall(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
             MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  return neighbor_collective(fn, comm, req, [&](neighbor_call& x) {
    check_count(scount, "sendcount");
    check_count(rcount, "recvcount");
    const tinfo st = type_info(stype, "sendtype"), rt = type_info(rtype, "recvtype");
    check_buffer(sbuf, static_cast<long long>(scount) * x.outdegree(), st, "send buffer");
    check_buffer(rbuf, static_cast<long long>(rcount) * x.indegree(), rt, "receive buffer");
    for (int k = 0; k < x.indegree(); ++k) x.recv(k, at(rbuf, static_cast<Aint>(k) * rcount * rt.extent), rcount, rt);
    for (int k = 0; k < x.outdegree(); ++k) x.send(k, at(sbuf, static_cast<Aint>(k) * scount * st.extent), scount, st);
  });
}

// alltoallv (one type, displacements in its extent; types/aint null) and
// alltoallw (per-neighbour types, displacements in bytes).
int alltoallw(const char* fn, const void* sbuf, count_array scounts, count_array sdispls, const MPI_Datatype* stypes,
              void* rbuf, count_array rcounts, count_array rdispls, const MPI_Datatype* rtypes, bool w,
              MPI_Comm comm, MPI_Request* req) {
  return neighbor_collective(fn, comm, req, [&](neighbor_call& x) {
    const int in = x.indegree(), out = x.outdegree();
    need_array(rcounts, in, "recvcounts");
    need_array(scounts, out, "sendcounts");
    need_array(rdispls, in, "rdispls");
    need_array(sdispls, out, "sdispls");
    if (w) {
      need_array(rtypes, in, "recvtypes");
      need_array(stypes, out, "sendtypes");
    }
    std::vector<tinfo> rts, sts;
    for (int k = 0; k < (w ? in : 1); ++k)
      rts.push_back(type_info(rtypes[w ? k : 0], w ? "recvtypes[" + std::to_string(k) + "]" : "recvtype"));
    for (int k = 0; k < (w ? out : 1); ++k)
      sts.push_back(type_info(stypes[w ? k : 0], w ? "sendtypes[" + std::to_string(k) + "]" : "sendtype"));
    std::vector<std::byte*> raddr(static_cast<std::size_t>(in)), saddr(static_cast<std::size_t>(out));
    for (int k = 0; k < in; ++k) {
      const tinfo& t = rts[w ? k : 0];
      check_count(rcounts[k], "recvcounts[" + std::to_string(k) + "]");
      raddr[k] = at(rbuf, w ? static_cast<Aint>(rdispls[k]) : static_cast<Aint>(rdispls[k]) * t.extent);
      check_block(rbuf, raddr[k], rcounts[k], t, "receive buffer", k);
    }
    for (int k = 0; k < out; ++k) {
      const tinfo& t = sts[w ? k : 0];
      check_count(scounts[k], "sendcounts[" + std::to_string(k) + "]");
      saddr[k] = at(sbuf, w ? static_cast<Aint>(sdispls[k]) : static_cast<Aint>(sdispls[k]) * t.extent);
      check_block(sbuf, saddr[k], scounts[k], t, "send buffer", k);
    }
    for (int k = 0; k < in; ++k) x.recv(k, raddr[k], rcounts[k], rts[w ? k : 0]);
    for (int k = 0; k < out; ++k) x.send(k, saddr[k], scounts[k], sts[w ? k : 0]);
  });
}

}  // namespace neighbor
}  // namespace nmad::mpi

using namespace nmad::mpi;
using namespace nmad::mpi::neighbor;

extern "C" {

int PMPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather("MPI_Neighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                   nullptr);
}
int PMPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgather("MPI_Ineighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                   request);
}
int PMPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv("MPI_Neighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                    comm, nullptr);
}
int PMPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                              MPI_Request* request) {
  return allgatherv("MPI_Ineighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                    comm, request);
}
int PMPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall("MPI_Neighbor_alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr);
}
int PMPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall("MPI_Ineighbor_alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                  request);
}
int PMPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                            MPI_Comm comm) {
  return alltoallw("MPI_Neighbor_alltoallv", sendbuf, sendcounts, sdispls, &sendtype, recvbuf, recvcounts, rdispls,
                   &recvtype, false, comm, nullptr);
}
int PMPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                             MPI_Comm comm, MPI_Request* request) {
  return alltoallw("MPI_Ineighbor_alltoallv", sendbuf, sendcounts, sdispls, &sendtype, recvbuf, recvcounts, rdispls,
                   &recvtype, false, comm, request);
}
int PMPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw("MPI_Neighbor_alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                   recvtypes, true, comm, nullptr);
}
int PMPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                             const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                             const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                             MPI_Request* request) {
  return alltoallw("MPI_Ineighbor_alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                   recvtypes, true, comm, request);
}

}  // extern "C"

#pragma weak MPI_Neighbor_allgather = PMPI_Neighbor_allgather
#pragma weak MPI_Ineighbor_allgather = PMPI_Ineighbor_allgather
#pragma weak MPI_Neighbor_allgatherv = PMPI_Neighbor_allgatherv
#pragma weak MPI_Ineighbor_allgatherv = PMPI_Ineighbor_allgatherv
#pragma weak MPI_Neighbor_alltoall = PMPI_Neighbor_alltoall
#pragma weak MPI_Ineighbor_alltoall = PMPI_Ineighbor_alltoall
#pragma weak MPI_Neighbor_alltoallv = PMPI_Neighbor_alltoallv
#pragma weak MPI_Ineighbor_alltoallv = PMPI_Ineighbor_alltoallv
#pragma weak MPI_Neighbor_alltoallw = PMPI_Neighbor_alltoallw
#pragma weak MPI_Ineighbor_alltoallw = PMPI_Ineighbor_alltoallw
