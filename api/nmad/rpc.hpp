#pragma once
// nmad::rpc: remote procedure calls on the native API.
//
// An endpoint serves *services* (a 32-bit id -> a handler) and calls the
// services of other ranks. A call carries a header and a body; the header
// travels as an express piece (the server reads it at once) and the body
// as a cheaper one, so the engine's strategy may aggregate or reorder the
// body behind the header (and behind other traffic). The answer has the
// same shape: a reply header (express) and a reply body (cheaper).
//
//   nmad::rpc::endpoint ep(*session);
//   ep.register_service(7, [](const nmad::rpc::incoming& in, nmad::rpc::reply& out) {
//     out.set_header(in.header.data(), in.header.size());     // copied
//     out.set_body(in.body);                                  // a view: see reply
//   });
//   nmad::rpc::call c;
//   ep.call(1, 7, hdr, body, c);            // synchronous: returns when answered
//   ep.call_async(1, 7, hdr, body, c2);     // asynchronous: ep.wait(c2), ep.test(c2)
//
// Progress: handlers run, and calls complete, inside the endpoint's calls
// (poll, test, wait, call, serve_until) on the thread that makes them; an
// endpoint is used by one thread at a time. A rank that only serves loops
// on serve_until(). While a rank waits for its own calls it serves the
// calls made to it, so two ranks may call each other.
//
// Errors: a call to a rank that failed, or that fails before answering,
// completes with errc::peer_failed and a message naming the rank and the
// service (never hangs). A call to a service the server has not
// registered completes with errc::invalid_argument, status()
// status::unknown_service and a message naming the service and the rank;
// a handler that throws answers status::handler_failed (errc::internal)
// with the exception's text. The server goes on either way.
//
// Messages: each endpoint uses the tags from `tag_base` (low 41 bits zero) to tag_base + 2^40
// (requests on tag_base, answers on tag_base + 1 + call number); the
// other ranks' endpoints must use the same base. The application must not
// use those tags for its own messages.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nmad.hpp"

namespace nmad::rpc {

using service_id = std::uint32_t;
constexpr tag_t default_tag_base = tag_t{0x7270000000000000ULL};  // "rp" in the top bytes

// How a call ended, as the server saw it.
enum class status : std::uint32_t {
  ok = 0,
  unknown_service = 1,  // no handler registered for the id at the server
  handler_failed = 2,   // the handler threw (its text is error_message())
  not_answered = 3,     // no answer: the call failed before (peer failed, bad argument) or is pending
};

// A call as its handler sees it. The spans are valid during the handler.
struct incoming {
  int source = -1;
  service_id service = 0;
  std::span<const std::byte> header;
  std::span<const std::byte> body;
};

// What a handler answers. The header is copied; the body is either views
// of memory the server keeps unchanged until the answer is sent (set_body,
// add_body: e.g. the pages of a page server, sent without a copy; each
// view is one cheaper piece, the caller receives their concatenation), or
// bytes the reply owns (body_buffer). The answer is sent when the handler
// returns and its bytes leave while the endpoint's calls progress.
class reply {
 public:
  void set_header(const void* data, std::size_t len);
  void set_body(std::span<const std::byte> view);  // replaces the body
  void add_body(std::span<const std::byte> view);  // appends a piece
  std::vector<std::byte>& body_buffer();           // owned body (replaces the views)

 private:
  friend class endpoint;
  std::vector<std::byte> _header;
  std::vector<std::byte> _owned;
  std::vector<std::span<const std::byte>> _views;
  bool _owns = false;
};

using handler = std::function<void(const incoming& in, reply& out)>;

// One call (synchronous or not). Must not move or be destroyed while
// pending (it holds a request); reusable once done.
class call {
 public:
  call();
  call(const call&) = delete;
  call& operator=(const call&) = delete;
  ~call();

  bool done() const { return _done; }
  errc error() const { return _error; }
  rpc::status status() const { return _status; }
  // Names the failure (rank, service, reason); empty on success.
  const std::string& error_message() const { return _message; }
  int peer() const { return _dest; }
  // The answer (valid once done and ok). With a reply buffer given to
  // call_async, reply_body() is the part of that buffer the answer filled.
  std::span<const std::byte> reply_header() const { return _reply_header; }
  std::span<const std::byte> reply_body() const;
  // Runs once when the call completes (inside the endpoint call that
  // completed it; it may start other calls but not wait).
  void on_complete(std::function<void(call&)> fn) { _callback = std::move(fn); }

 private:
  friend class endpoint;
  request _send;
  int _dest = -1;
  service_id _service = 0;
  std::uint64_t _number = 0;
  bool _done = true;
  bool _answered = false;
  errc _error = errc::ok;
  rpc::status _status = rpc::status::not_answered;
  std::string _message;
  std::vector<std::byte> _reply_header;
  std::vector<std::byte> _reply_owned;
  std::span<std::byte> _reply_buffer;  // given by the caller (may be empty)
  std::size_t _reply_length = 0;
  bool _reply_in_buffer = false;
  std::function<void(call&)> _callback;
  // Request header, kept until the send completes.
  alignas(8) std::byte _wire[32];
};

class endpoint {
 public:
  explicit endpoint(session& s, tag_t tag_base = default_tag_base);
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;
  // Sends the answers still under way (every call of this endpoint must be
  // done by then).
  ~endpoint();

  session& get_session() { return _s; }
  // Registers (or replaces) the handler of a service.
  void register_service(service_id id, handler h);
  void unregister_service(service_id id);

  // Starts a call of service `id` at rank `dest`. header and body must
  // stay valid until the call is done. reply_body, if not empty, receives
  // the answer's body (a longer body fails the call with errc::truncated);
  // otherwise the call keeps it. Returns errc::ok or the error the call
  // completed with at once (bad rank, failed peer).
  errc call_async(int dest, service_id id, std::span<const std::byte> header, std::span<const std::byte> body,
                  call& c, std::span<std::byte> reply_body = {});
  // call_async then wait.
  errc call_sync(int dest, service_id id, std::span<const std::byte> header, std::span<const std::byte> body,
                 call& c, std::span<std::byte> reply_body = {});
  // Progresses: serves the calls that arrived, completes the calls that
  // were answered (or whose peer failed), reclaims answers sent. Returns
  // the number of events (0: nothing happened).
  int poll();
  bool test(call& c);  // poll, then whether c is done
  errc wait(call& c);  // polls (waiting with the session's policy) until c is done
  // Serves calls until done() returns true (checked after every poll).
  void serve_until(const std::function<bool()>& done);
  // Calls served and answered since the endpoint was made.
  std::uint64_t served() const { return _served; }

 private:
  struct pending_answer;
  bool ready() ;                 // something for poll to do (no wait)
  int serve_one(int source);     // a request from source is here
  bool advance(call& c);         // true when it completed now
  void finish(call& c, errc e, rpc::status st, std::string message);
  void reap_answers();
  tag_t answer_tag(std::uint64_t number) const;

  session& _s;
  tag_t _base;
  std::map<service_id, handler> _services;
  std::vector<call*> _calls;  // pending
  std::vector<std::unique_ptr<pending_answer>> _answers;
  std::uint64_t _next_number = 1;
  std::uint64_t _served = 0;
  std::vector<std::byte> _req_header, _req_body;  // the request being served
};

}  // namespace nmad::rpc
