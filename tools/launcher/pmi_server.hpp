#pragma once
// A PMI-1 ("simple PMI") server for one job of `size` ranks, driven by the
// caller's poll() loop. Connections are non-blocking sockets: either known
// ranks (PMI_FD socketpairs) or accepted from a listening socket (PMI_PORT),
// whose rank is learnt from the `cmd=initack pmiid=N` handshake.
//
// Authentication of accepted connections: with set_auth_tokens(), a client
// of the listening socket must present its rank's token in its first line,
// `cmd=initack pmiid=N auth=TOKEN` (an extra key PMI-1 servers ignore, sent
// by our client when NMAD_PMI_AUTH is set). Anything else before that (a
// wrong or missing token, another command, a line over 4 KiB) closes that
// connection with a rate-limited report and a last line saying why
// (`cmd=initack rc=-1 msg=...`); the rank stays free for its genuine process
// and the job goes on. PMI_FD socketpairs need no token.
//
// Strangers holding connections open cannot push a genuine rank out:
//  * identify first: a new connection is read as soon as it is accepted
//    (a genuine client sends its initack right after connecting, so it is
//    usually there already), and the known connections are read before
//    anything new is accepted;
//  * at most 32 unidentified connections per source address (127/8 counts
//    as one) and 128 in all; past that, the oldest one that has stayed
//    silent for 500 ms goes (`msg=silent`), or, when every one is younger,
//    the newcomer is turned away (`msg=busy`); our client connects again
//    after either, with backoff, until its PMI timeout;
//  * at most 64 accepts per listening socket per handle(): a stream of
//    connections cannot keep the caller's loop (signals, exits, the ranks'
//    replies) from running; accept errors (EMFILE & co) stop watching that
//    socket for 100 ms instead of spinning on it (see poll_timeout_ms()).
//
// Supported commands: initack, init, get_maxes, get_my_kvsname,
// get_universe_size, get_appnum, put, get, barrier_in, finalize, abort.
// Not thread-safe; single poll loop.
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/nmad/services/log.hpp"

namespace nmad::launcher {

class pmi_server {
 public:
  struct limits {
    std::size_t kvsname_max = 256;
    std::size_t keylen_max = 256;
    std::size_t vallen_max = 1024;
  };

  // Called when a rank sends `cmd=abort` (message decoded, may be empty).
  std::function<void(int rank, int exit_code, const std::string& message)> on_abort;
  // Diagnostics worth a line on stderr (protocol errors, failed barriers).
  std::function<void(const std::string& text)> on_report;

  pmi_server(int size, std::string kvsname, limits lim);
  pmi_server(int size, std::string kvsname) : pmi_server(size, std::move(kvsname), limits{}) {}
  ~pmi_server();
  pmi_server(const pmi_server&) = delete;
  pmi_server& operator=(const pmi_server&) = delete;

  // Takes ownership of a connected socket for `rank` (-1: unknown until
  // initack). The fd is made non-blocking.
  void add_connection(int fd, int rank);
  // Takes ownership of a listening socket (PMI_PORT mode). Several may be
  // added (local and remote ranks).
  void add_listener(int fd);
  // One secret per rank (tokens[r] for rank r) that accepted connections
  // must present; without it (empty) any initack is taken.
  void set_auth_tokens(std::vector<std::string> tokens);
  // Connections refused so far (wrong token, junk, too many unidentified).
  std::size_t refused() const { return _refused; }

  // Appends the pollfds to watch; then call handle() with the same vector
  // (after poll) starting at the same index.
  void fill_pollfds(std::vector<pollfd>& fds);
  void handle(const std::vector<pollfd>& fds, std::size_t first);
  // The longest the caller's poll may sleep for the server's sake (a
  // listening socket paused after an accept error); -1: no limit.
  int poll_timeout_ms() const;

  // The rank's process has ended: a barrier it has not entered can never
  // complete, so the ranks waiting in it get their connection closed (their
  // fence fails at once instead of hanging). Finalize and abort count too.
  void rank_exited(int rank);
  // Closes every connection (end of job).
  void close_all();

  int size() const { return _size; }
  const std::string& kvsname() const { return _kvsname; }
  bool finalized(int rank) const;
  // The rank has (had) a PMI connection.
  bool connected(int rank) const { return rank >= 0 && rank < _size && _connected[rank]; }
  // The rank sent `cmd=init`: it is a PMI client that owes a finalize.
  bool initialised(int rank) const;
  // Reads what the rank wrote before it ended (a finalize in flight counts).
  void drain(int rank);

 private:
  struct conn;
  void handle_conn(conn& c, short revents);
  void process_line(conn& c, const std::string& line);
  void reply(conn& c, std::string text);
  void flush(conn& c);
  void close_conn(conn& c);
  void protocol_error(conn& c, const std::string& what);
  void refuse(conn& c, const std::string& why, const std::string& msg);
  void accept_some(std::size_t listener);
  void make_room(conn& newcomer);
  void check_barrier();
  std::string rank_name(const conn& c) const;

  int _size;
  std::string _kvsname;
  limits _limits;
  std::vector<int> _listen_fds;
  std::vector<std::chrono::steady_clock::time_point> _listen_paused_until;  // per listener
  std::vector<std::string> _auth;  // per rank; empty: no authentication
  std::size_t _refused = 0;
  std::unique_ptr<log_limiter> _refusal_log = std::make_unique<log_limiter>(5, std::chrono::seconds(10));
  std::vector<std::unique_ptr<conn>> _conns;
  std::map<std::string, std::string> _kvs;
  std::vector<char> _in_barrier;   // per rank
  std::vector<char> _gone;         // per rank: finalized, aborted or exited
  std::vector<char> _finalized;    // per rank
  std::vector<char> _initialised;  // per rank: sent cmd=init
  std::vector<char> _connected;    // per rank: has (had) a connection
  int _barrier_count = 0;
  bool _barrier_failure_reported = false;
  std::size_t _npolled = 0;
};

}  // namespace nmad::launcher
