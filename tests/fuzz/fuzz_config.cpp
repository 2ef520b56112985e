// Fuzz target: the configuration reader (core/common/config.*) on values
// and names nobody checked. Input: byte 0 even: byte 1 picks a knob of the
// table and the rest is its value; byte 0 odd: the rest is an environment,
// "NAME=VALUE" lines. Contract checked here, for every knob and value:
// the reader never crashes and either accepts the value — a flag is 0/1, a
// choice one of its words, a number within its range (or a named value)
// that reads back the same once written out — or refuses it with a
// message that starts with `NAME="` and says what the knob accepts; reading
// it from the environment gives the same verdict; an unknown name gets a
// knob of the table as its nearest; the start-up check never throws
// anything but config_error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "api/nmad/services/config.hpp"

namespace {

namespace config = nmad::config;

void require(bool ok) {
  if (!ok) std::abort();
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool among_words(std::string_view words, std::string_view w) {
  while (true) {
    const std::size_t bar = words.find('|');
    if (words.substr(0, bar) == w) return true;
    if (bar == std::string_view::npos) return false;
    words.remove_prefix(bar + 1);
  }
}

void check_value(const config::knob& k, std::string_view text) {
  config::value v;
  const std::string why = config::parse(k, text, v);
  const bool scalar = k.type != config::kind::text && k.type != config::kind::list;
  if (why.empty()) {
    require(v.spec == &k);
    switch (k.type) {
      case config::kind::flag: require((text == "0" && v.number == 0) || (text == "1" && v.number == 1)); break;
      case config::kind::choice: require(v.word == text && among_words(k.words, text)); break;
      case config::kind::text:
      case config::kind::list: require(v.word == (text.empty() ? std::string(k.def) : std::string(text))); break;
      default: {
        require(!text.empty());
        if (v.automatic) {
          require(among_words(k.words, text));
          break;
        }
        if (v.number < k.min || v.number > k.max) {
          // Outside the range only as a named value or a bare number listed.
          require(!v.word.empty() || among_words(k.words, config::format(k, v.number)));
          break;
        }
        // Written back, it reads the same.
        config::value again;
        require(config::parse(k, config::format(k, v.number), again).empty());
        require(again.number == v.number);
      }
    }
  } else {
    const std::string m = config::message(k.name, text, why);
    require(starts_with(m, std::string(k.name) + "=\""));
    if (scalar) require(starts_with(why, "expected "));
  }
  // The environment path gives the same verdict (a value holds no NUL).
  if (text.find('\0') != std::string_view::npos) return;
  const std::string name(k.name);
  ::setenv(name.c_str(), std::string(text).c_str(), 1);
  try {
    const config::value r = config::read(name);
    require(why.empty() && r.number == v.number && r.automatic == v.automatic && r.word == v.word);
  } catch (const config::config_error& e) {
    require(!why.empty() && std::string(e.what()) == config::message(name, text, why));
  }
  ::unsetenv(name.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto knobs = config::knobs();
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  if ((data[0] & 1) == 0) {
    check_value(knobs[data[1] % knobs.size()], rest);
    return 0;
  }
  std::vector<std::string> entries;
  std::string_view lines(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (!lines.empty() && entries.size() < 12) {
    const std::size_t nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl);
    lines = nl == std::string_view::npos ? std::string_view() : lines.substr(nl + 1);
    if (line.size() > 64) line = line.substr(0, 64);
    entries.emplace_back(line);
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, eq);
    if (const config::knob* k = config::find(name)) {
      check_value(*k, line.substr(eq + 1));
    } else if (starts_with(name, "NMAD_")) {
      const config::unknown_name u = config::nearest_knob(name);
      require(config::find(u.nearest) != nullptr && u.distance >= 1);
      require(starts_with(config::unknown_message(u), std::string(name) + " is not an nmad knob"));
    }
  }
  const config::report r = config::scan(entries);
  for (const std::string& e : r.errors) require(starts_with(e, "NMAD_"));
  try {
    config::check(entries);
  } catch (const config::config_error& e) {
    require(!r.errors.empty() || !r.unknown.empty());
  }
  return 0;
}
