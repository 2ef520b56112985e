// Schedule building and execution. See schedule.hpp.
#include "mpi_layer/coll/schedule.hpp"

#include "api/nmad/services/trace.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace nmad::coll {

namespace {
// Zero-byte transfers with a null buffer still need a valid address.
std::byte g_empty[1];
}  // namespace

// ---- schedule ---------------------------------------------------------------

round& schedule::current() {
  if (!_open || _rounds.empty()) {
    _rounds.emplace_back();
    _open = true;
  }
  return _rounds.back();
}

void schedule::new_round() {
  if (!_rounds.empty() && !_rounds.back().empty()) _open = false;
}

void schedule::send(int peer, std::uint32_t tag, const void* buf, std::size_t bytes) {
  round& r = current();
  // A round's local steps run after its communication: a send added after
  // a local step of the same round would see data not produced yet.
  if (!r.local.empty()) throw std::logic_error("coll::schedule: send after a local step in the same round");
  step s;
  s.k = step::kind::send;
  s.peer = peer;
  s.tag = tag;
  s.src = buf ? static_cast<const std::byte*>(buf) : g_empty;
  s.bytes = bytes;
  r.comm.push_back(s);
}

void schedule::recv(int peer, std::uint32_t tag, void* buf, std::size_t bytes) {
  round& r = current();
  if (!r.local.empty()) throw std::logic_error("coll::schedule: recv after a local step in the same round");
  step s;
  s.k = step::kind::recv;
  s.peer = peer;
  s.tag = tag;
  s.dst = buf ? static_cast<std::byte*>(buf) : g_empty;
  s.bytes = bytes;
  r.comm.push_back(s);
}

void schedule::reduce(reducer& red, const void* in, void* inout, std::size_t count) {
  if (count == 0) return;
  step s;
  s.k = step::kind::reduce;
  s.src = static_cast<const std::byte*>(in);
  s.dst = static_cast<std::byte*>(inout);
  s.count = count;
  s.red = &red;
  current().local.push_back(s);
}

void schedule::reduce_into(reducer& red, const void* in, const void* b, void* out, std::size_t count,
                           std::size_t bytes) {
  if (count == 0) return;
  if (out == b) return reduce(red, in, out, count);
  step s;
  s.k = step::kind::reduce_into;
  s.src = static_cast<const std::byte*>(in);
  s.src2 = static_cast<const std::byte*>(b);
  s.dst = static_cast<std::byte*>(out);
  s.count = count;
  s.bytes = bytes;
  s.red = &red;
  current().local.push_back(s);
}

void reducer::apply_into(const void* in, const void* b, void* out, std::size_t count, std::size_t bytes) {
  if (out == b) return apply(in, out, count);
  std::vector<std::byte> saved;
  if (out == in) {
    if (commutative()) return apply(b, out, count);  // b op in == in op b
    saved.assign(static_cast<const std::byte*>(in), static_cast<const std::byte*>(in) + bytes);
    in = saved.data();
  }
  std::memmove(out, b, bytes);
  apply(in, out, count);
}

void schedule::copy(const void* src, void* dst, std::size_t bytes) {
  if (bytes == 0 || src == dst) return;
  step s;
  s.k = step::kind::copy;
  s.src = static_cast<const std::byte*>(src);
  s.dst = static_cast<std::byte*>(dst);
  s.bytes = bytes;
  current().local.push_back(s);
}

void schedule::call(std::function<void()> fn) {
  if (!fn) return;
  _calls.push_back(std::make_unique<std::function<void()>>(std::move(fn)));
  step s;
  s.k = step::kind::call;
  s.fn = _calls.back().get();
  current().local.push_back(s);
}

void schedule::append(schedule&& other, std::span<const int> peer_map) {
  const std::uint32_t shift = _next_block;
  std::uint32_t used = other._next_block;  // blocks other's steps use
  for (const round& r : other._rounds)
    for (const step& st : r.comm) used = std::max(used, (st.tag >> tag_step_bits) + 1);
  if (shift + used > (1u << (tag_bits_local - tag_step_bits)))
    throw std::length_error("coll::schedule: too many algorithm phases for the local tag space");
  new_round();
  for (round& r : other._rounds) {
    if (r.empty()) continue;
    for (step& st : r.comm) {
      if (st.peer < 0 || static_cast<std::size_t>(st.peer) >= peer_map.size())
        throw std::out_of_range("coll::schedule::append: peer outside the map");
      st.peer = peer_map[st.peer];
      st.tag = ((st.tag >> tag_step_bits) + shift) << tag_step_bits | (st.tag & ((1u << tag_step_bits) - 1));
    }
    _rounds.push_back(std::move(r));
  }
  _open = false;
  _next_block = shift + used;
  for (auto& t : other._temps) _temps.push_back(std::move(t));
  _temp_bytes += other._temp_bytes;
  for (auto& k : other._kept) _kept.push_back(std::move(k));
  for (auto& c : other._calls) _calls.push_back(std::move(c));
  for (auto& f : other._restarts) _restarts.push_back(std::move(f));
  other = schedule{};
}

std::byte* schedule::temp(std::size_t bytes) {
  _temps.push_back(std::make_unique<std::byte[]>(bytes ? bytes : 1));
  _temp_bytes += bytes;
  return _temps.back().get();
}

std::uint32_t schedule::tag_block() {
  const std::uint32_t b = _next_block++;
  if (b >= (1u << (tag_bits_local - tag_step_bits)))
    throw std::length_error("coll::schedule: too many algorithm phases for the local tag space");
  return b;
}

void schedule::skip_to_block(std::uint32_t block) {
  if (block > (1u << (tag_bits_local - tag_step_bits)))
    throw std::length_error("coll::schedule: too many algorithm phases for the local tag space");
  if (block > _next_block) _next_block = block;
}

std::uint32_t schedule::make_tag(std::uint32_t block, std::size_t i) {
  // Step numbers wrap: messages of one phase between a pair are posted in
  // the same order on both sides, so equal tags still match in order.
  return (block << tag_step_bits) | static_cast<std::uint32_t>(i & ((std::size_t{1} << tag_step_bits) - 1));
}

std::size_t schedule::max_comm_per_round() const {
  std::size_t m = 0;
  for (const auto& r : _rounds) m = std::max(m, r.comm.size());
  return m;
}

std::string schedule::describe() const {
  std::ostringstream o;
  for (std::size_t i = 0; i < _rounds.size(); ++i) {
    o << "round " << i << ":";
    for (const auto& s : _rounds[i].comm)
      o << (s.k == step::kind::send ? " send(" : " recv(") << s.peer << ",t" << s.tag << "," << s.bytes << ")";
    for (const auto& s : _rounds[i].local) {
      if (s.k == step::kind::call) {
        o << " call()";
        continue;
      }
      if (s.k == step::kind::reduce_into) {
        o << " reduce_into(" << s.count << ")";
        continue;
      }
      o << (s.k == step::kind::reduce ? " reduce(" : " copy(") << (s.k == step::kind::reduce ? s.count : s.bytes)
        << ")";
    }
    o << "\n";
  }
  return o.str();
}

void run_local_step(const step& s) {
  switch (s.k) {
    case step::kind::reduce: s.red->apply(s.src, s.dst, s.count); return;
    case step::kind::reduce_into: s.red->apply_into(s.src, s.src2, s.dst, s.count, s.bytes); return;
    case step::kind::call: (*s.fn)(); return;
    case step::kind::copy: std::memmove(s.dst, s.src, s.bytes); return;
    case step::kind::send:
    case step::kind::recv: break;
  }
  throw std::logic_error("coll: a communication step is not a local step");
}

// ---- executor -----------------------------------------------------------------

executor::executor(schedule&& s, transport& t, std::uint64_t seq) : _sched(std::move(s)), _t(t), _seq(seq) {
  const std::size_t m = _sched.max_comm_per_round();
  if (m) _reqs = std::make_unique<request[]>(m);
  _pending.assign(m, 0);
  if (_sched.rounds().empty()) _done.store(true, std::memory_order_release);
}

executor::executor(schedule&& s, transport& t, idle_t) : _sched(std::move(s)), _t(t), _seq(0) {
  const std::size_t m = _sched.max_comm_per_round();
  if (m) _reqs = std::make_unique<request[]>(m);
  _pending.assign(m, 0);
  _done.store(true, std::memory_order_release);
}

bool executor::restart(std::uint64_t seq) {
  if (!done()) throw std::logic_error("coll::executor::restart: the previous run is not finished");
  _seq = seq;
  _round = 0;
  _posted = false;
  _npending = 0;
  std::fill(_pending.begin(), _pending.end(), std::uint8_t{0});
  _error = errc::ok;
  _error_message.clear();
  try {
    for (const auto& fn : _sched.restart_steps()) fn();
  } catch (const std::exception& e) {
    _error = errc::internal;
    _error_message = std::string("restart step failed: ") + e.what();
    return true;  // still done: nothing was posted
  }
  if (_sched.rounds().empty()) return true;
  _done.store(false, std::memory_order_release);  // last: advance() may run from here on
  return false;
}

executor::~executor() {
  // Requests must not be destroyed while in flight: finish first.
  while (!advance()) {
  }
}

tag_t executor::full_tag(std::uint32_t local) const {
  const tag_t seq = static_cast<tag_t>(_seq) & ((tag_t{1} << tag_bits_seq) - 1);
  return (seq << tag_bits_local) | (static_cast<tag_t>(local) & ((tag_t{1} << tag_bits_local) - 1));
}

void executor::fail(errc e, std::string msg) {
  if (_error != errc::ok) return;
  _error = e;
  _error_message = std::move(msg);
  // Receives that did not match would never complete: cancel them.
  const auto& comm = _sched.rounds()[_round].comm;
  for (std::size_t i = 0; i < comm.size(); ++i)
    if (_pending[i] && comm[i].k == step::kind::recv) _t.cancel(_reqs[i]);
}

bool executor::advance() {
  if (_done.load(std::memory_order_acquire)) return true;
  if (_busy.exchange(true, std::memory_order_acquire)) return false;  // another thread advances it
  const bool finished = advance_locked();
  if (finished) _done.store(true, std::memory_order_release);
  _busy.store(false, std::memory_order_release);
  return finished;
}

bool executor::advance_locked() {
  const auto& rounds = _sched.rounds();
  while (_round < rounds.size()) {
    const round& r = rounds[_round];
    if (!_posted) {
      _posted = true;
      if (trace::enabled()) trace::emit(trace::event::coll_step, -1, 0, _seq, static_cast<std::uint32_t>(_round), r.comm.size(), 0);
      for (std::size_t i = 0; i < r.comm.size() && _error == errc::ok; ++i) {
        const step& s = r.comm[i];
        errc e;
        if (s.k == step::kind::send) e = _t.isend(s.peer, full_tag(s.tag), s.src, s.bytes, _reqs[i]);
        else e = _t.irecv(s.peer, full_tag(s.tag), s.dst, s.bytes, _reqs[i]);
        if (e != errc::ok) {
          std::string what = std::string(s.k == step::kind::send ? "send to" : "receive from") + " group rank " +
                             std::to_string(s.peer) + " failed to start: " + std::string(to_string(e));
          if (!_reqs[i].error_message().empty()) what += " (" + _reqs[i].error_message() + ")";
          fail(e, what);
          break;
        }
        _pending[i] = 1;
        ++_npending;
      }
    }
    if (_npending) _t.progress();
    for (std::size_t i = 0; i < r.comm.size() && _npending; ++i) {
      if (!_pending[i] || !_t.test(_reqs[i])) continue;
      _pending[i] = 0;
      --_npending;
      const errc e = _reqs[i].error();
      if (e != errc::ok && !(e == errc::cancelled && _error != errc::ok)) {
        const step& s = r.comm[i];
        std::string what = std::string(s.k == step::kind::send ? "send to" : "receive from") + " group rank " +
                           std::to_string(s.peer) + " failed: " + std::string(to_string(e));
        if (!_reqs[i].error_message().empty()) what += " (" + _reqs[i].error_message() + ")";
        fail(e, what);
      }
    }
    if (_npending) return false;
    if (_error != errc::ok) return true;  // everything drained
    try {
      for (const step& s : r.local) run_local_step(s);
    } catch (const std::exception& e) {
      // A reducer or a call step (user op, unpacking) failed: the schedule
      // cannot go on, and nothing of this round is in flight any more.
      fail(errc::internal, std::string("local step of round ") + std::to_string(_round) + " failed: " + e.what());
      return true;
    }
    if (trace::enabled()) trace::emit(trace::event::coll_step, -1, 0, _seq, static_cast<std::uint32_t>(_round), r.comm.size(), 1);
    ++_round;
    _posted = false;
  }
  return true;
}

bool executor::abandon() {
  if (done()) return true;
  if (_busy.exchange(true, std::memory_order_acquire)) return false;
  if (_round < _sched.rounds().size()) {
    fail(errc::cancelled, "abandoned before completion");
    const bool finished = advance_locked();  // collects the cancelled receives
    if (finished) _done.store(true, std::memory_order_release);
  }
  _busy.store(false, std::memory_order_release);
  return done();
}

errc run(schedule&& s, transport& t, std::uint64_t seq, std::string* error_message) {
  executor ex(std::move(s), t, seq);
  t.wait_until([](void* e) { return static_cast<executor*>(e)->advance(); }, &ex);
  if (error_message) *error_message = ex.error_message();
  return ex.error();
}

}  // namespace nmad::coll
