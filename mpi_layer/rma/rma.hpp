#pragma once
// Private state of one-sided communication (MPI 4.1 chapter 12) in the MPI
// layer.
//
// How this part works.
//   * A window keeps a private duplicate of its communicator: its RMA
//     traffic (the point-to-point context) and its synchronisation (the
//     collective context) never mix with the application's. At creation
//     every member learns every other's base address, size and
//     displacement unit (one allgather).
//   * Two paths reach a target's memory:
//       - direct: the window's memory is one shared-memory segment mapped
//         by every member (MPI_Win_allocate_shared always; MPI_Win_allocate
//         when every member runs on this host over the shm driver). An
//         origin reads and writes the target's memory itself; accumulates
//         take the target's spin lock in the segment, and passive-target
//         locks are reader-writer words in the segment. The target does
//         nothing, whether it computes or not.
//       - messages: every other window (MPI_Win_create on the user's
//         memory, dynamic windows, ranks on other hosts). An operation is
//         a request message to the target: a wire_header, the target's
//         byte blocks (the target datatype flattened at the origin) and
//         the origin's packed data, in one engine message up to
//         kInlineBytes, else the header alone followed by a second message
//         on the operation's own tag (which a put into one block receives
//         straight into the window, by rendezvous when large). Answers
//         (get data, fetched values, acknowledgements) come back on that
//         tag.
//   * The target's side of the message path is the RMA agent (target.cpp):
//     a progress task of the session that receives the request headers of
//     every window and serves them — so they are served whenever this
//     process progresses: inside any MPI call, and while it computes when
//     a progress thread runs (the window then counts as background work).
//     Requests of one origin are served in the order they were sent (one
//     queue per origin): accumulates keep MPI's default ordering, and a
//     request behind a lock the origin does not hold yet waits in its
//     queue, which makes MPI_Win_lock towards another process
//     non-blocking (the lock request travels ahead of the operations).
//     Accumulates of every origin are applied under the window's data
//     mutex, one at a time: they are atomic per element with respect to
//     each other, as MPI requires.
//   * Completion: an origin keeps a record of every operation in flight
//     (its messages, its staging buffers, the receive of its answer).
//     Remote completion (flush, unlock, complete) is an acknowledgement
//     the target sends after serving every earlier request of that origin;
//     fence counts: each member sends every target the number of requests
//     it sent it (a reduce_scatter), and a target leaves the fence once it
//     has served that many.
//   * Failures: waits watch the target's liveness (session::peer_alive);
//     an operation or synchronisation towards a dead process fails with
//     MPI_ERR_PROC_FAILED naming it.
// Threading: a window's origin state and agent state are guarded by
// window::mu (never held across a call that waits); window::data_mu
// serialises the application of accumulates in this process. Lock order:
// the registry's mutex, then window::mu, then the engine's locks.
#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/op/op.hpp"

namespace nmad::mpi::rma {

enum class flavor : int { create = MPI_WIN_FLAVOR_CREATE, allocate = MPI_WIN_FLAVOR_ALLOCATE,
                          dynamic = MPI_WIN_FLAVOR_DYNAMIC, shared = MPI_WIN_FLAVOR_SHARED };

// Requests on the wire (wire_header::kind).
enum class kind : std::uint8_t {
  put = 1, get, acc, get_acc, cas,
  lock,      // lock_type: MPI_LOCK_SHARED/EXCLUSIVE; no answer
  unlock,    // answered (ack) once served: the lock is released
  flush,     // answered once every earlier request of the origin is served
  complete,  // end of a PSCW access epoch (no answer)
};

// Tags on the window's point-to-point context.
constexpr int kTagRequest = 1;  // request headers, any origin
constexpr int kTagPost = 2;     // MPI_Win_post -> the origins of its group
constexpr int kFirstOpTag = 16; // operation tags (answers, follow-ups) from here
constexpr std::uint32_t kLastOpTag = 0x3fffff00u;
// An operation's tag is the origin's: answers come back on it, its
// follow-up goes on it with this bit set, so that a follow-up the peer
// sends for its own operation never meets a receive for an answer.
constexpr std::uint32_t kFollowTagBit = 0x40000000u;

constexpr std::size_t kInlineBytes = 4096;  // largest one-message request
constexpr std::uint32_t kFlagFollow = 1;       // a second message follows on `tag`
constexpr std::uint32_t kFlagBlocksFollow = 2; // ... and it starts with the blocks
// A get larger than kInlineBytes into contiguous memory: the answer is the
// data alone, received in place at the origin (an error is answered with
// a wire_ack alone, which the origin tells by its length).
constexpr std::uint32_t kFlagRawAnswer = 4;

struct wire_header {
  std::uint8_t kind = 0;
  std::uint8_t lock_type = 0;
  std::uint8_t op = 0;      // PredefinedOp (accumulates)
  std::uint8_t basic = 0;   // BasicType of the accumulated elements
  std::uint32_t tag = 0;    // the operation's tag (answer, follow-up)
  std::uint32_t nblocks = 0;
  std::uint32_t flags = 0;
  std::int64_t target_off = 0;  // window byte offset (dynamic: absolute address)
  std::uint64_t data_len = 0;   // origin data bytes (cas: compare + origin)
  std::uint64_t result_len = 0; // answer bytes (get, get_acc, cas)
};
static_assert(sizeof(wire_header) == 40);

// A target block: bytes [off, off + len) relative to the target address.
struct wire_block {
  std::int64_t off;
  std::int64_t len;
};

// Answers carry an MPI error class first (0: served); data follows.
struct wire_ack {
  std::int32_t error = 0;
  std::int32_t pad = 0;
};

// The shared segment of a direct window: one control line per member,
// then the members' memory, back to back (MPI's contiguous default).
struct alignas(64) control_line {
  std::atomic<std::uint32_t> lock_word{0};  // kExclusive | shared holders
  std::atomic<std::uint32_t> acc_lock{0};   // accumulates' spin lock
  std::atomic<std::uint64_t> pid{0};
};
constexpr std::uint32_t kExclusive = 0x80000000u;

struct attached_region {
  std::uintptr_t base;
  std::size_t size;
};

// One operation of this origin in flight on the message path.
struct op_record {
  int target = 0;                       // window rank
  bool sends_done = false, answer_done = false, finished = false;
  bool wants_answer = false, has_follow = false;
  int error = MPI_SUCCESS;
  std::string detail;
  nmad::request hdr, follow, answer;
  std::vector<std::byte> wire;          // header (+ blocks + inline data)
  std::vector<std::byte> follow_bytes;  // follow-up (blocks and/or data) when staged
  std::vector<std::byte> answer_bytes;  // ack + fetched data
  // Where fetched data goes: result_buf/result_count/result_type (unpacked
  // from answer_bytes after the ack).
  void* result_buf = nullptr;
  MPI_Count result_count = 0;
  Datatype result_type;
  bool flush_ack = false;               // an unlock/flush acknowledgement
  bool raw_answer = false;              // kFlagRawAnswer: the data lands in result_buf itself
};

// Requests of one origin waiting to be served at this target (target.cpp).
struct origin_queue {
  struct item {
    wire_header h{};
    std::vector<wire_block> blocks;
    std::vector<std::byte> data;
    bool need_follow = false, follow_posted = false, follow_direct = false;
    nmad::request follow;
  };
  std::deque<std::unique_ptr<item>> items;
  bool waiting_lock = false;  // its lock request waits for the grant
  int first_error = MPI_SUCCESS;
};


struct window {
  MPI_Win handle = MPI_WIN_NULL;
  MPI_Comm comm = MPI_COMM_NULL;        // private duplicate
  comm_obj* c = nullptr;                // its object
  int rank = 0, size = 1;
  flavor fl = flavor::create;
  void* base = nullptr;
  MPI_Aint bytes = 0;
  int disp_unit = 1;
  std::vector<std::uint64_t> bases;     // per member (addresses in its own process)
  std::vector<MPI_Aint> sizes;
  std::vector<int> disp_units;
  std::atomic<MPI_Errhandler> errhandler{MPI_ERRORS_ARE_FATAL};
  std::string name;
  info_entries info;
  bool own_memory = false;              // allocate (not shared): base is ours to free

  // Direct windows: the segment, and each member's memory in it.
  bool direct = false;
  void* segment = nullptr;
  std::size_t segment_bytes = 0;
  control_line* lines = nullptr;
  std::vector<std::byte*> mapped;       // member memory as mapped here

  std::mutex mu;
  std::mutex data_mu;                   // accumulates applied in this process

  // ---- origin state (mu) ----
  bool fence_open = false;              // a fence opened an epoch (no NOSUCCEED)
  bool access_pscw = false;
  std::vector<int> access_group;        // window ranks (MPI_Win_start)
  bool lock_all = false;
  bool lock_all_nocheck = false;         // lock_all with MPI_MODE_NOCHECK: no lock taken
  bool lock_all_self = false;           // lock_all holds this process's own shared lock
  std::vector<int> lock_type;           // per target: 0 none, else MPI_LOCK_*
  std::vector<bool> lock_sent;          // the lock request left (message path)
  std::vector<std::uint64_t> sent;      // requests sent per target (fence counts)
  std::vector<std::uint64_t> unflushed;  // requests sent per target since its last ack
  std::list<std::shared_ptr<op_record>> inflight;
  std::vector<int> target_error;        // first error met per target, not yet reported
  std::string error_detail;
  std::uint32_t next_tag = kFirstOpTag;

  // ---- target state (mu) ----
  bool exposure_pscw = false;
  std::uint64_t completes_expected = 0, completes_seen = 0;
  std::uint64_t served = 0;             // requests served (fence counts)
  std::uint64_t fence_expected = 0;
  int excl_holder = -1;                 // window rank, -1 none
  int shared_holders = 0;
  std::deque<int> lock_waiters;         // origins whose lock request waits
  std::vector<std::unique_ptr<origin_queue>> queues;  // per origin
  std::vector<attached_region> regions; // dynamic windows (mu)
  nmad::request hdr_req;
  std::vector<std::byte> hdr_buf = std::vector<std::byte>(kInlineBytes);
  bool hdr_posted = false;
  struct outgoing {
    nmad::request req;
    std::vector<std::byte> bytes;
    int origin = -1;
    bool in_place = false;  // sends window memory (a large get)
  };
  std::list<std::unique_ptr<outgoing>> answers;  // answers still leaving
  bool background = false;              // counted as background work

  int world_of(int r) const { return c->world_of[static_cast<std::size_t>(r)]; }
  // A fresh operation tag (mu held).
  std::uint32_t take_tag() {
    const std::uint32_t t = next_tag;
    next_tag = next_tag >= kLastOpTag ? kFirstOpTag : next_tag + 1;
    return t;
  }
  nmad::tag_t tag(int t) const { return engine_tag(c->p2p_ctx, t); }
};

// ---- window table (window.cpp) ----
std::shared_ptr<window> lookup_window(MPI_Win w);
// Looks up a live window for fn: null after raising MPI_ERR_WIN (rc set).
std::shared_ptr<window> need_window(const char* fn, MPI_Win w, int& rc);
// Raises code on w's error handler (null: MPI_COMM_WORLD's).
int raise_win(const char* fn, window* w, int code, const std::string& detail);
// The predefined window attributes (attr.cpp asks): true when keyval is
// one; *value_out points to the value (valid while the window lives).
bool predefined_win_attr(MPI_Win w, int keyval, void** value_out);

// ---- the agent (target.cpp) ----
// Registers a window with the agent (its header receive posted, its queues
// made) / withdraws it (after which the agent never touches it again).
void agent_add(const std::shared_ptr<window>& w);
void agent_remove(window& w);
// One round of the agent over w (mu NOT held): serves what arrived.
int agent_serve(window& w);
// Lock manager: origin `o` asks for / releases a lock on this process's
// memory (mu held). acquire returns true when granted now.
bool lock_acquire_locked(window& w, int o, int type);
void lock_release_locked(window& w, int o);

// Whether [first, last) lies in the attached regions of a dynamic window
// (regions that touch count as one: an access may span them) (mu held).
bool attached_covers(const window& w, std::uintptr_t first, std::uintptr_t last);

// ---- applying operations to memory (target.cpp) ----
// Scatter `data` over blocks at `at`; gather them into `out`.
void scatter_blocks(std::byte* at, const wire_block* b, std::size_t n, const std::byte* data);
void gather_blocks(const std::byte* at, const wire_block* b, std::size_t n, std::byte* out);
// Accumulate (packed origin data) into the blocks at `at`; old values into
// `old` (may be null). Caller holds the right lock.
void accumulate_blocks(std::byte* at, const wire_block* b, std::size_t n, const std::byte* data,
                       std::size_t len, PredefinedOp op, BasicType basic, std::byte* old);

// ---- origin side (origin.cpp) ----
// Whether window rank t is another process that has died; detail names it.
bool target_failed(const window& w, int t, std::string& detail);
// Progress of this origin's records on w (mu held): reaps finished ones.
void reap_locked(window& w);
// Waits (progressing) until pred() holds (checked under mu) or a target in
// `watch` (window ranks; empty: none) died: then MPI_ERR_PROC_FAILED with detail.
int wait_for(window& w, const std::vector<int>& watch, const std::function<bool()>& pred, std::string& detail);
// Sends a control request (lock, unlock, flush, complete) to target t (mu
// held); for unlock and flush an op_record expecting the ack is added.
int send_control_locked(window& w, int t, kind k, int lock_type, std::string& detail);
// Waits until no record to target t (every target: -1) is in flight.
int drain(window& w, int t, std::string& detail);
// The first error of the finished records to targets in `targets` (all when
// empty), which are dropped.
int take_errors_locked(window& w, const std::vector<int>& targets, std::string& detail);

}  // namespace nmad::mpi::rma
