// The public nmad:: API: thin wrappers over session_impl.
#include <stdexcept>

#include "api/nmad/layer.hpp"
#include "api/nmad/nmad.hpp"
#include "core/session_factory.hpp"
#include "core/session_impl.hpp"

namespace nmad {

// ---- request: the engine's state in the request's opaque storage ------------------

request::request() { request_storage::construct(*this)->owner = this; }

request::~request() {
  request_state& s = state_of(*this);
  // Pending: cancelled, or waited for where it is already under way (see
  // session_impl::abandon); nothing of the engine refers to it afterwards.
  if (!s.is_complete()) session_impl::abandon(s);
  s.~request_state();
}

void request::on_complete(callback fn, void* arg) {
  request_state& s = state_of(*this);
  s.cb = fn;
  s.cb_arg = arg;
}

bool request::completed() const { return state_of(*this).is_complete(); }
errc request::error() const { return state_of(*this).error; }
const std::string& request::error_message() const { return state_of(*this).error_message; }

recv_status request::status() const {
  const request_state& s = state_of(*this);
  recv_status st;
  st.error = s.error;
  if (s.type == request_state::kind::recv && s.matched) {
    st.source = s.msg.source;
    st.tag = s.msg.tag;
    st.length = s.msg.total == message_state::unknown ? 0 : std::min(s.msg.total, s.capacity);
  }
  return st;
}

session::session(std::unique_ptr<session_impl> impl) : _impl(std::move(impl)) {}
session::~session() = default;

// session::create itself is not here: it belongs to the library that
// bundles the engine with its drivers (libnmad/session_create.cpp), which
// registers them and then opens the session through the factory.
std::unique_ptr<session> session_factory::open(const session_options& opts) {
  return std::unique_ptr<session>(new session(std::make_unique<session_impl>(opts)));
}

int session::rank() const { return _impl->rank(); }
int session::size() const { return _impl->size(); }
std::string_view session::strategy_name() const { return _impl->strategy_name(); }
errc session::set_strategy(std::string_view name) { return _impl->set_strategy(name); }

errc session::isend(int dest, tag_t tag, const void* buf, std::size_t len, request& req,
                    send_flags flags) {
  return _impl->isend(dest, tag, buf, len, state_of(req), flags);
}

errc session::isend(int dest, tag_t tag, const void* buf, std::size_t len, request& req,
                    const send_options& opts) {
  return _impl->isend(dest, tag, buf, len, state_of(req), opts.flags, opts.priority);
}

errc session::irecv(int source, tag_t tag, void* buf, std::size_t len, request& req, tag_t mask) {
  return _impl->irecv(source, tag, mask, buf, len, state_of(req));
}

errc session::psend_begin(int dest, tag_t tag, std::size_t len, request& req, const send_options& opts) {
  return _impl->psend_begin(dest, tag, len, state_of(req), opts.priority);
}

errc session::psend_piece(request& req, std::size_t offset, const void* buf, std::size_t n) {
  return _impl->psend_piece(state_of(req), offset, buf, n);
}

errc session::precv(int source, tag_t tag, void* buf, std::size_t len, std::size_t part_len, request& req) {
  return _impl->precv(source, tag, buf, len, part_len, state_of(req));
}

bool session::parrived(const request& req, std::size_t first, std::size_t count) const {
  return _impl->parrived(state_of(req), first, count);
}

bool session::test(request& req) { return _impl->test(state_of(req)); }
errc session::wait(request& req) {
  request_state& r = state_of(req);
  if (r.is_complete()) return r.error;  // the common case of a Waitall: no waiter round
  return _impl->wait(r);
}
int session::wait_any(std::span<request* const> reqs) { return _impl->wait_any(reqs); }

bool session::iprobe(int source, tag_t tag, recv_status& st, tag_t mask) {
  return _impl->iprobe(source, tag, mask, st);
}

recv_status session::probe(int source, tag_t tag, tag_t mask) { return _impl->probe(source, tag, mask); }

void session::wait_until(bool (*done)(void*), void* arg) { _impl->wait_until(done, arg); }

void session::set_wait_policy(wait_policy policy, std::chrono::nanoseconds spin) {
  _impl->the_waiter().set_config({policy, spin});
}

wait_policy session::get_wait_policy() const { return _impl->the_waiter().config().policy; }
std::chrono::nanoseconds session::get_wait_spin() const { return _impl->the_waiter().config().spin; }

bool session::improbe(int source, tag_t tag, recv_status& st, message_handle& msg, tag_t mask) {
  msg._msg = _impl->improbe(source, tag, mask, st);
  return msg._msg != nullptr;
}

errc session::imrecv(message_handle& msg, void* buf, std::size_t len, request& req) {
  errc e = _impl->imrecv(msg._msg, buf, len, state_of(req));
  if (e == errc::ok) msg._msg = nullptr;
  return e;
}

std::string session::progress_description() const { return _impl->progress_description(); }
bool session::has_progress_thread() const { return _impl->has_progress_thread(); }
void session::abort(int exit_code, const std::string& message) { _impl->abort(exit_code, message); }

bool session::cancel(request& req) { return _impl->cancel(state_of(req)); }
int session::progress() {
  const int work = _impl->progress();
  if (work == 0) _impl->the_waiter().idle_poll();
  return work;
}
int session::progress_quiet() { return _impl->progress(); }
void session::idle_poll() { _impl->the_waiter().idle_poll(); }
bool session::contended() const { return _impl->the_waiter().yield_now(); }
void session::notify_waiters() { _impl->notify_waiters(); }
session_stats session::stats() const { return _impl->stats(); }
std::vector<gate_stats> session::peer_stats() const { return _impl->peer_stats(); }
std::size_t session::rdv_threshold(int peer) const { return _impl->rdv_threshold(peer); }
std::size_t session::set_rdv_threshold(std::size_t bytes) { return _impl->set_rdv_threshold(bytes); }
bool session::peer_alive(int rank) const { return _impl->peer_alive(rank); }
std::string session::local_address(std::string_view driver) const { return _impl->local_address(driver); }
std::string session::driver_name() const { return _impl->driver_name(); }

errc session::isendv(int dest, tag_t tag, std::span<const send_piece> pieces, request& req) {
  request_state& r = state_of(req);
  errc e = _impl->pack_begin(dest, tag, r);
  for (const send_piece& p : pieces)
    if (e == errc::ok && p.len > 0) e = _impl->pack_piece(r, p.buf, p.len, p.mode);
  const errc sealed = _impl->pack_seal(r);  // (ends the message whatever happened)
  return e == errc::ok ? sealed : e;
}

// ---- layer hooks (layer.hpp) ------------------------------------------------------

struct layer_access {
  static session_impl& of(session& s) { return *s._impl; }
  static const session_impl& of(const session& s) { return *s._impl; }
};

namespace layer {

progress_task::progress_task(session& s, task_fn fn, void* arg)
    : _session(&s), _id(layer_access::of(s).add_progress_task(fn, arg)) {}

progress_task::progress_task(progress_task&& other) noexcept : _session(other._session), _id(other._id) {
  other._session = nullptr;
  other._id = -1;
}

progress_task& progress_task::operator=(progress_task&& other) noexcept {
  if (this != &other) {
    reset();
    _session = other._session;
    _id = other._id;
    other._session = nullptr;
    other._id = -1;
  }
  return *this;
}

void progress_task::reset() {
  if (_session) layer_access::of(*_session).remove_progress_task(_id);
  _session = nullptr;
  _id = -1;
}

void add_session_task(session& s, task_fn fn, void* arg) { layer_access::of(s).add_progress_task(fn, arg); }
void background_work(session& s, long delta) { layer_access::of(s).background_work(delta); }
int progress_all_drivers(session& s) { return layer_access::of(s).progress(/*wait_busy_drivers=*/true); }
blocking_section::blocking_section(session& s) : _session(s) { layer_access::of(s).begin_blocking(); }
blocking_section::~blocking_section() { layer_access::of(_session).end_blocking(); }
std::size_t copy_offload_min(const session& s) { return layer_access::of(s).copy_offload_min(); }

}  // namespace layer

// ---- pack / unpack ---------------------------------------------------------------

pack_connection::pack_connection(session& s, int dest, tag_t tag) : _session(s) {
  errc e = s.impl().pack_begin(dest, tag, state_of(_req));
  if (e == errc::invalid_argument) throw std::invalid_argument(state_of(_req).error_message);
}

pack_connection::pack_connection(session& s, int dest, tag_t tag, const send_options& opts) : _session(s) {
  errc e = s.impl().pack_begin(dest, tag, state_of(_req), opts.priority);
  if (e == errc::invalid_argument) throw std::invalid_argument(state_of(_req).error_message);
}

pack_connection::~pack_connection() {
  if (!_ended) end();
}

errc pack_connection::pack(const void* buf, std::size_t len, pack_mode mode) {
  if (_ended) return errc::invalid_argument;
  return _session.impl().pack_piece(state_of(_req), buf, len, mode);
}

errc pack_connection::end() {
  if (_ended) return _req.error();
  _ended = true;
  return _session.impl().pack_end(state_of(_req));
}

unpack_connection::unpack_connection(session& s, int source, tag_t tag) : _session(s) {
  errc e = s.impl().irecv(source, tag, full_mask, nullptr, 0, state_of(_req), /*sealed=*/false);
  if (e == errc::invalid_argument) throw std::invalid_argument(state_of(_req).error_message);
}

unpack_connection::~unpack_connection() {
  if (!_ended) end();
}

errc unpack_connection::unpack(void* buf, std::size_t len, pack_mode mode) {
  if (_ended) return errc::invalid_argument;
  return _session.impl().unpack_piece(state_of(_req), buf, len, mode);
}

errc unpack_connection::end() {
  if (_ended) return _req.error();
  _ended = true;
  return _session.impl().unpack_end(state_of(_req));
}

int unpack_connection::source() const { return _req.status().source; }

}  // namespace nmad
