#pragma once
// A PMI-1 ("simple PMI") server for one job of `size` ranks, driven by the
// caller's poll() loop. Connections are non-blocking sockets: either known
// ranks (PMI_FD socketpairs) or accepted from a listening socket (PMI_PORT),
// whose rank is learnt from the `cmd=initack pmiid=N` handshake.
//
// Supported commands: initack, init, get_maxes, get_my_kvsname,
// get_universe_size, get_appnum, put, get, barrier_in, finalize, abort.
// Not thread-safe; single poll loop.
#include <poll.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  // Takes ownership of a listening socket (PMI_PORT mode).
  void add_listener(int fd);

  // Appends the pollfds to watch; then call handle() with the same vector
  // (after poll) starting at the same index.
  void fill_pollfds(std::vector<pollfd>& fds);
  void handle(const std::vector<pollfd>& fds, std::size_t first);

  // The rank's process has ended: a barrier it has not entered can never
  // complete, so the ranks waiting in it get their connection closed (their
  // fence fails at once instead of hanging). Finalize and abort count too.
  void rank_exited(int rank);
  // Closes every connection (end of job).
  void close_all();

  int size() const { return _size; }
  const std::string& kvsname() const { return _kvsname; }
  bool finalized(int rank) const;

 private:
  struct conn;
  void handle_conn(conn& c, short revents);
  void process_line(conn& c, const std::string& line);
  void reply(conn& c, std::string text);
  void flush(conn& c);
  void close_conn(conn& c);
  void protocol_error(conn& c, const std::string& what);
  void check_barrier();
  std::string rank_name(const conn& c) const;

  int _size;
  std::string _kvsname;
  limits _limits;
  int _listen_fd = -1;
  std::vector<std::unique_ptr<conn>> _conns;
  std::map<std::string, std::string> _kvs;
  std::vector<char> _in_barrier;   // per rank
  std::vector<char> _gone;         // per rank: finalized, aborted or exited
  std::vector<char> _finalized;    // per rank
  std::vector<char> _connected;    // per rank: has (had) a connection
  int _barrier_count = 0;
  bool _barrier_failure_reported = false;
  std::size_t _npolled = 0;
};

}  // namespace nmad::launcher
