#pragma once
// Bootstrap: how a process learns its rank, the job size, the job key and its
// peers' driver addresses.
//
// The wire protocol is PMI-1 (the "simple PMI" text protocol of MPICH: lines
// of `cmd=... key=value` pairs). A process started by `nmad-run`, by MPICH's
// hydra or by any PMI-1 launcher finds in its environment either
//   PMI_FD=<fd>                       an inherited, connected socket, or
//   PMI_PORT=<host>:<port>            a socket to connect to (+ PMI_ID),
// plus PMI_RANK and PMI_SIZE. Without any of them the process is a singleton
// (rank 0 of 1) and the key-value store is local.
//
// The job key: NMAD_JOB_KEY if the launcher set it, otherwise rank 0 draws a
// random one and publishes it through the (job-private) key-value store.
//
// Thread safety: none; the session calls it during initialisation and
// finalisation only. Errors throw std::runtime_error with a clear message.
#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace nmad {

class bootstrap {
 public:
  virtual ~bootstrap() = default;

  // Chooses PMI over PMI_FD / PMI_PORT, or a singleton, from the environment.
  static std::unique_ptr<bootstrap> from_environment();
  // A singleton bootstrap (rank 0 of 1, local store), for tests and tools.
  static std::unique_ptr<bootstrap> singleton();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Publishes key=value for the whole job (visible to others after fence()).
  virtual void put(const std::string& key, const std::string& value) = 0;
  // Collective: every rank's put() before the fence is visible after it.
  virtual void fence() = 0;
  // Value another rank published; throws if absent.
  virtual std::string get(const std::string& key) = 0;
  // Tells the launcher the job failed; the launcher then ends every rank.
  virtual void abort(int exit_code, const std::string& message) = 0;
  // Tells the launcher this rank finished cleanly (idempotent).
  virtual void finalize() = 0;

  // The job's secret, identical on all ranks (collective on first call).
  std::string job_key();

 private:
  std::string _job_key;
};

}  // namespace nmad
