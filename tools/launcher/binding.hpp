#pragma once
// Where nmad-run binds the ranks it starts on this machine: the rank
// placement of api/nmad/services/placement.hpp (scatter by NUMA) applied to the
// machine's topology restricted to the CPUs the launcher may use.
//
// Modes (job_options::bind): "core" binds every local rank; "auto" binds when
// two or more local ranks fit the CPUs (one rank, or more ranks than CPUs,
// keep every CPU, and so do the rank's own threads); "none" leaves placement
// to the kernel. A topology that is not this machine's (NMAD_TOPOLOGY or
// HWLOC_* naming a synthetic or XML one) is placed and reported but never
// applied: its CPU numbers belong to another machine.
#include <string>
#include <vector>

#include "api/nmad/services/topology.hpp"

namespace nmad::launcher {

struct rank_binding {
  bool bound = false;     // apply `cpus` with sched_setaffinity
  std::vector<int> cpus;  // bound: the rank's CPUs; else the CPUs it keeps (or would get, placed elsewhere)
  int numa = -1;          // NUMA node label, -1 when unknown
  std::string reason;
  // Bound ranks: where the rank's progress thread (NMAD_PROGRESS) may run,
  // by the progress placement policy; passed as NMAD_PROGRESS_CPUS.
  std::vector<int> progress_cpus;
  std::string progress_reason;
};

// One entry per local rank, in local order. `topo` is the machine restricted
// to the launcher's CPUs (or a foreign topology, never applied);
// `progress_policy` is NMAD_PROGRESS_PLACEMENT ("smt" leaves a rank its core's
// first PU only). Pure: no system call.
std::vector<rank_binding> plan_bindings(int local_ranks, const std::string& mode,
                                        const topology::machine_topology& topo,
                                        const std::string& progress_policy = "");

// The topology nmad-run places on: shared_from_env() restricted to `allowed`
// when it is this machine; flat_topology(allowed) when hwloc fails.
topology::machine_topology launcher_topology(const std::vector<int>& allowed);

// "rank R: CPUs L (NUMA node M): reason" / "rank R: not bound (CPUs L): reason".
std::string binding_line(int rank, const rank_binding& b);

}  // namespace nmad::launcher
