#pragma once
// Where ranks run: --host / --hostfile parsing and rank placement.
//
//   --host a,b:2,c          hosts with optional slot counts (default 1)
//   --hostfile FILE         one host a line: "name", "name:N" or
//                           "name slots=N"; '#' starts a comment
// Ranks fill the hosts in order, `slots` at a time; past the total number
// of slots they wrap around (oversubscription). A host that names this
// machine (localhost, its hostname, or one of its interface addresses) is
// started locally; others are started through ssh.
#include <string>
#include <vector>

namespace nmad::launcher {

struct host_slot {
  std::string name;
  int slots = 1;
};

// Throws usage_error on a malformed spec.
std::vector<host_slot> parse_host_list(const std::string& spec);
std::vector<host_slot> parse_hostfile(const std::string& path);
int total_slots(const std::vector<host_slot>& hosts);
// Host of each of the n ranks.
std::vector<std::string> place_ranks(const std::vector<host_slot>& hosts, int n);
// Whether `host` is this machine.
bool is_local_host(const std::string& host);
// An IPv4 address for `host` (the literal itself, or a DNS answer); empty if
// it has none.
std::string ipv4_of(const std::string& host);
// Quotes one word for a POSIX shell.
std::string shell_quote(const std::string& word);

}  // namespace nmad::launcher
