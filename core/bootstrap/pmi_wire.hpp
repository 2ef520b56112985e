#pragma once
// PMI-1 "simple" wire format, shared by the bootstrap client and the nmad-run
// PMI server (private to them: not part of the engine's public interface).
//
// A message is one text line `cmd=NAME key=value key=value...\n`: tokens are
// separated by spaces, a token's key ends at its first '='. Neither keys nor
// values can hold spaces, '=' or newlines, so the bootstrap escapes what it
// stores (see escape()/unescape()).
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nmad::pmi {

// Longest line either side accepts (a guard against garbage, not a PMI limit).
inline constexpr std::size_t max_line_length = 1 << 20;

struct command {
  std::string cmd;  // value of the leading cmd= token
  std::vector<std::pair<std::string, std::string>> args;

  const std::string* find(std::string_view key) const {
    for (const auto& kv : args)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

// Parses one line (without its '\n'; a trailing '\r' is ignored). Returns
// nullopt and sets *error when the line is not `cmd=NAME [key=value]...`.
inline std::optional<command> parse_line(std::string_view line, std::string* error) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  command c;
  bool first = true;
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      ++i;
      continue;
    }
    std::size_t end = line.find_first_of(" \t", i);
    if (end == std::string_view::npos) end = line.size();
    std::string_view tok = line.substr(i, end - i);
    i = end;
    std::size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      if (error) *error = "token '" + std::string(tok) + "' is not key=value";
      return std::nullopt;
    }
    std::string key(tok.substr(0, eq));
    std::string value(tok.substr(eq + 1));
    if (first) {
      if (key != "cmd") {
        if (error) *error = "line does not start with cmd= (multi-line PMI commands are not supported)";
        return std::nullopt;
      }
      if (value.empty()) {
        if (error) *error = "empty command name";
        return std::nullopt;
      }
      c.cmd = std::move(value);
      first = false;
    } else {
      c.args.emplace_back(std::move(key), std::move(value));
    }
  }
  if (first) {
    if (error) *error = "empty line";
    return std::nullopt;
  }
  return c;
}

// Formats `cmd=NAME k=v ...\n`. Keys and values must already be wire-safe.
inline std::string format_line(std::string_view cmd,
                               std::initializer_list<std::pair<std::string_view, std::string_view>> args = {}) {
  std::string s = "cmd=";
  s += cmd;
  for (const auto& [k, v] : args) {
    s += ' ';
    s += k;
    s += '=';
    s += v;
  }
  s += '\n';
  return s;
}

// True for bytes that travel as themselves in an escaped string.
inline constexpr bool is_safe_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
         ch == '_' || ch == '.' || ch == ':' || ch == '/' || ch == ',' || ch == '+' || ch == '@';
}

// Percent-escapes every byte that is not is_safe_char() (so the result holds
// no space, '=', '%' escape ambiguity, newline or NUL). Any byte string
// round-trips through unescape().
inline std::string escape(std::string_view in) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (unsigned char ch : in) {
    if (is_safe_char(ch)) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

inline std::optional<std::string> unescape(std::string_view in) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i + 2 >= in.size()) return std::nullopt;
    int hi = nibble(in[i + 1]), lo = nibble(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace nmad::pmi
