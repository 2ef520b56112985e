#pragma once
// The configuration reader: every NMAD_* environment variable of nmad (the
// engine, its drivers, the MPI layer, nmad-run, nmad-info and the scripts
// of the tree) is a *knob* declared once, in one table (config_knobs.cpp):
// name, kind, unit, accepted range or words, default, the part of nmad
// that reads it and one line saying what it does. `nmad-info --config`
// prints the table with the current values and where each came from;
// docs/CONFIGURATION.md is checked against it (tests/config_test.cpp).
// Adding a knob is one line in that table.
//
// How a value is read. Every read goes through this reader, which enforces
// the table: a value is taken whole or refused with a config_error whose
// message names the variable, repeats the value and says what it accepts:
//     NMAD_SHM_CONNECT_TIMEOUT_MS="abc": expected a duration in ms, 1..3600000
// The kinds and their syntax:
//   flag      0 or 1
//   integer   decimal digits
//   size      decimal digits, optionally followed by K, M, G or T (powers
//             of 1024; also k, m, g, t and KiB, MiB, GiB, TiB)
//   duration  decimal digits in the knob's unit (us, ms or s); in seconds
//             a fraction too, down to the microsecond
//   choice    one of the knob's words
//   text      anything; empty is the same as unset
//   list      entries checked by the knob's syntax check; empty is unset
// Numbers are read into 64 bits and an overflow is caught (out of range,
// never wrapped); a sign, spaces, hex and octal are refused, so are
// negative values. A numeric knob may name values (`words`):
// "unlimited=0" stands for 0, a word without '=' ("auto") for a value the
// code computes (the optional_* accessors return nullopt). An empty value
// is refused for every kind but text and list, and a default is written
// and parsed like a value (the unit test parses every default).
//
// The start-up check. check_environment() validates every NMAD_* variable
// of the environment, whether or not this process will read it, and
// reports the NMAD_* names that are no knob, each with the nearest knob
// name (edit distance). A bad value is an error. An unknown name is a
// warning by default: an environment may carry variables of another nmad
// version or of the user's own scripts, and a job that ran yesterday should
// not stop for them; NMAD_CONFIG_UNKNOWN=error makes them errors (for
// checked set-ups and CI), =ignore silences them. A session runs the check
// before anything else (and prints the warnings on rank 0, unless nmad-run,
// which checks its own environment and -x settings before starting a
// rank, has printed them already).
//
// Values are read from the environment at each call, not cached (a program
// may setenv between two sessions): cheap, but not for a message path.
// Thread safety: that of getenv (safe unless another thread calls setenv).
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nmad::config {

// A value refused by the table, or a start-up check that found some. The
// message has no prefix: `NAME="value": expected ...`.
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class kind : std::uint8_t { flag, integer, size, duration, choice, text, list };

struct knob;
// A list knob's syntax: "" when `value` (non-empty) is well formed, else
// what is wrong or expected ("expected a CPU list such as 0-3,8").
using syntax_check = std::string (*)(const knob& k, std::string_view value);

struct knob {
  std::string_view name;
  kind type = kind::text;
  // duration: "us", "ms" or "s"; size: "bytes"; integer: what it counts
  // (may be empty); choice, text, list: empty.
  std::string_view unit;
  // integer: the range; size: in bytes; duration: in microseconds.
  std::int64_t min = 0, max = 0;
  // choice: the accepted words, '|'-separated. integer, size, duration:
  // named values, "word=value" (value written as the user would) or
  // "word" (computed: no number), or a bare number accepted outside the
  // range ("0" for "0 or 4K..1G"). list: the keys of a key=value list.
  std::string_view words;
  // The default, as a user would write it ("" = unset: for a numeric knob,
  // computed; for text and list, empty).
  std::string_view def;
  // Who reads it: engine, shm, tcp, ofi, mpi, launcher, tools, testing.
  std::string_view scope;
  std::string_view what;  // one line
  syntax_check check = nullptr;  // list (and text where given)
  bool secret = false;           // never printed (job keys, tokens)
};

// The table, in the order nmad-info prints it.
std::span<const knob> knobs();
// nullptr when `name` is no knob.
const knob* find(std::string_view name);

// A knob's value as read.
struct value {
  const knob* spec = nullptr;
  std::string text;         // the text given; empty when unset
  bool given = false;       // set (non-empty) in the environment
  bool automatic = false;   // numeric, no number: unset with a computed default, or a word such as "auto"
  std::int64_t number = 0;  // flag: 0/1; integer; size: bytes; duration: microseconds
  std::string word;         // choice: the word; text, list: the text (the default when unset)
};

// Parses `text` for `k` (nullopt: unset, the default applies). Returns ""
// and fills `out`, or returns what the knob accepts ("expected ...") —
// the detail of the config_error that read() throws. Never throws.
std::string parse(const knob& k, std::optional<std::string_view> text, value& out);
// `NAME="value": detail`, the value quoted with non-printing bytes escaped
// and cut after 120 characters.
std::string message(std::string_view name, std::string_view text, std::string_view detail);
// What a knob accepts, as in messages: "a duration in ms, 1..3600000".
std::string accepts(const knob& k);
// The default or a parsed value written back ("256K", "30000", "1.5").
std::string format(const knob& k, std::int64_t number);

// Reads a knob from the environment. Throws config_error for a bad value,
// std::logic_error for a name that is not in the table (a code error).
value read(std::string_view name);

// Typed accessors (read() and a kind check). A numeric knob that may be
// automatic is read with optional_*; the plain ones throw std::logic_error
// for an automatic value (the code should have asked for the optional).
bool flag(std::string_view name);
std::int64_t integer(std::string_view name);
std::uint64_t size(std::string_view name);
std::chrono::microseconds duration(std::string_view name);
std::chrono::milliseconds milliseconds(std::string_view name);  // rounded up
std::optional<std::int64_t> optional_integer(std::string_view name);
std::optional<std::uint64_t> optional_size(std::string_view name);
std::optional<std::chrono::microseconds> optional_duration(std::string_view name);
std::string word(std::string_view name);  // choice
std::string text(std::string_view name);  // text, list: the default when unset
bool is_set(std::string_view name);       // present and non-empty

// Sizes written by users outside the environment (options, info keys)
// parse the same way: digits and an optional K, M, G, T suffix. False on
// anything else or above `max`.
bool parse_size(std::string_view text, std::uint64_t& out, std::uint64_t max = std::uint64_t{1} << 62);
// A CPU list "0-3,8" (each CPU 0..65535), sorted and without repeats;
// nullopt when malformed or empty.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// --- the start-up check ---------------------------------------------------

struct unknown_name {
  std::string name;
  std::string nearest;  // the closest knob name
  int distance = 0;     // its edit distance (optimal string alignment)
};
// The closest knob name to `name` (and its distance).
unknown_name nearest_knob(std::string_view name);
// One line: "NMAD_FINALISE_TIMEOUT_MS is not an nmad knob and is ignored;
// did you mean NMAD_FINALIZE_TIMEOUT_MS? (...)".
std::string unknown_message(const unknown_name& u);

struct report {
  std::vector<std::string> errors;     // message() of every bad value
  std::vector<unknown_name> unknown;   // NMAD_* names that are no knob
};
// Scans "NAME=VALUE" entries (a later entry of a name replaces an earlier
// one, as when exec'ing with that environment). Never throws.
report scan(std::span<const std::string> entries);
// The same over this process's environment.
report scan_environment();

// The start-up check over `entries` (default: this process's environment):
// throws config_error with every bad value (and, under
// NMAD_CONFIG_UNKNOWN=error, every unknown name) in one message, "; "
// between them; else returns the warnings to print for unknown names
// (none under NMAD_CONFIG_UNKNOWN=ignore).
std::vector<std::string> check(std::span<const std::string> entries);
std::vector<std::string> check_environment();

// The environment of this process as "NAME=VALUE" entries.
std::vector<std::string> environment_entries();

// Syntax checks used by the table (config_knobs.cpp).
std::string check_cpu_list(const knob& k, std::string_view v);
std::string check_ipv4_list(const knob& k, std::string_view v);
std::string check_bandwidth_list(const knob& k, std::string_view v);
std::string check_key_values(const knob& k, std::string_view v);

}  // namespace nmad::config
