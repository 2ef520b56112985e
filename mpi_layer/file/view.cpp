// MPI-IO views (MPI-3.1 13.3): MPI_File_set_view, MPI_File_get_view,
// MPI_File_get_type_extent, and data representations (MPI_Register_datarep:
// only the predefined "native", "internal" and "external32"). A view is
// collective: every process checks its own arguments, then all agree on
// the outcome (as the calls of file.cpp). See file_impl.hpp.
#include <cstring>
#include <string>

#include "mpi_layer/datatype/external32.hpp"
#include "mpi_layer/file/file_impl.hpp"

using namespace nmad::mpi;
using namespace nmad::mpi::io;

extern "C" {

int PMPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char* datarep,
                       MPI_Info info) {
  const char* fn = "MPI_File_set_view";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  std::string detail;
  int err = MPI_SUCCESS;
  const bool sequential = f->amode & MPI_MODE_SEQUENTIAL;
  view v;
  if (disp == MPI_DISPLACEMENT_CURRENT && !sequential) {
    err = MPI_ERR_ARG;
    detail = "MPI_DISPLACEMENT_CURRENT needs a file opened with MPI_MODE_SEQUENTIAL";
  } else if (disp < 0 && disp != MPI_DISPLACEMENT_CURRENT) {
    err = MPI_ERR_ARG;
    detail = "negative displacement " + std::to_string(disp);
  } else if (info != MPI_INFO_NULL && !info_get_entries(info)) {
    err = MPI_ERR_INFO;
    detail = "invalid info " + std::to_string(info);
  } else {
    err = make_view(disp == MPI_DISPLACEMENT_CURRENT ? 0 : disp, etype, filetype, datarep, v, detail);
  }
  const int all = agree_max(f->comm, err);
  if (all != MPI_SUCCESS) return raise_file(fn, f.get(), all, err ? detail : other_failed(all));
  drain(*f);
  // The shared pointer goes back to 0 (or, with MPI_DISPLACEMENT_CURRENT,
  // the view starts where it pointed).
  long long cur[2] = {MPI_SUCCESS, 0};
  PMPI_Barrier(f->comm);
  if (f->rank == 0) {
    std::string d;
    MPI_Offset old = 0;
    const bool exists = ::access(f->shared_path.c_str(), F_OK) == 0;
    if (exists && disp == MPI_DISPLACEMENT_CURRENT) cur[0] = shared_fetch_add(*f, 0, old, d);
    if (cur[0] == MPI_SUCCESS && disp == MPI_DISPLACEMENT_CURRENT) {
      std::lock_guard g(f->mu);
      cur[1] = view_byte_offset(f->v, old);
    }
    if (cur[0] == MPI_SUCCESS && exists) cur[0] = shared_set(*f, 0, d);
  }
  PMPI_Bcast(cur, 2, MPI_LONG_LONG, 0, f->comm);
  if (cur[0] != MPI_SUCCESS)
    return raise_file(fn, f.get(), static_cast<int>(cur[0]), "resetting the shared file pointer failed");
  if (disp == MPI_DISPLACEMENT_CURRENT) v.disp = cur[1];
  std::lock_guard g(f->mu);
  f->v = std::move(v);
  f->pointer = 0;
  apply_hints(info, f->h, f->size);
  return MPI_SUCCESS;
}

int PMPI_File_get_view(MPI_File fh, MPI_Offset* disp, MPI_Datatype* etype, MPI_Datatype* filetype, char* datarep) {
  const char* fn = "MPI_File_get_view";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!disp || !etype || !filetype || !datarep) return raise_file(fn, f.get(), MPI_ERR_ARG, "null output argument");
  view v;
  {
    std::lock_guard g(f->mu);
    v = f->v;
  }
  // Predefined types come back as they are; derived ones as new handles
  // (duplicates the caller frees), as MPI-3.1 13.3 says.
  auto out = [](const Datatype& d, MPI_Datatype given) {
    if (is_predefined_type(given)) return given;
    return register_type(d.dup());
  };
  *disp = v.disp;
  *etype = out(v.etype, v.etype_handle);
  *filetype = out(v.filetype, v.filetype_handle);
  std::snprintf(datarep, MPI_MAX_DATAREP_STRING, "%s", v.datarep.c_str());
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {
// MPI_File_get_type_extent(_c): Extent is MPI_Aint or MPI_Count (both 64-bit
// here, so neither form narrows).
template <class Extent>
int get_type_extent(const char* fn, MPI_File fh, MPI_Datatype datatype, Extent* extent) {
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!extent) return raise_file(fn, f.get(), MPI_ERR_ARG, "null extent pointer");
  Datatype d = type_of(datatype);
  if (!d) return raise_file(fn, f.get(), MPI_ERR_TYPE, type_handle_text(datatype) + " is not a valid datatype");
  bool ext32;
  {
    std::lock_guard g(f->mu);
    ext32 = f->v.external32;
  }
  if (!ext32) {
    *extent = d.extent();
    return MPI_SUCCESS;
  }
  // Its extent in an external32 file (byte displacements as given, counts
  // scaled by the external32 sizes).
  try {
    *extent = external32::file_layout(d).extent();
  } catch (const DatatypeError& e) {
    return raise_file(fn, f.get(), MPI_ERR_TYPE, type_handle_text(datatype) + " has no external32 layout: " + e.what());
  }
  return MPI_SUCCESS;
}

// MPI_Register_datarep(_c): refused, but for a predefined name.
int register_datarep(const char* fn, const char* name) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!name) return raise_file(fn, nullptr, MPI_ERR_ARG, "null data representation name");
  const std::string n = name;
  if (n == "native" || n == "internal" || n == "external32")
    return raise_file(fn, nullptr, MPI_ERR_DUP_DATAREP, "\"" + n + "\" is a predefined data representation");
  return raise_file(fn, nullptr, MPI_ERR_UNSUPPORTED_OPERATION,
                    "user-defined data representations are not supported (\"" + n +
                        "\"): views take \"native\", \"internal\" or \"external32\"");
}

}  // namespace

extern "C" {

int PMPI_File_get_type_extent(MPI_File fh, MPI_Datatype datatype, MPI_Aint* extent) {
  return get_type_extent("MPI_File_get_type_extent", fh, datatype, extent);
}
int PMPI_File_get_type_extent_c(MPI_File fh, MPI_Datatype datatype, MPI_Count* extent) {
  return get_type_extent("MPI_File_get_type_extent_c", fh, datatype, extent);
}

int PMPI_Register_datarep(const char* name, MPI_Datarep_conversion_function*, MPI_Datarep_conversion_function*,
                          MPI_Datarep_extent_function*, void*) {
  return register_datarep("MPI_Register_datarep", name);
}
int PMPI_Register_datarep_c(const char* name, MPI_Datarep_conversion_function_c*, MPI_Datarep_conversion_function_c*,
                            MPI_Datarep_extent_function*, void*) {
  return register_datarep("MPI_Register_datarep_c", name);
}

}  // extern "C"

#pragma weak MPI_File_set_view = PMPI_File_set_view
#pragma weak MPI_File_get_view = PMPI_File_get_view
#pragma weak MPI_File_get_type_extent = PMPI_File_get_type_extent
#pragma weak MPI_Register_datarep = PMPI_Register_datarep
#pragma weak MPI_File_get_type_extent_c = PMPI_File_get_type_extent_c
#pragma weak MPI_Register_datarep_c = PMPI_Register_datarep_c
