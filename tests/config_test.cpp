// The configuration reader (api/nmad/services/config.hpp): the table, every kind
// at and past its boundaries, overflow, empty and garbage values, named
// values, list syntaxes, the start-up check with unknown names, and the
// documentation listing every knob.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "tests/test_paths.hpp"

namespace config = nmad::config;

namespace {

// Parses `text` for knob `name`: "" when accepted (value in *out), else
// the full message a config_error would carry.
std::string try_parse(const std::string& name, std::optional<std::string> text, config::value* out = nullptr) {
  const config::knob* k = config::find(name);
  REQUIRE_MESSAGE(k, name << " is not in the table");
  config::value v;
  const std::string why = config::parse(*k, text ? std::optional<std::string_view>(*text) : std::nullopt, v);
  if (out) *out = v;
  return why.empty() ? "" : config::message(name, text.value_or(""), why);
}

std::int64_t accepted(const std::string& name, const std::string& text) {
  config::value v;
  const std::string why = try_parse(name, text, &v);
  INFO(name << "=" << text << ": " << why);
  REQUIRE(why.empty());
  REQUIRE_FALSE(v.automatic);
  return v.number;
}

// Sets (or unsets) an environment variable for one scope.
struct scoped_env {
  std::string name;
  std::optional<std::string> old;
  scoped_env(std::string n, std::optional<std::string> value) : name(std::move(n)) {
    if (const char* o = std::getenv(name.c_str())) old = o;
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ~scoped_env() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

constexpr std::int64_t KiB = 1024, MiB = KiB << 10, GiB = MiB << 10;

}  // namespace

TEST_CASE("the table: names, defaults, ranges and words hold together") {
  std::set<std::string_view> names;
  const std::set<std::string_view> scopes = {"engine", "shm", "tcp", "ofi", "mpi", "launcher", "tools", "testing"};
  for (const config::knob& k : config::knobs()) {
    CAPTURE(std::string(k.name));
    CHECK(k.name.rfind("NMAD_", 0) == 0);
    CHECK(names.insert(k.name).second);
    CHECK(scopes.count(k.scope) == 1);
    CHECK(!k.what.empty());
    CHECK(config::find(k.name) == &k);
    // Every default is a value the knob accepts.
    config::value v;
    CHECK(config::parse(k, std::nullopt, v) == "");
    CHECK(v.given == false);
    switch (k.type) {
      case config::kind::integer:
      case config::kind::size:
      case config::kind::duration:
        CHECK(k.min >= 0);
        CHECK(k.min <= k.max);
        if (!v.automatic) CHECK(v.number == v.number);
        break;
      case config::kind::choice: CHECK(!k.words.empty()); break;
      case config::kind::list: CHECK(k.def.empty()); break;
      default: break;
    }
    CHECK(!config::accepts(k).empty());
  }
  CHECK(config::knobs().size() >= 70);
  CHECK(config::find("NMAD_NO_SUCH_KNOB") == nullptr);
}

TEST_CASE("flag: 0 or 1, nothing else") {
  CHECK(accepted("NMAD_STATS", "0") == 0);
  CHECK(accepted("NMAD_STATS", "1") == 1);
  for (const char* bad : {"", "yes", "2", "01", " 1", "1 ", "true", "-1"})
    CHECK(try_parse("NMAD_SHM_CMA", std::string(bad)) ==
          "NMAD_SHM_CMA=\"" + std::string(bad) + "\": expected 0 or 1");
  config::value v;
  CHECK(try_parse("NMAD_SHM_CMA", std::nullopt, &v) == "");
  CHECK(v.number == 1);  // the default
}

TEST_CASE("integer: the range's ends, one past them, overflow and garbage") {
  CHECK(accepted("NMAD_TCP_PORT", "0") == 0);
  CHECK(accepted("NMAD_TCP_PORT", "65535") == 65535);
  CHECK(accepted("NMAD_TCP_PORT", "00080") == 80);  // decimal, never octal
  const std::string says = "\": expected an integer, 0..65535";
  for (const char* bad : {"65536", "-1", "", "abc", "80x", "0x50", "+80", " 80", "80 ", "8 0", "1e3", "80.0",
                          "99999999999999999999999", "9223372036854775807", "9223372036854775808"})
    CHECK(try_parse("NMAD_TCP_PORT", std::string(bad)) == "NMAD_TCP_PORT=\"" + std::string(bad) + says);
  CHECK(accepted("NMAD_TCP_PENDING_PER_HOST", "1") == 1);
  CHECK(try_parse("NMAD_TCP_PENDING_PER_HOST", std::string("0")) ==
        "NMAD_TCP_PENDING_PER_HOST=\"0\": expected an integer, 1..1000000");
  CHECK(accepted("NMAD_FUZZ_SEED", "4294967295") == 4294967295ll);
  // Unset without a default: computed (set by nmad-run).
  config::value v;
  CHECK(try_parse("NMAD_RUN_CPUS", std::nullopt, &v) == "");
  CHECK(v.automatic);
}

TEST_CASE("size: suffixes, boundaries, -1 and overflow") {
  CHECK(accepted("NMAD_SHM_RING", "262144") == 256 * KiB);
  CHECK(accepted("NMAD_SHM_RING", "256K") == 256 * KiB);
  CHECK(accepted("NMAD_SHM_RING", "256k") == 256 * KiB);
  CHECK(accepted("NMAD_SHM_RING", "256KiB") == 256 * KiB);
  CHECK(accepted("NMAD_SHM_RING", "1M") == MiB);
  CHECK(accepted("NMAD_SHM_RING", "1g") == GiB);
  CHECK(accepted("NMAD_SHM_RING", "1GiB") == GiB);
  CHECK(accepted("NMAD_SHM_RING", "1073741824") == GiB);
  const std::string says = "\": expected a size in bytes (digits, optional K, M, G or T), 256K..1G";
  // -1 once gave 1 GiB rings (strtoull wraps it).
  for (const char* bad : {"-1", "255K", "262143", "1073741825", "2G", "1T", "", "K", "1.5M", "1 M", "1MB", "1Mi",
                          "0x40000", "18446744073709551615", "9007199254740992K", "99999999999999999999999G"})
    CHECK(try_parse("NMAD_SHM_RING", std::string(bad)) == "NMAD_SHM_RING=\"" + std::string(bad) + says);
  // Thresholds of -1 are refused; the largest threshold is accepted.
  CHECK(try_parse("NMAD_COPY_THRESHOLD", std::string("-1")) ==
        "NMAD_COPY_THRESHOLD=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 0..1G");
  CHECK(try_parse("NMAD_RDV_THRESHOLD", std::string("-1")) ==
        "NMAD_RDV_THRESHOLD=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 0..1G, or auto");
  CHECK(accepted("NMAD_COLL_SCAN_LARGE", "1T") == GiB * 1024);
  // The one size parser for everything else.
  std::uint64_t n = 0;
  CHECK(config::parse_size("16K", n));
  CHECK(n == 16 * 1024);
  CHECK(config::parse_size("8T", n));
  CHECK(n == 8ull << 40);
  CHECK_FALSE(config::parse_size("8388608T", n));  // 2^63: past 64 bits signed
  CHECK_FALSE(config::parse_size("2K", n, 1024));  // past the caller's maximum
  CHECK_FALSE(config::parse_size("", n));
  CHECK_FALSE(config::parse_size("-5", n));
}

TEST_CASE("size with named values: unlimited, on/off, a bare 0 outside the range, auto") {
  CHECK(accepted("NMAD_UNEXPECTED_MAX", "unlimited") == 0);
  CHECK(accepted("NMAD_UNEXPECTED_MAX", "0") == 0);
  CHECK(accepted("NMAD_UNEXPECTED_MAX", "64M") == 64 * MiB);
  CHECK(try_parse("NMAD_UNEXPECTED_MAX", std::string("lots")) ==
        "NMAD_UNEXPECTED_MAX=\"lots\": expected a size in bytes (digits, optional K, M, G or T), 0..1T, or unlimited");
  CHECK(accepted("NMAD_COPY_OFFLOAD", "on") == 16 * KiB);
  CHECK(accepted("NMAD_COPY_OFFLOAD", "off") == 0);
  CHECK(accepted("NMAD_COPY_OFFLOAD", "none") == 0);
  CHECK(accepted("NMAD_COPY_OFFLOAD", "4K") == 4 * KiB);
  CHECK(try_parse("NMAD_COPY_OFFLOAD", std::string("sometimes")).find("or off, none, on") != std::string::npos);
  CHECK(accepted("NMAD_TCP_SOCKBUF", "0") == 0);
  CHECK(accepted("NMAD_TCP_SOCKBUF", "4K") == 4 * KiB);
  CHECK(try_parse("NMAD_TCP_SOCKBUF", std::string("1024")) ==
        "NMAD_TCP_SOCKBUF=\"1024\": expected a size in bytes (digits, optional K, M, G or T), 4K..1G, or 0");
  config::value v;
  CHECK(try_parse("NMAD_RDV_THRESHOLD", std::string("auto"), &v) == "");
  CHECK(v.automatic);
  CHECK(try_parse("NMAD_RDV_THRESHOLD", std::nullopt, &v) == "");
  CHECK(v.automatic);
  CHECK(accepted("NMAD_RDV_THRESHOLD", "0") == 0);
}

TEST_CASE("duration: ms as integers, s with fractions, 64 bits end to end") {
  // 3000000000 ms once wrapped to a negative int (MPI_Finalize then
  // dropped queued sends at once).
  CHECK(accepted("NMAD_FINALIZE_TIMEOUT_MS", "3000000000") == 3'000'000'000'000);
  CHECK(accepted("NMAD_FINALIZE_TIMEOUT_MS", "1000000000000") == 1'000'000'000'000'000);
  CHECK(accepted("NMAD_FINALIZE_TIMEOUT_MS", "0") == 0);
  CHECK(try_parse("NMAD_FINALIZE_TIMEOUT_MS", std::string("1000000000001")) ==
        "NMAD_FINALIZE_TIMEOUT_MS=\"1000000000001\": expected a duration in ms, 0..1000000000000");
  CHECK(try_parse("NMAD_FINALIZE_TIMEOUT_MS", std::string("99999999999999999999")).find("0..1000000000000") !=
        std::string::npos);
  // Empty, garbage and negative once silently became 0.
  for (const char* bad : {"", "abc", "-5", "0", "3600001", "1.5", "30s", "9223372036854775807"})
    CHECK(try_parse("NMAD_SHM_CONNECT_TIMEOUT_MS", std::string(bad)) ==
          "NMAD_SHM_CONNECT_TIMEOUT_MS=\"" + std::string(bad) + "\": expected a duration in ms, 1..3600000");
  CHECK(accepted("NMAD_SHM_CONNECT_TIMEOUT_MS", "1") == 1000);
  CHECK(accepted("NMAD_SHM_CONNECT_TIMEOUT_MS", "3600000") == 3'600'000'000);
  CHECK(accepted("NMAD_WAIT_SPIN_US", "250") == 250);
  CHECK(accepted("NMAD_RUN_KILL_GRACE", "0.5") == 500'000);
  CHECK(accepted("NMAD_RUN_KILL_GRACE", "2") == 2'000'000);
  CHECK(accepted("NMAD_RUN_KILL_GRACE", "0.000001") == 1);
  CHECK(accepted("NMAD_RUN_TIMEOUT", "none") == 0);
  CHECK(accepted("NMAD_PMI_TIMEOUT", "0.001") == 1000);
  const std::string s = "\": expected a duration in s (fractions allowed), 0.001..10000000";
  for (const char* bad : {"0", "0.0009", "0.0000001", "1.", ".5", "1.2.3", "-1", "10000000.5", "soon"})
    CHECK(try_parse("NMAD_PMI_TIMEOUT", std::string(bad)) == "NMAD_PMI_TIMEOUT=\"" + std::string(bad) + s);
  const config::knob& k = *config::find("NMAD_RUN_KILL_GRACE");
  CHECK(config::format(k, 1'500'000) == "1.5");
  CHECK(config::format(k, 2'000'000) == "2");
  CHECK(config::format(k, 1'000'001) == "1.000001");
}

TEST_CASE("choice and the values that once passed without a word") {
  CHECK(try_parse("NMAD_LOG", std::string("debug")) == "");
  CHECK(try_parse("NMAD_LOG", std::string("verbose")) ==
        "NMAD_LOG=\"verbose\": expected one of error, warn, info, debug");
  CHECK(try_parse("NMAD_LOG", std::string("")) == "NMAD_LOG=\"\": expected one of error, warn, info, debug");
  CHECK(try_parse("NMAD_LOG", std::string("WARN")) != "");
  CHECK(try_parse("NMAD_PROGRESS", std::string("sometimes")) ==
        "NMAD_PROGRESS=\"sometimes\": expected one of none, thread, auto");
  CHECK(try_parse("NMAD_PROGRESS_PLACEMENT", std::string("odd_even")) == "");
  config::value v;
  CHECK(try_parse("NMAD_WRAPPER_LANG", std::nullopt, &v) == "");
  CHECK(v.word == "");
}

TEST_CASE("text and list: empty is unset, lists are checked") {
  config::value v;
  CHECK(try_parse("NMAD_DRIVER", std::string(""), &v) == "");
  CHECK(v.word == "auto");
  CHECK_FALSE(v.given);
  CHECK(try_parse("NMAD_DRIVER", std::string("tcp"), &v) == "");
  CHECK(v.word == "tcp");
  CHECK(v.given);
  CHECK(try_parse("NMAD_PROGRESS_CPUS", std::string("0-3,8")) == "");
  CHECK(try_parse("NMAD_PROGRESS_CPUS", std::string("")) == "");
  CHECK(try_parse("NMAD_PROGRESS_CPUS", std::string("0-x")) ==
        "NMAD_PROGRESS_CPUS=\"0-x\": expected a CPU list such as 0-3,8 (CPUs 0..65535)");
  for (const char* bad : {"3-1", "0,", ",0", "65536", "a", "1--2"})
    CHECK(try_parse("NMAD_PROGRESS_CPUS", std::string(bad)) != "");
  CHECK(config::parse_cpu_list("3,0-2,2") == std::vector<int>{0, 1, 2, 3});
  CHECK(try_parse("NMAD_TCP_HOSTS", std::string("127.0.0.1,10.0.0.2")) == "");
  CHECK(try_parse("NMAD_TCP_HOSTS", std::string(",127.0.0.1")) == "NMAD_TCP_HOSTS=\",127.0.0.1\": entry 1 is empty");
  CHECK(try_parse("NMAD_TCP_HOSTS", std::string("127.0.0.1,localhost")) ==
        "NMAD_TCP_HOSTS=\"127.0.0.1,localhost\": entry 2 'localhost' is not an IPv4 address");
  CHECK(try_parse("NMAD_TCP_HOST", std::string("localhost")) ==
        "NMAD_TCP_HOST=\"localhost\": 'localhost' is not an IPv4 address");
  CHECK(try_parse("NMAD_RAIL_BANDWIDTH", std::string("100,25.5")) == "");
  CHECK(try_parse("NMAD_RAIL_BANDWIDTH", std::string("100,0")).find("entry 2 ('0') is not a bandwidth") !=
        std::string::npos);
  CHECK(try_parse("NMAD_THREAD_PRIORITIES", std::string("progress=18, internal = 2")) == "");
  for (const char* bad : {"application=30", "progress", "nice=3", "progress=-1", "progress=x"})
    CHECK(try_parse("NMAD_THREAD_PRIORITIES", std::string(bad)) ==
          "NMAD_THREAD_PRIORITIES=\"" + std::string(bad) +
              "\": expected KEY=N entries separated by commas, KEY one of application, progress, internal, N 0..20");
}

TEST_CASE("messages quote the value: escapes and a cut") {
  CHECK(try_parse("NMAD_LOG", std::string("a\"b\\c\n\x01")) ==
        "NMAD_LOG=\"a\\\"b\\\\c\\x0a\\x01\": expected one of error, warn, info, debug");
  const std::string long_value(500, '7');
  const std::string m = try_parse("NMAD_TCP_PORT", long_value);
  CHECK(m == "NMAD_TCP_PORT=\"" + std::string(120, '7') + "...\": expected an integer, 0..65535");
}

TEST_CASE("reading the environment: typed accessors, defaults, errors naming the variable") {
  {
    scoped_env e("NMAD_FINALIZE_TIMEOUT_MS", "3000000000");
    CHECK(config::milliseconds("NMAD_FINALIZE_TIMEOUT_MS").count() == 3'000'000'000);
    CHECK(config::is_set("NMAD_FINALIZE_TIMEOUT_MS"));
  }
  {
    scoped_env e("NMAD_FINALIZE_TIMEOUT_MS", std::nullopt);
    CHECK(config::milliseconds("NMAD_FINALIZE_TIMEOUT_MS").count() == 30000);
    CHECK_FALSE(config::is_set("NMAD_FINALIZE_TIMEOUT_MS"));
  }
  {
    scoped_env e("NMAD_SHM_CONNECT_TIMEOUT_MS", "abc");
    CHECK_THROWS_WITH_AS(config::milliseconds("NMAD_SHM_CONNECT_TIMEOUT_MS"),
                         "NMAD_SHM_CONNECT_TIMEOUT_MS=\"abc\": expected a duration in ms, 1..3600000",
                         config::config_error);
  }
  {
    scoped_env e("NMAD_SHM_RING", "1M");
    CHECK(config::size("NMAD_SHM_RING") == static_cast<std::uint64_t>(MiB));
  }
  {
    scoped_env a("NMAD_RDV_THRESHOLD", std::nullopt);
    CHECK_FALSE(config::optional_size("NMAD_RDV_THRESHOLD").has_value());
    scoped_env b("NMAD_RDV_THRESHOLD", "4K");
    CHECK(config::optional_size("NMAD_RDV_THRESHOLD") == std::optional<std::uint64_t>(4096));
    // A knob that may be computed is read with optional_*: a code error.
    CHECK_THROWS_AS(config::size("NMAD_WAIT_SPIN_US"), std::logic_error);
  }
  {
    scoped_env e("NMAD_WAIT_SPIN_US", "auto");
    CHECK_FALSE(config::optional_duration("NMAD_WAIT_SPIN_US").has_value());
  }
  {
    scoped_env e("NMAD_TCP_PORT", "8080");
    CHECK(config::integer("NMAD_TCP_PORT") == 8080);
    CHECK_THROWS_AS(config::flag("NMAD_TCP_PORT"), std::logic_error);  // read as another kind
  }
  {
    scoped_env e("NMAD_STATS", "1");
    CHECK(config::flag("NMAD_STATS"));
  }
  {
    scoped_env e("NMAD_LOG", "info");
    CHECK(config::word("NMAD_LOG") == "info");
  }
  {
    scoped_env e("NMAD_STRATEGY", "");
    CHECK(config::text("NMAD_STRATEGY") == "default");
  }
  CHECK_THROWS_AS(config::read("NMAD_NOT_A_KNOB"), std::logic_error);
  CHECK_THROWS_AS(config::text("NMAD_NOT_A_KNOB"), std::logic_error);
}

TEST_CASE("unknown names: the nearest knob by edit distance") {
  auto u = config::nearest_knob("NMAD_FINALISE_TIMEOUT_MS");
  CHECK(u.nearest == "NMAD_FINALIZE_TIMEOUT_MS");
  CHECK(u.distance == 1);
  CHECK(config::unknown_message(u).rfind(
            "NMAD_FINALISE_TIMEOUT_MS is not an nmad knob and is ignored; did you mean NMAD_FINALIZE_TIMEOUT_MS?", 0) ==
        0);
  CHECK(config::nearest_knob("NMAD_SHM_RINGS").nearest == "NMAD_SHM_RING");
  CHECK(config::nearest_knob("NMAD_STARTEGY").nearest == "NMAD_STRATEGY");  // a transposition is one edit
  CHECK(config::nearest_knob("NMAD_STARTEGY").distance == 1);
  CHECK(config::nearest_knob("NMAD_CONNECT_TIMEOUT").nearest == "NMAD_CONNECT_TIMEOUT_MS");
  CHECK(config::nearest_knob("NMAD_TCP_SOCKBUFF").nearest == "NMAD_TCP_SOCKBUF");
  // Far from every knob: named as the nearest only.
  const auto far = config::nearest_knob("NMAD_MY_OWN_SCRIPT_SETTING_42");
  CHECK(config::unknown_message(far).find("is ignored; the nearest knob is ") != std::string::npos);
  CHECK(config::unknown_message(far).find("did you mean") == std::string::npos);
}

TEST_CASE("the start-up check: every bad value in one message, unknown names warned, refused or ignored") {
  const std::vector<std::string> env = {
      "PATH=/bin",          "NMAD_SHM_RING=-1",   "NMAD_LOG=verbose", "NMAD_FINALISE_TIMEOUT_MS=5",
      "NMAD_DRIVER=tcp",    "NMAD_SHM_CMA=1",     "NMAD_STATS=2",     "NMAD_STATS=1",  // the later one counts
      "NOT_NMAD_THING=zzz", "NMAD_TRACE=",
  };
  const config::report r = config::scan(env);
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0] == "NMAD_SHM_RING=\"-1\": expected a size in bytes (digits, optional K, M, G or T), 256K..1G");
  CHECK(r.errors[1] == "NMAD_LOG=\"verbose\": expected one of error, warn, info, debug");
  REQUIRE(r.unknown.size() == 1);
  CHECK(r.unknown[0].name == "NMAD_FINALISE_TIMEOUT_MS");
  CHECK_THROWS_WITH_AS(config::check(env), (r.errors[0] + "; " + r.errors[1]).c_str(), config::config_error);

  std::vector<std::string> good = {"NMAD_DRIVER=shm", "NMAD_SHM_RIGN=1M", "HOME=/root"};
  auto warnings = config::check(good);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("NMAD_SHM_RIGN is not an nmad knob and is ignored; did you mean NMAD_SHM_RING?") == 0);
  good.push_back("NMAD_CONFIG_UNKNOWN=ignore");
  CHECK(config::check(good).empty());
  good.back() = "NMAD_CONFIG_UNKNOWN=error";
  CHECK_THROWS_WITH_AS(config::check(good), doctest::Contains("NMAD_SHM_RIGN is not an nmad knob"),
                       config::config_error);
  good.back() = "NMAD_CONFIG_UNKNOWN=loud";
  CHECK_THROWS_WITH_AS(config::check(good), doctest::Contains("NMAD_CONFIG_UNKNOWN=\"loud\": expected one of warn"),
                       config::config_error);
  CHECK(config::check(std::vector<std::string>{}).empty());
}

TEST_CASE("docs/CONFIGURATION.md lists every knob of the table, with its default, and no other") {
  std::ifstream in(nmad_test::runfile("docs/CONFIGURATION.md"));
  REQUIRE(in);
  // Table rows: | `NMAD_NAME` | default | meaning |
  const std::regex row(R"(^\| `(NMAD_[A-Z0-9_]+)` \| ([^|]*) \|)");
  std::map<std::string, std::string> documented;
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      CHECK_MESSAGE(documented.count(m[1]) == 0, m[1] << " has two rows");
      documented[m[1]] = m[2];
    }
  }
  for (const config::knob& k : config::knobs()) {
    const std::string name(k.name);
    CAPTURE(name);
    auto it = documented.find(name);
    CHECK_MESSAGE(it != documented.end(), name << " is in the table but not in docs/CONFIGURATION.md");
    if (it == documented.end() || k.def.empty()) continue;
    CHECK_MESSAGE(it->second.find("`" + std::string(k.def) + "`") != std::string::npos,
                  name << ": the default column '" << it->second << "' does not show `" << k.def << "`");
  }
  for (const auto& [name, def] : documented) CHECK_MESSAGE(config::find(name), name << " is documented but no knob");
}
