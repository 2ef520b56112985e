#include "tools/launcher/hosts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "tools/launcher/launcher.hpp"

namespace nmad::launcher {
namespace {

host_slot parse_one(std::string item, const std::string& where) {
  host_slot h;
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t\r");
    const auto e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  item = trim(item);
  std::string count;
  bool has_count = false;
  if (auto sp = item.find_first_of(" \t"); sp != std::string::npos) {
    std::string rest = trim(item.substr(sp));
    item = item.substr(0, sp);
    if (rest.find_first_of(" \t") != std::string::npos)
      throw usage_error(where + ": expected 'HOST slots=N', got more after the host: '" + rest + "'");
    if (rest.rfind("slots=", 0) != 0)
      throw usage_error(where + ": expected 'slots=N' after the host, got '" + rest + "'");
    count = rest.substr(6);
    has_count = true;
  } else if (auto colon = item.rfind(':'); colon != std::string::npos) {
    count = item.substr(colon + 1);
    item = item.substr(0, colon);
    has_count = true;
  }
  if (item.empty()) throw usage_error(where + ": empty host name");
  // A name ssh gets on its command line: letters, digits, '.', '-', '_'
  // only, and no leading '-' (it would be read as an ssh option).
  if (item.front() == '-' || item.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                                 std::string::npos)
    throw usage_error(where + ": '" + item + "' is not a host name (letters, digits, '.', '-', '_')");
  h.name = item;
  if (has_count) {
    char* end = nullptr;
    errno = 0;
    long n = count.empty() ? 0 : std::strtol(count.c_str(), &end, 10);
    if (count.empty() || errno || *end || n < 1 || n > 100000)
      throw usage_error(where + ": bad slot count '" + count + "' for " + item + " (want a number from 1 to 100000)");
    h.slots = static_cast<int>(n);
  }
  return h;
}

}  // namespace

std::vector<host_slot> parse_host_list(const std::string& spec) {
  std::vector<host_slot> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(parse_one(item, "--host"));
  if (out.empty()) throw usage_error("--host needs at least one host");
  return out;
}

std::vector<host_slot> parse_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw usage_error("cannot read hostfile '" + path + "'");
  std::vector<host_slot> out;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out.push_back(parse_one(line, path + ":" + std::to_string(lineno)));
  }
  if (out.empty()) throw usage_error("hostfile '" + path + "' names no host");
  return out;
}

int total_slots(const std::vector<host_slot>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.slots;
  return n;
}

std::vector<std::string> place_ranks(const std::vector<host_slot>& hosts, int n) {
  std::vector<std::string> out;
  while (static_cast<int>(out.size()) < n)
    for (const auto& h : hosts)
      for (int s = 0; s < h.slots && static_cast<int>(out.size()) < n; ++s) out.push_back(h.name);
  return out;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && host == name) return true;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return false;
  bool local = false;
  for (ifaddrs* i = ifs; i && !local; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    local = host == buf;
  }
  ::freeifaddrs(ifs);
  return local;
}

std::string ipv4_of(const std::string& host) {
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return {};
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  ::freeaddrinfo(res);
  return buf;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace nmad::launcher
