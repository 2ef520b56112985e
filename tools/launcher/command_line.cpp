// nmad-run's command line: options and their NMAD_RUN_* defaults, the usage
// text, and finding the program to run as execvp would.
#include "tools/launcher/launcher_internal.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "api/nmad/services/config.hpp"
#include "tools/launcher/hosts.hpp"

namespace nmad::launcher {
namespace {

std::optional<double> parse_seconds(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end || !std::isfinite(v) || v < 0 || v > 1e8) return std::nullopt;
  return v;
}

}  // namespace

using detail::errno_text;

std::string resolve_program(const std::string& prog) {
  if (prog.empty()) throw usage_error("missing program to run");
  auto check = [](const std::string& p, std::string* why) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      *why = errno_text(errno);
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      *why = "is a directory";
      return false;
    }
    if (!S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0) {
      *why = "not executable (permission denied)";
      return false;
    }
    return true;
  };
  std::string why;
  if (prog.find('/') != std::string::npos) {
    if (check(prog, &why)) return prog;
    throw usage_error("cannot execute '" + prog + "': " + why);
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string first_problem;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = path.find(':', i);
    std::string dir = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (dir.empty()) dir = ".";
    std::string cand = dir + "/" + prog;
    if (check(cand, &why)) return cand;
    if (first_problem.empty() && why.find("No such file") == std::string::npos)
      first_problem = "'" + cand + "': " + why;
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (!first_problem.empty()) throw usage_error("cannot execute " + first_problem);
  throw usage_error("'" + prog + "': command not found (searched PATH)");
}

std::string usage_text() {
  return "Usage: nmad-run -n N [--timeout SECONDS] [--kill-grace SECONDS] [-x VAR[=VALUE]]... [--] program "
         "[args...]\n"
         "  -n, -np N             number of processes (ranks) to start, N >= 1\n"
         "  --timeout SECONDS     end the job after SECONDS (exit 124); default $NMAD_RUN_TIMEOUT or none\n"
         "  --kill-grace SECONDS  after a rank fails, time the others get before SIGTERM;\n"
         "                        default $NMAD_RUN_KILL_GRACE or 2\n"
         "  -x VAR=VALUE          set VAR in the ranks' environment (-x VAR: forward VAR)\n"
         "  --bind core|none|auto bind each local rank to the core (or CPU) the placement gives it:\n"
         "                        scatter by NUMA node, spread inside it (auto: only when 2 or more\n"
         "                        local ranks fit the CPUs); default $NMAD_RUN_BIND or auto;\n"
         "                        --bind-to is the same option\n"
         "  --report-bindings     print each rank's CPUs, NUMA node and why (also\n"
         "                        $NMAD_RUN_REPORT_BINDINGS=1)\n"
         "  --pmi-port            serve PMI over TCP (PMI_PORT) instead of inherited sockets (PMI_FD)\n"
         "  --host H[:N],...      run ranks on these hosts, N slots each (default 1); -n defaults to the\n"
         "                        total; hosts other than this machine are started with $NMAD_RUN_SSH\n"
         "                        (default 'ssh -o BatchMode=yes'); their PMI address is $NMAD_RUN_PMI_HOST\n"
         "  --hostfile FILE       the same from a file: 'host', 'host:N' or 'host slots=N' per line\n"
         "  --oversubscribe       no warning when this host gets more ranks than CPUs (also\n"
         "                        $NMAD_RUN_OVERSUBSCRIBE=1)\n"
         "  -h, --help            this help\n";
}

job_options parse_command_line(int argc, const char* const* argv, bool* help) {
  job_options o;
  if (help) *help = false;
  // The knobs through the configuration reader; a bad value keeps the
  // default here and stops run_job (one message, exit 2).
  auto knob = [](auto read) {
    try {
      read();
    } catch (const config::config_error&) {
    }
  };
  knob([&] {
    if (const double t = config::duration("NMAD_RUN_TIMEOUT").count() / 1e6; t > 0) o.timeout_s = t;
  });
  knob([&] { o.kill_grace_s = config::duration("NMAD_RUN_KILL_GRACE").count() / 1e6; });
  bool have_n = false;
  std::vector<host_slot> hosts;
  o.ssh_command = config::text("NMAD_RUN_SSH");
  knob([&] { o.bind = config::word("NMAD_RUN_BIND"); });
  knob([&] { o.report_bindings = config::flag("NMAD_RUN_REPORT_BINDINGS"); });
  knob([&] { o.progress_placement = config::word("NMAD_PROGRESS_PLACEMENT"); });
  o.warn_oversubscribed = true;
  knob([&] { o.warn_oversubscribed = !config::flag("NMAD_RUN_OVERSUBSCRIBE"); });
  knob([&] { o.pmi_host = config::text("NMAD_RUN_PMI_HOST"); });
  int i = 1;
  auto value_of = [&](const std::string& opt, std::string_view arg, std::size_t prefix) -> std::string {
    if (arg.size() > prefix) {
      std::string_view rest = arg.substr(prefix);
      if (rest.front() == '=') rest.remove_prefix(1);
      return std::string(rest);
    }
    if (i + 1 >= argc) throw usage_error("option " + opt + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-' || a == "-") break;
    if (a == "-h" || a == "--help") {
      if (help) *help = true;
      return o;
    }
    if (a == "-np" || a.starts_with("-np=") || a == "--np" || a.starts_with("--np=") || a == "-n" ||
        (a.starts_with("-n") && !a.starts_with("--"))) {
      std::size_t prefix = a.starts_with("--np") ? 4 : a.starts_with("-np") ? 3 : 2;
      std::string v = value_of("-n", a, prefix);
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || errno || n < 1 || n > 100000)
        throw usage_error("-n needs a number of processes >= 1, got '" + v + "'");
      o.nprocs = static_cast<int>(n);
      have_n = true;
    } else if (a == "--timeout" || a.starts_with("--timeout=")) {
      std::string v = value_of("--timeout", a, 9);
      auto s = parse_seconds(v);
      if (!s || *s <= 0) throw usage_error("--timeout needs a positive number of seconds, got '" + v + "'");
      o.timeout_s = *s;
    } else if (a == "--kill-grace" || a.starts_with("--kill-grace=")) {
      std::string v = value_of("--kill-grace", a, 12);
      auto s = parse_seconds(v);
      if (!s) throw usage_error("--kill-grace needs a number of seconds >= 0, got '" + v + "'");
      o.kill_grace_s = *s;
    } else if (a == "-x" || a == "--export" || a.starts_with("--export=")) {
      std::string v = value_of("-x", a, a == "-x" ? 2 : 8);
      auto eq = v.find('=');
      std::string name = v.substr(0, eq);
      if (name.empty()) throw usage_error("-x needs VAR or VAR=VALUE, got '" + v + "'");
      if (eq != std::string::npos) {
        o.env_set.push_back(v);
      } else if (const char* cur = std::getenv(name.c_str())) {
        o.env_set.push_back(name + "=" + cur);
      }  // else: VAR unset here, nothing to forward
    } else if (a == "--bind-to" || a.starts_with("--bind-to=")) {
      o.bind = value_of("--bind-to", a, 9);
    } else if (a == "--bind" || a.starts_with("--bind=")) {
      o.bind = value_of("--bind", a, 6);
    } else if (a == "--report-bindings") {
      o.report_bindings = true;
    } else if (a == "--oversubscribe") {
      o.warn_oversubscribed = false;
    } else if (a == "--pmi-port") {
      o.pmi_port = true;
    } else if (a == "--host" || a.starts_with("--host=") || a == "-H") {
      for (auto& h : parse_host_list(value_of("--host", a, a == "-H" ? 2 : 6))) hosts.push_back(h);
    } else if (a == "--hostfile" || a.starts_with("--hostfile=") || a == "-f") {
      for (auto& h : parse_hostfile(value_of("--hostfile", a, a == "-f" ? 2 : 10))) hosts.push_back(h);
    } else {
      throw usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  for (; i < argc; ++i) o.argv.emplace_back(argv[i]);
  if (!have_n && !hosts.empty()) {
    o.nprocs = total_slots(hosts);  // one rank per slot
    have_n = true;
  }
  if (!have_n) throw usage_error("missing -n N (the number of processes)");
  if (!hosts.empty()) o.rank_hosts = place_ranks(hosts, o.nprocs);
  if (o.argv.empty()) throw usage_error("missing program to run");
  if (o.bind != "auto" && o.bind != "core" && o.bind != "none")
    throw usage_error("--bind (--bind-to, NMAD_RUN_BIND) must be core, none or auto, got '" + o.bind + "'");
  return o;
}

}  // namespace nmad::launcher
