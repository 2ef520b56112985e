#pragma once
// libfabric, loaded when the ofi driver is first used rather than with the
// program.
//
// Linking libfabric made every program that uses nmad load it at start-up,
// and with it every provider library the distribution built in (verbs,
// rdmacm, efa, psm, psm2, ...), whatever drivers the job chose. One of them,
// libinfinipath (behind the psm provider), installs from its constructor a
// handler for SIGINT, SIGTERM, SIGSEGV, SIGBUS and SIGABRT that prints a
// backtrace and calls exit(): a rank stopped by the launcher, or one that
// crashed, ran its exit-time destructors from inside a signal handler,
// ended with status 1 instead of the signal, and left no core file.
//
// So the driver calls libfabric through the entry points below, resolved
// with dlopen("libfabric.so.1") the first time the ofi driver is opened or
// probed; a job on the built-in drivers never loads it. Every call that can
// load provider libraries (the dlopen itself, fi_getinfo, which loads the
// providers built as plugins) puts back any signal disposition it changed:
// the process's signals belong to the application. (The shm provider's own
// handlers, installed when an endpoint opens, are kept: they remove its
// segment and then pass the signal on to the disposition found before.)
//
// Only the functions libfabric exports are here; everything else of its API
// goes through the operation tables of the objects these return.
#include <rdma/fabric.h>

#include <string>

namespace nmad::ofi_library {

struct entry_points {
  decltype(&::fi_getinfo) getinfo;
  decltype(&::fi_freeinfo) freeinfo;
  decltype(&::fi_dupinfo) dupinfo;
  decltype(&::fi_fabric) fabric;
  decltype(&::fi_strerror) strerror;
};

// The entry points, loading the library on the first call (thread-safe; the
// answer is kept). Null when the library or one of its functions is
// missing; `why`, if given, then receives the loader's reason.
const entry_points* get(std::string* why = nullptr);

// get(), or std::runtime_error("ofi driver: libfabric cannot be loaded: ...").
const entry_points& require();

// fi_getinfo at API version 1.17, keeping signal dispositions (see above).
int getinfo(const fi_info* hints, fi_info** out);

// fi_strerror, or std::strerror where the library cannot be loaded.
const char* strerror(int errnum);

}  // namespace nmad::ofi_library
