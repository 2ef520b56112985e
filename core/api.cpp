// The public nmad:: API: thin wrappers over session_impl.
#include <stdexcept>

#include "api/nmad/nmad.hpp"
#include "core/common/log.hpp"
#include "core/session_impl.hpp"

namespace nmad {

request::~request() {
  if (!_state.is_complete())
    log_write(log_level::error, "api", "a pending request was destroyed; its buffer may still be written");
}

recv_status request::status() const {
  recv_status st;
  st.error = _state.error;
  if (_state.type == request_state::kind::recv && _state.matched) {
    st.source = _state.msg.source;
    st.tag = _state.msg.tag;
    st.length = _state.msg.total == message_state::unknown ? 0 : std::min(_state.msg.total, _state.capacity);
  }
  return st;
}

session::session(std::unique_ptr<session_impl> impl) : _impl(std::move(impl)) {}
session::~session() = default;

std::unique_ptr<session> session::create(const session_options& opts) {
  return std::unique_ptr<session>(new session(std::make_unique<session_impl>(opts)));
}

int session::rank() const { return _impl->rank(); }
int session::size() const { return _impl->size(); }
std::string_view session::strategy_name() const { return _impl->strategy_name(); }
errc session::set_strategy(std::string_view name) { return _impl->set_strategy(name); }

errc session::isend(int dest, tag_t tag, const void* buf, std::size_t len, request& req,
                    send_flags flags) {
  req._state.owner = &req;
  return _impl->isend(dest, tag, buf, len, req._state, flags);
}

errc session::irecv(int source, tag_t tag, void* buf, std::size_t len, request& req, tag_t mask) {
  req._state.owner = &req;
  return _impl->irecv(source, tag, mask, buf, len, req._state);
}

bool session::test(request& req) { return _impl->test(req._state); }
errc session::wait(request& req) { return _impl->wait(req._state); }
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

bool session::improbe(int source, tag_t tag, recv_status& st, message_handle& msg, tag_t mask) {
  msg._msg = _impl->improbe(source, tag, mask, st);
  return msg._msg != nullptr;
}

errc session::imrecv(message_handle& msg, void* buf, std::size_t len, request& req) {
  req._state.owner = &req;
  errc e = _impl->imrecv(msg._msg, buf, len, req._state);
  if (e == errc::ok) msg._msg = nullptr;
  return e;
}

int session::add_progress_task(int (*fn)(void*), void* arg) { return _impl->add_progress_task(fn, arg); }
void session::remove_progress_task(int id) { _impl->remove_progress_task(id); }
void session::abort(int exit_code, const std::string& message) { _impl->abort(exit_code, message); }

bool session::cancel(request& req) { return _impl->cancel(req._state); }
int session::progress() { return _impl->progress(); }
session_stats session::stats() const { return _impl->stats(); }
bool session::peer_alive(int rank) const { return _impl->peer_alive(rank); }
std::string session::local_address(std::string_view driver) const { return _impl->local_address(driver); }
std::string session::driver_name() const { return _impl->driver_name(); }

// ---- pack / unpack ---------------------------------------------------------------

pack_connection::pack_connection(session& s, int dest, tag_t tag) : _session(s) {
  _req._state.owner = &_req;
  errc e = s.impl().pack_begin(dest, tag, _req._state);
  if (e == errc::invalid_argument) throw std::invalid_argument(_req._state.error_message);
}

pack_connection::~pack_connection() {
  if (!_ended) end();
}

errc pack_connection::pack(const void* buf, std::size_t len, pack_mode mode) {
  if (_ended) return errc::invalid_argument;
  return _session.impl().pack_piece(_req._state, buf, len, mode);
}

errc pack_connection::end() {
  if (_ended) return _req.error();
  _ended = true;
  return _session.impl().pack_end(_req._state);
}

unpack_connection::unpack_connection(session& s, int source, tag_t tag) : _session(s) {
  _req._state.owner = &_req;
  errc e = s.impl().irecv(source, tag, full_mask, nullptr, 0, _req._state, /*sealed=*/false);
  if (e == errc::invalid_argument) throw std::invalid_argument(_req._state.error_message);
}

unpack_connection::~unpack_connection() {
  if (!_ended) end();
}

errc unpack_connection::unpack(void* buf, std::size_t len, pack_mode mode) {
  if (_ended) return errc::invalid_argument;
  return _session.impl().unpack_piece(_req._state, buf, len, mode);
}

errc unpack_connection::end() {
  if (_ended) return _req.error();
  _ended = true;
  return _session.impl().unpack_end(_req._state);
}

int unpack_connection::source() const { return _req.status().source; }

}  // namespace nmad
