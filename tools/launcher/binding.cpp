#include "tools/launcher/binding.hpp"

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/placement.hpp"

namespace nmad::launcher {

namespace topo = nmad::topology;

std::vector<rank_binding> plan_bindings(int local_ranks, const std::string& mode, const topo::machine_topology& t,
                                        const std::string& progress_policy) {
  std::vector<rank_binding> out(static_cast<std::size_t>(std::max(local_ranks, 0)));
  if (local_ranks < 1) return out;
  std::vector<int> all;
  for (const auto& p : t.pus()) all.push_back(p.os_index);
  auto unbound = [&](const std::string& why) {
    for (auto& b : out) {
      b = rank_binding{};
      b.cpus = all;
      b.reason = why;
    }
    return out;
  };
  if (mode == "none") return unbound("--bind none: placement left to the kernel");
  const int cpus = t.pu_count();
  if (mode == "auto" && local_ranks < 2) return unbound("--bind auto: a single local rank keeps every CPU");
  if (mode == "auto" && local_ranks > cpus)
    return unbound("--bind auto: " + std::to_string(local_ranks) + " local ranks do not fit " + std::to_string(cpus) +
                   " CPU(s), so every rank keeps them all");
  topo::progress_options opts;
  if (auto p = topo::parse_progress_policy(progress_policy)) opts.policy = *p;
  const auto job = topo::place_job(t, local_ranks, opts);
  const auto& placed = job.ranks;
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].bound = t.this_system();
    out[i].cpus = placed[i].cpus;
    out[i].progress_cpus = job.progress[i].cpus;
    out[i].progress_reason = job.progress[i].reason;
    out[i].numa = t.numa_nodes()[placed[i].numa].label;
    out[i].reason = placed[i].reason;
    if (!t.this_system()) out[i].reason = "placed on " + t.source() + ", not applied (not this machine): " + out[i].reason;
  }
  return out;
}

topo::machine_topology launcher_topology(const std::vector<int>& allowed) {
  try {
    const auto& t = topo::shared_from_env();
    if (!t.this_system()) return t;
    return topo::restrict_to(t, allowed);
  } catch (const std::exception&) {
    // A topology the user named that does not load stops the job (its
    // message names it); only this machine's own falls back to flat.
    if (config::is_set("NMAD_TOPOLOGY")) throw;
    return topo::flat_topology(allowed);
  }
}

std::string binding_line(int rank, const rank_binding& b) {
  std::string line = "rank " + std::to_string(rank) + ": ";
  if (b.bound) {
    line += "CPUs " + topo::cpu_list(b.cpus);
    if (b.numa >= 0) line += " (NUMA node " + std::to_string(b.numa) + ")";
  } else {
    line += "not bound (CPUs " + topo::cpu_list(b.cpus) + ")";
  }
  return line + ": " + b.reason;
}

}  // namespace nmad::launcher
