// The libraries loaded at run time, as language bindings load them (Python's
// ctypes and mpi4py, Julia, R, Java): libmpi.so and libnmad.so must dlopen
// at any time, so their static thread-local storage stays within a small
// bound (api/nmad/services/thread_heap.hpp); a C program that dlopens libmpi.so
// and Python's ctypes run real MPI jobs through it under mpiexec.
// (tools/test checks the same on the installed, optimised libraries.)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::count;

// The bytes of thread-local storage a library needs in the static TLS
// block when it is loaded: what glibc keeps for dlopen is a few hundred
// bytes shared by every library loaded after start-up.
constexpr std::uint64_t kStaticTlsBound = 64;

struct tls_facts {
  bool has_tls = false;
  std::uint64_t memsz = 0;  // PT_TLS
  bool static_tls = false;  // DT_FLAGS has DF_STATIC_TLS
};

// Reads PT_TLS and DT_FLAGS of a 64-bit ELF file.
tls_facts read_tls(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  const std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(b.size() >= sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, b.data(), sizeof eh);
  REQUIRE(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
  REQUIRE(eh.e_ident[EI_CLASS] == ELFCLASS64);
  tls_facts f;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    const std::size_t at = eh.e_phoff + static_cast<std::size_t>(i) * eh.e_phentsize;
    REQUIRE(at + sizeof ph <= b.size());
    std::memcpy(&ph, b.data() + at, sizeof ph);
    if (ph.p_type == PT_TLS) {
      f.has_tls = true;
      f.memsz = ph.p_memsz;
    }
    if (ph.p_type == PT_DYNAMIC) {
      for (std::size_t o = ph.p_offset; o + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz; o += sizeof(Elf64_Dyn)) {
        REQUIRE(o + sizeof(Elf64_Dyn) <= b.size());
        Elf64_Dyn d;
        std::memcpy(&d, b.data() + o, sizeof d);
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_FLAGS && (d.d_un.d_val & DF_STATIC_TLS)) f.static_tls = true;
      }
    }
  }
  return f;
}

std::string libmpi() { return nmad_test::runfile("mpi_layer/shared/libmpi.so"); }
std::string libnmad() { return nmad_test::runfile("libnmad.so"); }

// mpiexec finds nmad-run next to itself or in PATH.
nmad_test::run_options mpiexec_options() {
  const std::string run = nmad_test::runfile("tools/nmad-run");
  const char* path = std::getenv("PATH");
  nmad_test::run_options o;
  o.timeout_s = 180;
  o.env.emplace_back("PATH", run.substr(0, run.rfind('/')) + ":" + (path ? path : "/usr/bin:/bin"));
  return o;
}

// The sanitizer run times this test has loaded (built with --config=asan
// or tsan), for python3, which is not instrumented: an instrumented
// libmpi.so needs them loaded first (LD_PRELOAD).
std::string sanitizer_preload() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        for (const char* rt : {"libasan.so", "libtsan.so", "libubsan.so"})
          if (name.find(rt) != std::string::npos) {
            std::string& out = *static_cast<std::string*>(data);
            out += (out.empty() ? "" : " ") + name;
          }
        return 0;
      },
      &found);
  return found;
}

}  // namespace

TEST_CASE("libmpi.so and libnmad.so: static thread-local storage within the dlopen bound") {
  for (const std::string& lib : {libmpi(), libnmad()}) {
    CAPTURE(lib);
    const tls_facts f = read_tls(lib);
    MESSAGE(lib << ": PT_TLS " << (f.has_tls ? std::to_string(f.memsz) + " bytes" : std::string("none"))
                << std::string(f.static_tls ? ", STATIC_TLS" : ""));
    // Every byte of the library's thread-local segment goes into the
    // static block once any of it is reached through initial-exec.
    if (f.static_tls) CHECK(f.memsz <= kStaticTlsBound);
  }
}

TEST_CASE("libmpi.so and libnmad.so load with dlopen into a running process") {
  // This test program links neither: each loads now, after start-up.
  for (const std::string& lib : {libnmad(), libmpi()}) {
    CAPTURE(lib);
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* why = h ? "" : dlerror();
    CAPTURE(why);
    CHECK(h != nullptr);
    if (h) CHECK(dlsym(h, lib == libmpi() ? "MPI_Init" : "nmad_strategy_last_error") != nullptr);
  }
}

TEST_CASE("a C program dlopens libmpi.so and runs MPI through it under mpiexec") {
  const std::string mpiexec = nmad_test::runfile("mpi_layer/tools/mpiexec");
  const std::string prog = nmad_test::runfile("tests/dlopen/mpi_dlopen");
  for (const char* driver : {"", "tcp"})
    for (int n : {2, 4}) {
      CAPTURE(driver);
      CAPTURE(n);
      auto o = mpiexec_options();
      if (*driver) o.env.emplace_back("NMAD_DRIVER", driver);
      auto r = nmad_test::run({mpiexec, "-n", std::to_string(n), "--timeout", "150", prog, libmpi()}, o);
      if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
      CHECK(r.status == 0);
      CHECK(count(r.out, "PASS mpi_dlopen rank") == n);
      CHECK(count(r.out, "FAIL") == 0);
    }
  auto only = nmad_test::run({prog, "--load-only", libnmad()});
  CHECK(only.status == 0);
  CHECK(count(only.out, "PASS mpi_dlopen load") == 1);
}

TEST_CASE("Python ctypes loads libmpi.so and runs MPI through it under mpiexec") {
#if defined(__SANITIZE_THREAD__)
  // python3 cannot start under ThreadSanitizer's runtime at all
  // (`LD_PRELOAD=libtsan.so.2 python3 -c 'print(1)'` dies with SIGSEGV),
  // so an instrumented libmpi.so cannot be loaded from it; the C program
  // above loads it with dlopen under the same build.
  MESSAGE("skipped under ThreadSanitizer: python3 does not run under its runtime");
  return;
#endif
  const std::string mpiexec = nmad_test::runfile("mpi_layer/tools/mpiexec");
  const std::string script = nmad_test::runfile("tests/dlopen/mpi_ctypes.py");
  const std::string header = nmad_test::runfile("mpi_layer/include/mpi.h");
  auto o = mpiexec_options();
  if (const std::string preload = sanitizer_preload(); !preload.empty()) {
    // (Python's own allocations are not the library's leaks.)
    o.env.emplace_back("LD_PRELOAD", preload);
    o.env.emplace_back("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1");
  }
  for (int n : {2, 3}) {
    CAPTURE(n);
    auto r = nmad_test::run(
        {mpiexec, "-n", std::to_string(n), "--timeout", "150", "/usr/bin/python3", script, libmpi(), header}, o);
    if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status == 0);
    CHECK(count(r.out, "PASS mpi_ctypes rank") == n);
    CHECK(count(r.out, "FAIL") == 0);
  }
}
