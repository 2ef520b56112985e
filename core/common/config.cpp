// The configuration reader (see config.hpp); the table is config_knobs.cpp.
#include "api/nmad/services/config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>

extern char** environ;

namespace nmad::config {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t p = s.find(sep);
    out.push_back(s.substr(0, p));
    if (p == std::string_view::npos) return out;
    s.remove_prefix(p + 1);
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Decimal digits into 0..INT64_MAX; false when not digits, true with
// `overflow` set when too large.
bool digits_value(std::string_view s, std::int64_t& v, bool& overflow) {
  if (!all_digits(s)) return false;
  v = 0;
  overflow = false;
  for (char c : s) {
    const int d = c - '0';
    if (v > (kInt64Max - d) / 10) {
      overflow = true;
      return true;
    }
    v = v * 10 + d;
  }
  return true;
}

std::int64_t unit_factor(const knob& k) {
  if (k.type != kind::duration) return 1;
  if (k.unit == "s") return 1'000'000;
  if (k.unit == "ms") return 1'000;
  return 1;
}

int suffix_shift(std::string_view s) {
  if (s.empty()) return 0;
  if (s == "K" || s == "k" || s == "KiB") return 10;
  if (s == "M" || s == "m" || s == "MiB") return 20;
  if (s == "G" || s == "g" || s == "GiB") return 30;
  if (s == "T" || s == "t" || s == "TiB") return 40;
  return -1;
}

// A number of kind k.type (no words): 1 = fine, 0 = malformed,
// -1 = well formed but too large for 64 bits.
int parse_number(const knob& k, std::string_view s, std::int64_t& out) {
  bool overflow = false;
  switch (k.type) {
    case kind::integer: {
      const bool negative = k.min < 0 && !s.empty() && s.front() == '-';
      if (negative) s.remove_prefix(1);
      if (!digits_value(s, out, overflow)) return 0;
      if (overflow) return -1;
      if (negative) out = -out;
      return 1;
    }
    case kind::size: {
      std::size_t i = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      const int shift = suffix_shift(s.substr(i));
      if (i == 0 || shift < 0 || !digits_value(s.substr(0, i), out, overflow)) return 0;
      if (overflow || out > (kInt64Max >> shift)) return -1;
      out <<= shift;
      return 1;
    }
    case kind::duration: {
      const std::size_t dot = s.find('.');
      const std::string_view whole = s.substr(0, dot);
      if (!digits_value(whole, out, overflow)) return 0;
      std::int64_t frac = 0;
      const std::int64_t factor = unit_factor(k);
      if (dot != std::string_view::npos) {
        // A fraction where the unit leaves room below it: seconds only.
        const std::string_view f = s.substr(dot + 1);
        if (factor < 1'000'000 || f.size() > 6 || !all_digits(f)) return 0;
        for (std::size_t i = 0; i < 6; ++i) frac = frac * 10 + (i < f.size() ? f[i] - '0' : 0);
      }
      if (overflow || out > (kInt64Max - frac) / factor) return -1;
      out = out * factor + frac;
      return 1;
    }
    default: return 0;
  }
}

bool in_range(const knob& k, std::int64_t v) {
  if (v >= k.min && v <= k.max) return true;
  // A bare number among the words is accepted outside the range.
  for (std::string_view w : split(k.words, '|')) {
    std::int64_t x = 0;
    if (!w.empty() && w.find('=') == std::string_view::npos && parse_number(k, w, x) == 1 && x == v) return true;
  }
  return false;
}

std::string describe_kind(const knob& k) {
  switch (k.type) {
    case kind::flag: return "0 or 1";
    case kind::integer: return "an integer, " + format(k, k.min) + ".." + format(k, k.max);
    case kind::size: return "a size in bytes (digits, optional K, M, G or T), " + format(k, k.min) + ".." + format(k, k.max);
    case kind::duration:
      return "a duration in " + std::string(k.unit) + (k.unit == "s" ? " (fractions allowed)" : "") + ", " +
             format(k, k.min) + ".." + format(k, k.max);
    case kind::choice: {
      std::string s = "one of ";
      bool first = true;
      for (std::string_view w : split(k.words, '|')) {
        if (w.empty()) continue;
        s += (first ? "" : ", ") + std::string(w);
        first = false;
      }
      return s;
    }
    case kind::text:
    case kind::list: return k.unit.empty() ? "any text" : std::string(k.unit);
  }
  return "?";
}

std::string quote_value(std::string_view text) {
  static const char hex[] = "0123456789abcdef";
  std::string q = "\"";
  std::size_t shown = 0;
  for (unsigned char c : text) {
    if (shown++ == 120) {
      q += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      q += "\\x";
      q += hex[c >> 4];
      q += hex[c & 15];
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

// Optimal string alignment distance (adjacent transpositions count 1),
// over three rolling rows; `rows` is scratch space. Stops at `limit` (and
// returns it) once no path can end below it: every path crosses one of two
// consecutive rows (a transposition skips one row, never two).
int edit_distance(std::string_view a, std::string_view b, std::vector<int>& rows, int limit) {
  const std::size_t m = b.size();
  rows.assign(3 * (m + 1), 0);
  int* before = rows.data();          // row i-2
  int* prev = before + (m + 1);       // row i-1
  int* cur = prev + (m + 1);          // row i
  for (std::size_t j = 0; j <= m; ++j) prev[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    if (*std::min_element(cur, cur + m + 1) >= limit && *std::min_element(prev, prev + m + 1) >= limit) return limit;
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return std::min(prev[m], limit);
}

const knob& require(std::string_view name) {
  const knob* k = find(name);
  if (!k)
    throw std::logic_error("nmad: " + std::string(name) +
                           " is read but is not a knob of core/common/config_knobs.cpp (add it there)");
  return *k;
}

value read_checked(std::string_view name, std::initializer_list<kind> kinds) {
  value v = read(name);
  if (std::find(kinds.begin(), kinds.end(), v.spec->type) == kinds.end())
    throw std::logic_error("nmad: knob " + std::string(name) + " is read as another kind than its table entry");
  return v;
}

std::int64_t number_of(const value& v) {
  if (v.automatic)
    throw std::logic_error("nmad: knob " + std::string(v.spec->name) + " may be computed: read it with optional_*");
  return v.number;
}

}  // namespace

const knob* find(std::string_view name) {
  for (const knob& k : knobs())
    if (k.name == name) return &k;
  return nullptr;
}

std::string format(const knob& k, std::int64_t n) {
  if (k.type == kind::size && n > 0) {
    static const char suffix[] = "KMGT";
    for (int i = 3; i >= 0; --i) {
      const int shift = 10 * (i + 1);
      if (n % (std::int64_t{1} << shift) == 0) return std::to_string(n >> shift) + suffix[i];
    }
  }
  if (k.type == kind::duration) {
    const std::int64_t f = unit_factor(k);
    std::string s = std::to_string(n / f);
    if (n % f) {
      std::string frac = std::to_string(n % f + f).substr(1);  // leading zeros kept
      while (!frac.empty() && frac.back() == '0') frac.pop_back();
      s += "." + frac;
    }
    return s;
  }
  return std::to_string(n);
}

std::string accepts(const knob& k) {
  std::string s = describe_kind(k);
  if (k.type == kind::integer || k.type == kind::size || k.type == kind::duration) {
    std::string extra;
    for (std::string_view w : split(k.words, '|')) {
      if (w.empty()) continue;
      extra += (extra.empty() ? "" : ", ") + std::string(w.substr(0, w.find('=')));
    }
    if (!extra.empty()) s += ", or " + extra;
  }
  return s;
}

std::string message(std::string_view name, std::string_view text, std::string_view detail) {
  return std::string(name) + "=" + quote_value(text) + ": " + std::string(detail);
}

std::string parse(const knob& k, std::optional<std::string_view> given, value& out) {
  out = value{};
  out.spec = &k;
  const bool loose = k.type == kind::text || k.type == kind::list;
  std::string_view text;
  if (given && (!given->empty() || !loose)) {
    out.text = std::string(*given);
    out.given = true;
    text = *given;
  } else {
    // Unset: the default, written like a value.
    text = k.def;
    if (text.empty()) {
      out.automatic = k.type == kind::integer || k.type == kind::size || k.type == kind::duration;
      return "";
    }
  }
  const std::string expected = "expected " + accepts(k);
  switch (k.type) {
    case kind::flag:
      if (text != "0" && text != "1") return expected;
      out.number = text == "1";
      return "";
    case kind::choice:
      for (std::string_view w : split(k.words, '|'))
        if (!w.empty() && w == text) {
          out.word = std::string(text);
          return "";
        }
      return expected;
    case kind::text:
    case kind::list:
      if (k.check) {
        std::string why = k.check(k, text);
        if (!why.empty()) return why;
      }
      out.word = std::string(text);
      return "";
    case kind::integer:
    case kind::size:
    case kind::duration: {
      for (std::string_view w : split(k.words, '|')) {
        const std::size_t eq = w.find('=');
        if (w.empty() || w.substr(0, eq) != text) continue;
        if (eq == std::string_view::npos) {
          if (all_digits(w)) break;  // a bare number: parsed below
          out.automatic = true;
          out.word = std::string(text);
          return "";
        }
        if (parse_number(k, w.substr(eq + 1), out.number) != 1) return expected;
        out.word = std::string(text);
        return "";
      }
      if (parse_number(k, text, out.number) != 1 || !in_range(k, out.number)) return expected;
      return "";
    }
  }
  return expected;
}

value read(std::string_view name) {
  const knob& k = require(name);
  const char* env = std::getenv(std::string(name).c_str());
  value v;
  const std::string why = parse(k, env ? std::optional<std::string_view>(env) : std::nullopt, v);
  if (!why.empty()) throw config_error(message(name, env ? env : k.def, why));
  return v;
}

bool flag(std::string_view name) { return read_checked(name, {kind::flag}).number != 0; }

std::int64_t integer(std::string_view name) { return number_of(read_checked(name, {kind::integer})); }

std::uint64_t size(std::string_view name) {
  return static_cast<std::uint64_t>(number_of(read_checked(name, {kind::size})));
}

std::chrono::microseconds duration(std::string_view name) {
  return std::chrono::microseconds(number_of(read_checked(name, {kind::duration})));
}

std::chrono::milliseconds milliseconds(std::string_view name) {
  return std::chrono::ceil<std::chrono::milliseconds>(duration(name));
}

std::optional<std::int64_t> optional_integer(std::string_view name) {
  const value v = read_checked(name, {kind::integer});
  if (v.automatic) return std::nullopt;
  return v.number;
}

std::optional<std::uint64_t> optional_size(std::string_view name) {
  const value v = read_checked(name, {kind::size});
  if (v.automatic) return std::nullopt;
  return static_cast<std::uint64_t>(v.number);
}

std::optional<std::chrono::microseconds> optional_duration(std::string_view name) {
  const value v = read_checked(name, {kind::duration});
  if (v.automatic) return std::nullopt;
  return std::chrono::microseconds(v.number);
}

std::string word(std::string_view name) { return read_checked(name, {kind::choice}).word; }

std::string text(std::string_view name) { return read_checked(name, {kind::text, kind::list}).word; }

bool is_set(std::string_view name) {
  require(name);
  const char* env = std::getenv(std::string(name).c_str());
  return env && *env;
}

bool parse_size(std::string_view text, std::uint64_t& out, std::uint64_t max) {
  knob k;
  k.type = kind::size;
  std::int64_t v = 0;
  if (parse_number(k, text, v) != 1 || static_cast<std::uint64_t>(v) > max) return false;
  out = static_cast<std::uint64_t>(v);
  return true;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  if (text.empty()) return std::nullopt;
  auto number = [](std::string_view t, int& v) {
    if (!all_digits(t) || t.size() > 5) return false;
    v = 0;
    for (char c : t) v = v * 10 + (c - '0');
    return v <= 65535;
  };
  for (std::string_view item : split(text, ',')) {
    const std::size_t dash = item.find('-');
    int lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!number(item, lo)) return std::nullopt;
      hi = lo;
    } else if (!number(item.substr(0, dash), lo) || !number(item.substr(dash + 1), hi) || hi < lo) {
      return std::nullopt;
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// ---- syntax checks of list knobs --------------------------------------------

std::string check_cpu_list(const knob&, std::string_view v) {
  return parse_cpu_list(v) ? "" : "expected a CPU list such as 0-3,8 (CPUs 0..65535)";
}

std::string check_ipv4_list(const knob&, std::string_view v) {
  const auto entries = split(v, ',');
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string e(entries[i]);
    const std::string which = entries.size() > 1 ? "entry " + std::to_string(i + 1) + " " : "";
    if (e.empty()) return (which.empty() ? std::string("the address") : "entry " + std::to_string(i + 1)) + " is empty";
    in_addr a{};
    if (::inet_pton(AF_INET, e.c_str(), &a) != 1) return which + "'" + e + "' is not an IPv4 address";
  }
  return "";
}

std::string check_bandwidth_list(const knob&, std::string_view v) {
  const auto entries = split(v, ',');
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string_view e = entries[i];
    double x = 0;
    auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), x);
    if (e.empty() || ec != std::errc{} || end != e.data() + e.size() || !(x > 0) || x > 1e9)
      return "entry " + std::to_string(i + 1) + " ('" + std::string(e) +
             "') is not a bandwidth in MB/s (a positive number, one per rail of NMAD_DRIVERS)";
  }
  return "";
}

std::string check_key_values(const knob& k, std::string_view v) {
  std::string keys;
  for (std::string_view w : split(k.words, '|')) keys += (keys.empty() ? "" : ", ") + std::string(w);
  const std::string expected = "expected KEY=N entries separated by commas, KEY one of " + keys + ", N " +
                               std::to_string(k.min) + ".." + std::to_string(k.max);
  for (std::string_view entry : split(v, ',')) {
    entry = trim(entry);
    if (entry.empty()) continue;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return expected;
    const std::string_view key = trim(entry.substr(0, eq)), num = trim(entry.substr(eq + 1));
    const auto names = split(k.words, '|');
    if (std::find(names.begin(), names.end(), key) == names.end()) return expected;
    std::int64_t n = 0;
    bool overflow = false;
    if (!digits_value(num, n, overflow) || overflow || n < k.min || n > k.max) return expected;
  }
  return "";
}

// ---- the start-up check -----------------------------------------------------

unknown_name nearest_knob(std::string_view name) {
  unknown_name u;
  u.name = std::string(name);
  u.distance = std::numeric_limits<int>::max();
  std::vector<int> rows;
  for (const knob& k : knobs()) {
    // The length difference is a lower bound of the distance.
    const std::size_t diff = name.size() > k.name.size() ? name.size() - k.name.size() : k.name.size() - name.size();
    if (diff >= static_cast<std::size_t>(u.distance)) continue;
    const int d = edit_distance(name, k.name, rows, u.distance);
    if (d < u.distance) {
      u.distance = d;
      u.nearest = std::string(k.name);
    }
  }
  return u;
}

std::string unknown_message(const unknown_name& u) {
  // A misspelling is a few edits away; beyond that the name is likely
  // some other program's, and the nearest knob is only a pointer.
  const bool close = u.distance <= 2 || static_cast<std::size_t>(u.distance) * 4 <= u.name.size();
  return u.name + " is not an nmad knob and is ignored" +
         (close ? "; did you mean " + u.nearest + "?" : "; the nearest knob is " + u.nearest) +
         " (nmad-info --config lists the knobs; NMAD_CONFIG_UNKNOWN=error refuses unknown names, =ignore "
         "silences this)";
}

report scan(std::span<const std::string> entries) {
  // The last entry of a name wins; names are reported in first-seen order.
  std::vector<std::string> order;
  std::map<std::string, std::string, std::less<>> last;
  for (const std::string& e : entries) {
    const std::size_t eq = e.find('=');
    if (eq == std::string::npos || e.compare(0, 5, "NMAD_") != 0) continue;
    std::string name = e.substr(0, eq);
    if (!last.count(name)) order.push_back(name);
    last[name] = e.substr(eq + 1);
  }
  report r;
  for (const std::string& name : order) {
    const std::string& text = last[name];
    const knob* k = find(name);
    if (!k) {
      r.unknown.push_back(nearest_knob(name));
      continue;
    }
    value v;
    const std::string why = parse(*k, text, v);
    if (!why.empty()) r.errors.push_back(message(name, text, why));
  }
  return r;
}

std::vector<std::string> environment_entries() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

report scan_environment() { return scan(environment_entries()); }

std::vector<std::string> check(std::span<const std::string> entries) {
  report r = scan(entries);
  // The policy for unknown names, from the same entries (it was checked
  // with them: a bad one is among the errors and counts as "warn").
  std::string policy = "warn";
  for (const std::string& e : entries)
    if (e.rfind("NMAD_CONFIG_UNKNOWN=", 0) == 0) {
      value v;
      if (const knob* k = find("NMAD_CONFIG_UNKNOWN"); k && parse(*k, std::string_view(e).substr(20), v).empty())
        policy = v.word;
    }
  std::vector<std::string> warnings;
  if (policy == "error")
    for (const unknown_name& u : r.unknown) r.errors.push_back(unknown_message(u));
  else if (policy == "warn")
    for (const unknown_name& u : r.unknown) warnings.push_back(unknown_message(u));
  if (!r.errors.empty()) {
    std::string all;
    for (const std::string& e : r.errors) all += (all.empty() ? "" : "; ") + e;
    throw config_error(all);
  }
  return warnings;
}

std::vector<std::string> check_environment() { return check(environment_entries()); }

}  // namespace nmad::config
