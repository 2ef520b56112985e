// nmad::rpc (api/nmad/rpc.hpp) on the engine's pack/unpack: a call is one
// packed message on the endpoint's request tag,
//   [request_wire: express] [header: express] [body: cheaper]
// and its answer one packed message on the answer tag of the call number,
//   [answer_wire: express] [header: express] [body: cheaper].
// Both are sent without waiting (session::isendv, pieces with their pack modes): the sender
// goes on serving and calling while the engine moves the bytes, so two
// ranks calling each other with rendezvous bodies do not wait on each
// other.
#include "api/nmad/rpc.hpp"

#include <algorithm>
#include <cstring>
#include <exception>

#include "api/nmad/services/log.hpp"

namespace nmad::rpc {
namespace {

constexpr std::uint32_t request_magic = 0x51435052;  // "RPCQ"
constexpr std::uint32_t answer_magic = 0x41435052;   // "RPCA"
constexpr std::uint64_t number_mask = (std::uint64_t{1} << 40) - 1;
constexpr int max_served_per_poll = 16;

struct request_wire {
  std::uint32_t magic;
  std::uint32_t service;
  std::uint64_t number;
  std::uint64_t header_len;
  std::uint64_t body_len;
};
struct answer_wire {
  std::uint32_t magic;
  std::uint32_t status;
  std::uint64_t header_len;
  std::uint64_t body_len;
  std::uint64_t reserved;
};
static_assert(sizeof(request_wire) == 32 && sizeof(answer_wire) == 32);

std::string service_name(service_id id) { return "service " + std::to_string(id); }
std::string rank_name(int r) { return "rank " + std::to_string(r); }

}  // namespace

// ---- reply and call ---------------------------------------------------------------

void reply::set_header(const void* data, std::size_t len) {
  const auto* p = static_cast<const std::byte*>(data);
  _header.assign(p, p + len);
}

void reply::set_body(std::span<const std::byte> view) {
  _owns = false;
  _owned.clear();
  _views.assign(1, view);
}

void reply::add_body(std::span<const std::byte> view) {
  if (_owns) {
    _owns = false;
    _owned.clear();
  }
  _views.push_back(view);
}

std::vector<std::byte>& reply::body_buffer() {
  _owns = true;
  _views.clear();
  return _owned;
}

call::call() = default;
call::~call() {
  if (!_done)
    log_write(log_level::error, "rpc", "a pending call was destroyed (its endpoint still refers to it)");
}

std::span<const std::byte> call::reply_body() const {
  if (_reply_in_buffer) return std::span<const std::byte>(_reply_buffer.data(), _reply_length);
  return _reply_owned;
}

// ---- endpoint -------------------------------------------------------------------

struct endpoint::pending_answer {
  request req;
  answer_wire wire{};
  reply rep;
  int dest = -1;
};

endpoint::endpoint(session& s, tag_t tag_base) : _s(s), _base(tag_base) {
  if (tag_base & ((number_mask << 1) | 1))
    throw std::invalid_argument("nmad::rpc: tag base " + std::to_string(tag_base) +
                                " must leave its low 41 bits zero");
}

endpoint::~endpoint() {
  if (!_calls.empty())
    log_write(log_level::error, "rpc", std::to_string(_calls.size()) + " call(s) still pending when the endpoint ended");
  for (call* c : _calls) {
    // Not finished: leave the call in a state its destructor accepts once
    // its send is over (the answer, if any, stays unreceived).
    if (c->_send.completed()) c->_done = true;
  }
  // Answers still on their way: their buffers live here.
  _s.wait_until([&] {
    reap_answers();
    return _answers.empty();
  });
}

void endpoint::register_service(service_id id, handler h) { _services[id] = std::move(h); }
void endpoint::unregister_service(service_id id) { _services.erase(id); }

tag_t endpoint::answer_tag(std::uint64_t number) const { return _base + 1 + (number & number_mask); }

void endpoint::finish(call& c, errc e, rpc::status st, std::string message) {
  c._error = e;
  c._status = st;
  c._message = std::move(message);
  c._done = true;
}

errc endpoint::call_async(int dest, service_id id, std::span<const std::byte> header, std::span<const std::byte> body,
                          call& c, std::span<std::byte> reply_body) {
  if (!c._done) return errc::invalid_argument;  // still pending: the caller's bug
  c._dest = dest;
  c._service = id;
  c._answered = false;
  c._error = errc::ok;
  c._status = rpc::status::not_answered;
  c._message.clear();
  c._reply_header.clear();
  c._reply_owned.clear();
  c._reply_buffer = reply_body;
  c._reply_length = 0;
  c._reply_in_buffer = false;
  const std::string what = "rpc call of " + service_name(id) + " at " + rank_name(dest);
  if (dest < 0 || dest >= _s.size()) {
    finish(c, errc::invalid_argument, rpc::status::not_answered,
           what + ": no such rank (size " + std::to_string(_s.size()) + ")");
    return c._error;
  }
  if (!_s.peer_alive(dest)) {
    finish(c, errc::peer_failed, rpc::status::not_answered, what + ": " + rank_name(dest) + " failed");
    return c._error;
  }
  c._number = _next_number++ & number_mask;
  const request_wire w{request_magic, id, c._number, header.size(), body.size()};
  std::memcpy(c._wire, &w, sizeof w);
  c._done = false;
  const send_piece pieces[] = {{c._wire, sizeof w, pack_mode::express},
                               {header.data(), header.size(), pack_mode::express},
                               {body.data(), body.size(), pack_mode::cheaper}};
  const errc e = _s.isendv(dest, _base, pieces, c._send);
  if (e != errc::ok && c._send.completed()) {
    finish(c, e, rpc::status::not_answered,
           what + ": " + (c._send.error_message().empty() ? std::string(to_string(e)) : c._send.error_message()));
    return e;
  }
  // (An error on a piece with the send still under way: the send
  // completes with it and advance() reports it.)
  _calls.push_back(&c);
  return errc::ok;
}

errc endpoint::call_sync(int dest, service_id id, std::span<const std::byte> header, std::span<const std::byte> body,
                         call& c, std::span<std::byte> reply_body) {
  const errc e = call_async(dest, id, header, body, c, reply_body);
  if (e != errc::ok && c.done()) return e;
  return wait(c);
}

// Receives the answer of c (its first piece is here).
static void receive_answer(session& s, call& c, tag_t tag, errc& e, rpc::status& st, std::string& msg,
                           std::vector<std::byte>& header, std::vector<std::byte>& owned, std::span<std::byte> buffer,
                           std::size_t& length, bool& in_buffer) {
  unpack_connection u(s, c.peer(), tag);
  answer_wire a{};
  e = u.unpack(&a, sizeof a, pack_mode::express);
  if (e != errc::ok) return;
  if (a.magic != answer_magic || a.header_len > (std::uint64_t{1} << 32) || a.body_len > (std::uint64_t{1} << 40)) {
    e = errc::protocol_error;
    msg = "malformed answer";
    u.end();
    return;
  }
  header.resize(a.header_len);
  if (a.header_len) e = u.unpack(header.data(), header.size(), pack_mode::express);
  if (e != errc::ok) return;
  std::vector<std::byte> excess;
  if (a.body_len) {
    if (!buffer.empty() && a.body_len <= buffer.size()) {
      e = u.unpack(buffer.data(), a.body_len, pack_mode::cheaper);
      in_buffer = true;
    } else if (!buffer.empty()) {
      excess.resize(a.body_len);  // read it all (the message must be consumed), then fail
      e = u.unpack(excess.data(), excess.size(), pack_mode::cheaper);
      if (e == errc::ok) {
        e = u.end();
        if (e == errc::ok) {
          e = errc::truncated;
          msg = "answer body of " + std::to_string(a.body_len) + " bytes, reply buffer of " +
                std::to_string(buffer.size());
        }
        return;
      }
    } else {
      owned.resize(a.body_len);
      e = u.unpack(owned.data(), owned.size(), pack_mode::cheaper);
    }
  } else if (!buffer.empty()) {
    in_buffer = true;
  }
  length = a.body_len;
  const errc ended = u.end();
  if (e == errc::ok) e = ended;
  if (e != errc::ok) return;
  st = static_cast<rpc::status>(a.status);
  switch (st) {
    case rpc::status::ok:
      break;
    case rpc::status::unknown_service:
      e = errc::invalid_argument;
      break;
    case rpc::status::handler_failed:
      e = errc::internal;
      msg.assign(reinterpret_cast<const char*>(owned.data()), owned.size());
      if (in_buffer) msg.assign(reinterpret_cast<const char*>(buffer.data()), length);
      break;
    default:
      e = errc::protocol_error;
      msg = "answer with unknown status " + std::to_string(a.status);
  }
}

bool endpoint::advance(call& c) {
  const std::string what = "rpc call of " + service_name(c._service) + " at " + rank_name(c._dest);
  if (!c._answered) {
    recv_status st;
    if (_s.iprobe(c._dest, answer_tag(c._number), st)) {
      errc e = errc::ok;
      rpc::status status = rpc::status::not_answered;
      std::string msg;
      receive_answer(_s, c, answer_tag(c._number), e, status, msg, c._reply_header, c._reply_owned, c._reply_buffer,
                     c._reply_length, c._reply_in_buffer);
      c._answered = true;
      c._status = status;
      c._error = e;
      if (e != errc::ok) {
        if (status == rpc::status::unknown_service)
          c._message = what + ": " + rank_name(c._dest) + " has no " + service_name(c._service);
        else if (status == rpc::status::handler_failed)
          c._message = what + ": the handler failed: " + msg;
        else
          c._message = what + ": " + std::string(to_string(e)) + (msg.empty() ? "" : ": " + msg);
      }
    } else if (c._send.completed() && c._send.error() != errc::ok) {
      c._answered = true;
      c._error = c._send.error();
      c._message = what + ": " + c._send.error_message();
    } else if (!_s.peer_alive(c._dest)) {
      c._answered = true;
      c._error = errc::peer_failed;
      c._message = what + ": " + rank_name(c._dest) + " failed before answering";
    }
  }
  if (!c._answered || !c._send.completed()) return false;
  c._done = true;
  return true;
}

int endpoint::serve_one(int source) {
  unpack_connection u(_s, source, _base);
  request_wire w{};
  errc e = u.unpack(&w, sizeof w, pack_mode::express);
  if (e != errc::ok) {
    log_write(log_level::warn, "rpc", "call from " + rank_name(source) + " lost: " + std::string(to_string(e)));
    return 1;
  }
  if (w.magic != request_magic || w.header_len > (std::uint64_t{1} << 32) || w.body_len > (std::uint64_t{1} << 40)) {
    log_write(log_level::warn, "rpc", "malformed call from " + rank_name(source) + " dropped");
    u.end();
    return 1;
  }
  _req_header.resize(w.header_len);
  _req_body.resize(w.body_len);
  if (w.header_len) e = u.unpack(_req_header.data(), _req_header.size(), pack_mode::express);
  if (e == errc::ok && w.body_len) e = u.unpack(_req_body.data(), _req_body.size(), pack_mode::cheaper);
  const errc ended = u.end();
  if (e == errc::ok) e = ended;
  if (e != errc::ok) {
    log_write(log_level::warn, "rpc", "call of " + service_name(w.service) + " from " + rank_name(source) +
                                          " lost: " + std::string(to_string(e)));
    return 1;
  }
  auto a = std::make_unique<pending_answer>();
  a->dest = source;
  rpc::status st = rpc::status::ok;
  auto it = _services.find(w.service);
  if (it == _services.end()) {
    st = rpc::status::unknown_service;
  } else {
    const incoming in{source, w.service, _req_header, _req_body};
    try {
      it->second(in, a->rep);
    } catch (const std::exception& ex) {
      st = rpc::status::handler_failed;
      a->rep = reply{};
      const std::string text = ex.what();
      auto& b = a->rep.body_buffer();
      b.resize(text.size());
      std::memcpy(b.data(), text.data(), text.size());
    } catch (...) {
      st = rpc::status::handler_failed;
      a->rep = reply{};
    }
  }
  if (a->rep._owns) a->rep._views.assign(1, std::span<const std::byte>(a->rep._owned));
  std::uint64_t body_len = 0;
  for (const auto& v : a->rep._views) body_len += v.size();
  a->wire = answer_wire{answer_magic, static_cast<std::uint32_t>(st), a->rep._header.size(), body_len, 0};
  std::vector<send_piece> pieces;
  pieces.reserve(2 + a->rep._views.size());
  pieces.push_back({&a->wire, sizeof a->wire, pack_mode::express});
  pieces.push_back({a->rep._header.data(), a->rep._header.size(), pack_mode::express});
  for (const auto& v : a->rep._views) pieces.push_back({v.data(), v.size(), pack_mode::cheaper});
  // (A failed answer completes a->req with its error; the caller's side
  // reports it as a failure of the call.)
  _s.isendv(source, answer_tag(w.number), pieces, a->req);
  ++_served;
  _answers.push_back(std::move(a));
  return 1;
}

void endpoint::reap_answers() {
  for (std::size_t i = 0; i < _answers.size();) {
    if (_answers[i]->req.completed()) {
      if (_answers[i]->req.error() != errc::ok)
        log_write(log_level::warn, "rpc", "answer to " + rank_name(_answers[i]->dest) +
                                              " not delivered: " + _answers[i]->req.error_message());
      _answers[i] = std::move(_answers.back());
      _answers.pop_back();
    } else {
      ++i;
    }
  }
}

int endpoint::poll() {
  int n = _s.progress() > 0 ? 1 : 0;
  recv_status st;
  for (int i = 0; i < max_served_per_poll && _s.iprobe(any_source, _base, st); ++i) n += serve_one(st.source);
  std::vector<call*> finished;
  for (std::size_t i = 0; i < _calls.size();) {
    if (advance(*_calls[i])) {
      finished.push_back(_calls[i]);
      _calls.erase(_calls.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  reap_answers();
  for (call* c : finished)
    if (c->_callback) c->_callback(*c);
  return n + static_cast<int>(finished.size());
}

bool endpoint::ready() {
  recv_status st;
  if (_s.iprobe(any_source, _base, st)) return true;
  for (call* c : _calls) {
    if (c->_answered) {
      if (c->_send.completed()) return true;
      continue;
    }
    if (_s.iprobe(c->_dest, answer_tag(c->_number), st)) return true;
    if (c->_send.completed() && c->_send.error() != errc::ok) return true;
    if (!_s.peer_alive(c->_dest)) return true;
  }
  return false;
}

bool endpoint::test(call& c) {
  poll();
  return c.done();
}

errc endpoint::wait(call& c) {
  while (!c.done()) {
    if (poll() == 0 && !c.done()) _s.wait_until([&] { return ready(); });
  }
  return c.error();
}

void endpoint::serve_until(const std::function<bool()>& done) {
  while (!done()) {
    if (poll() == 0 && !done()) _s.wait_until([&] { return ready() || done(); });
  }
}

}  // namespace nmad::rpc
