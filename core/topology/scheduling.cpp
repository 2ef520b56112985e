#include "core/topology/scheduling.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include "api/nmad/services/config.hpp"

namespace nmad::topology {

std::string_view name_of(thread_kind k) {
  switch (k) {
    case thread_kind::application: return "application";
    case thread_kind::progress: return "progress";
    case thread_kind::internal: return "internal";
  }
  return "?";
}

int thread_priorities::of(thread_kind k) const {
  switch (k) {
    case thread_kind::application: return application;
    case thread_kind::progress: return progress;
    case thread_kind::internal: return internal;
  }
  return application;
}

std::string thread_priorities::to_string() const {
  return "application=" + std::to_string(application) + ",progress=" + std::to_string(progress) +
         ",internal=" + std::to_string(internal);
}

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::optional<thread_priorities> parse_thread_priorities(std::string_view spec) {
  thread_priorities t;
  while (!trim(spec).empty()) {
    const auto comma = spec.find(',');
    const std::string_view entry = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view kind = trim(entry.substr(0, eq)), value = trim(entry.substr(eq + 1));
    int v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < min_thread_priority ||
        v > max_thread_priority)
      return std::nullopt;
    if (kind == "application") t.application = v;
    else if (kind == "progress") t.progress = v;
    else if (kind == "internal") t.internal = v;
    else return std::nullopt;
  }
  return t;
}

thread_priorities priorities_from_env() {
  std::string text;
  try {
    text = config::text("NMAD_THREAD_PRIORITIES");
  } catch (const config::config_error& e) {
    throw std::invalid_argument(e.what());
  }
  if (text.empty()) return {};
  const char* v = text.c_str();
  auto t = parse_thread_priorities(v);
  if (!t)
    throw std::invalid_argument(std::string("NMAD_THREAD_PRIORITIES='") + v +
                                "': expected kind=priority entries (application, progress, internal; 0 to 20)");
  return *t;
}

int nice_of(int priority) { return 10 - priority; }

idle_action when_idle(thread_kind k, bool has_pending) {
  if (has_pending || k == thread_kind::application) return idle_action::keep_running;
  return idle_action::suspend;
}

}  // namespace nmad::topology
