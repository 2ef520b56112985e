#pragma once
// The engine behind nmad::session: owns the drivers, the gates, the receive
// matching state and the pools. Every public entry point holds an
// engine_guard (the engine lock: a real recursive mutex at
// thread_level::multiple, nothing below) and then calls the *_locked
// helpers, which assume it is held. Completion callbacks never run under
// it: complete() defers them, and the thread's outermost guard runs them
// after unlocking (see engine_guard).
#include <boost/intrusive/list.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/common/engine_mutex.hpp"
#include "core/gate.hpp"
#include "core/matching/match_queues.hpp"
#include "core/progress/waiter.hpp"
#include "core/transfer/driver.hpp"

namespace nmad {

class session_impl;

// The gates of one driver by connection id (ids are small and dense).
class conn_table {
 public:
  gate* find(connection_id c) const { return c < _by_id.size() ? _by_id[c] : nullptr; }
  void set(connection_id c, gate* g) {
    if (c == invalid_connection) return;
    if (c >= _by_id.size()) _by_id.resize(static_cast<std::size_t>(c) + 1, nullptr);
    _by_id[c] = g;
  }
  void erase(connection_id c) {
    if (c < _by_id.size()) _by_id[c] = nullptr;
  }

 private:
  std::vector<gate*> _by_id;
};

// One opened driver plus the adapter that routes its events to the engine.
struct driver_slot final : driver_events {
  session_impl* engine = nullptr;
  std::unique_ptr<driver> drv;
  int instance = 0;  // how many slots of the same driver come before it (tcp+tcp)
  conn_table gates;  // established connections

  void on_connected(connection_id conn, int peer_rank) override;
  void on_packet(connection_id conn, std::span<const std::byte> packet) override;
  void on_send_done(void* token) override;
  void on_recv_data_done(void* token, std::size_t received) override;
  void on_connection_failed(connection_id conn, std::string_view reason) override;
};

// A free list that only allocates when it grows.
template <typename T>
class object_pool {
 public:
  ~object_pool() {
    for (T* p : _free) delete p;
  }
  T* get() {
    if (_free.empty()) return new T();
    T* p = _free.back();
    _free.pop_back();
    return p;
  }
  void put(T* p) { _free.push_back(p); }

 private:
  std::vector<T*> _free;
};

class session_impl final : private wait_engine {
 public:
  explicit session_impl(const session_options& opts);
  ~session_impl();

  int rank() const { return _rank; }
  int size() const { return _size; }
  const std::string& strategy_name() const { return _strategy_name; }
  errc set_strategy(std::string_view name);

  // Send side.
  errc isend(int dest, tag_t tag, const void* buf, std::size_t len, request_state& r,
             send_flags flags = send_flags::none);
  errc pack_begin(int dest, tag_t tag, request_state& r);
  errc pack_piece(request_state& r, const void* buf, std::size_t len, pack_mode mode);
  errc pack_end(request_state& r);

  // Receive side.
  errc irecv(int source, tag_t tag, tag_t mask, void* buf, std::size_t len,
             request_state& r, bool sealed = true);
  errc unpack_piece(request_state& r, void* buf, std::size_t len, pack_mode mode);
  errc unpack_end(request_state& r);
  bool iprobe(int source, tag_t tag, tag_t mask, recv_status& st);
  // Matched probe: detaches the first matching unexpected message whose
  // length is known; imrecv binds a receive to it.
  unexpected_message* improbe(int source, tag_t tag, tag_t mask, recv_status& st);
  errc imrecv(unexpected_message* u, void* buf, std::size_t len, request_state& r);
  int add_progress_task(int (*fn)(void*), void* arg);
  void remove_progress_task(int id);
  [[noreturn]] void abort(int exit_code, const std::string& message);
  bool cancel(request_state& r);
  bool cancel_send(request_state& r);                                   // lock held
  void handle_cancel_req(gate& g, const wire::chunk_header& h);         // lock held
  void handle_cancel_ack(gate& g, const wire::chunk_header& h);         // lock held

  bool test(request_state& r);
  errc wait(request_state& r);
  int wait_any(std::span<request* const> reqs);
  // Blocking probe: returns once a matching message is here, or fails
  // with peer_failed once no live peer could send one.
  recv_status probe(int source, tag_t tag, tag_t mask);
  int progress();
  // Waits with the session's wait policy until done(arg) is true.
  void wait_until(bool (*done)(void*), void* arg) { _waiter.wait(done, arg); }
  waiter& the_waiter() { return _waiter; }
  thread_level level() const { return _level; }
  session_stats stats() const;
  bool peer_alive(int rank) const;
  std::string local_address(std::string_view driver = {}) const;
  std::string driver_name() const;

  // Holds the engine lock for a scope. The outermost guard of a thread, on
  // leaving, unlocks and then runs the completion callbacks deferred
  // meanwhile (each request becomes complete once its callback returned),
  // so callbacks may call the session again, start requests, or wait.
  class engine_guard {
   public:
    explicit engine_guard(const session_impl& s) : _s(const_cast<session_impl&>(s)) {
      _s._lock.lock();
      ++_s._depth;
    }
    ~engine_guard() {
      if (--_s._depth == 0 && !_s._deferred.empty()) _s.run_deferred();  // unlocks
      else _s._lock.unlock();
    }
    engine_guard(const engine_guard&) = delete;
    engine_guard& operator=(const engine_guard&) = delete;

   private:
    session_impl& _s;
  };

  // Driver events (called from driver_slot, lock held by the poller).
  void connected(driver_slot& slot, connection_id conn, int peer_rank);
  void packet_arrived(driver_slot& slot, connection_id conn, std::span<const std::byte> bytes);
  void send_done(packet_wrapper* pw);
  void recv_data_done(rdv_recv* rr, std::size_t received);
  void connection_failed(driver_slot& slot, connection_id conn, std::string_view reason);

 private:
  // Set-up.
  void open_drivers(const session_options& opts);
  static std::string address_key(const driver_slot& s, int rank);
  driver_slot* choose_slot(int peer);
  std::vector<driver_slot*> reaching_slots(int peer);  // multi-rail: every one, in order
  void connect_all(int timeout_ms);
  void shutdown();

  // Progress and scheduling.
  int progress_locked();
  void wait_until(request_state& r);
  // wait_engine (the waiter's view of the session).
  int progress_round() override;
  arm_result arm_drivers(std::vector<pollfd>& fds, int& timeout_ms) override;
  void disarm_drivers(std::span<const pollfd> fds) override;
  void schedule(gate& g);
  // What a strategy is told about track t.
  track_view view_of(track& t) const {
    return {t.rail, t.caps, t.outstanding, t.inline_round == _rounds, t.slot->drv.get(), t.conn};
  }
  packet_wrapper* next_wrapper(gate& g, track& t);
  packet_wrapper* get_wrapper(gate& g, track& t);
  void put_wrapper(packet_wrapper* pw);

  // Send helpers.
  bool send_inline(gate& g, request_state& r, const void* buf, std::size_t len);
  std::uint32_t next_send_seq(gate& g, tag_t tag);
  void queue_piece(gate& g, request_state& r, chunk_entry& e);
  void entry_progress(chunk_entry& e);
  void finish_send_if_done(request_state& r);
  void handle_rtr(gate& g, const wire::chunk_header& h);

  // Receive helpers.
  void handle_short(gate& g, const wire::short_header& h, std::span<const std::byte> payload);
  void handle_chunk(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload);
  message_state* find_message(gate& g, const wire::chunk_header& h,
                              std::span<const std::byte> payload, bool& created);
  message_state* new_message(gate& g, const wire::chunk_header& h);
  void drain_early(gate& g);
  void bind(request_state& r, message_state&& m);
  void place(request_state& r, std::uint64_t offset, std::span<const std::byte> bytes);
  std::uint64_t copy_into_segments(request_state& r, std::uint64_t offset,
                                   std::span<const std::byte> bytes);
  void drain_buffered(request_state& r);
  void ask_rdvs(gate& g, request_state& r);
  track& pick_rail(gate& g, std::uint64_t& n);
  void note_arrivals(gate& g, message_state& m);
  void finish_recv_if_done(request_state& r);
  unexpected_message* find_unexpected(int source, tag_t tag, tag_t mask, recv_status& st);
  void setup_recv(request_state& r, int source, tag_t tag, tag_t mask, void* buf, std::size_t len,
                  bool sealed);
  void take_unexpected(request_state& r, unexpected_message& u);
  void protocol_violation(gate& g, const std::string& what);

  // Completion and failure.
  void complete(request_state& r);
  void run_deferred();  // lock held once by this thread; releases it
  void publish(request_state& r);  // marks r complete and wakes its waiter
  void fail_request(request_state& r, errc e, std::string message);
  void fail_gate(gate& g, std::string reason);
  bool no_live_peer() const;  // every other rank failed (size > 1)
  std::string peer_name(const gate& g) const;

  mutable engine_mutex _lock;
  int _depth = 0;                          // guards held (by the owning thread)
  std::vector<request_state*> _deferred;   // finished, callback not run yet
  thread_level _level = thread_level::multiple;
  waiter _waiter;
  std::unique_ptr<bootstrap> _boot;
  int _rank = 0;
  int _size = 1;
  std::string _strategy_name;
  std::size_t _rdv_threshold = 0;
  std::size_t _copy_threshold = 256;
  int _local_processes = 1;  // processes of the job on this machine (this one included)
  tag_t _ordering_mask = full_mask;

  std::vector<std::unique_ptr<driver_slot>> _slots;  // [0] = self, then network drivers by preference
  std::vector<std::unique_ptr<gate>> _gates;         // indexed by rank
  match_queues _match;        // posted receives, unexpected messages
  unexpected_list _detached;  // taken by improbe, not yet imrecv'd (freed at the end)
  object_pool<chunk_entry> _entry_pool;
  object_pool<packet_wrapper> _wrapper_pool;
  session_stats _stats;
  std::vector<gate*> _retry_gates;  // a track answered `retry`: re-driven by progress
  bool _finalizing = false;
  struct progress_task {
    int id;
    int (*fn)(void*);
    void* arg;
  };
  std::vector<progress_task> _tasks;  // run by progress_locked
  int _next_task_id = 1;
  unsigned _rounds = 0;      // progress rounds (quiet drivers are polled every 64th)
  bool _connecting = false;  // connect_all: every driver is polled every round
  bool _multirail = false;   // NMAD_DRIVERS=a+b: one track per listed driver
};

}  // namespace nmad
