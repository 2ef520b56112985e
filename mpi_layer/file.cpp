// MPI-IO (MPI-3.1 chapter 13): declared so that programs which merely name
// files (optional graph dumps, benchmark utilities) build, but not provided.
//
// No file can be opened, so every call raises MPI_ERR_UNSUPPORTED_OPERATION
// with the detail "MPI-IO is not provided by this MPI", after setting its
// output handles to their null value. As MPI-3.1 13.7 requires, file errors
// go to the error handler of MPI_FILE_NULL when no file is involved, and
// that handler is MPI_ERRORS_RETURN until MPI_File_set_errhandler changes
// it: so by default these calls return the error (MPI_File_open returns
// MPI_ERR_UNSUPPORTED_OPERATION and leaves MPI_FILE_NULL), and a program
// that asked for MPI_ERRORS_ARE_FATAL on MPI_FILE_NULL stops with the
// message. What does work:
//   * MPI_File_set_errhandler / MPI_File_get_errhandler on MPI_FILE_NULL,
//     MPI_File_call_errhandler(MPI_FILE_NULL, code);
//   * MPI_File_create_errhandler (a real handler, freed with
//     MPI_Errhandler_free);
//   * MPI_File_close: MPI_ERR_FILE (MPI_FILE_NULL, or a handle no file can
//     have), MPI_ERR_ARG for a null pointer;
//   * MPI_File_c2f / MPI_File_f2c (identity).
#include <atomic>
#include <string>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

namespace {

constexpr const char* kNoIo = "MPI-IO is not provided by this MPI";

// The error handler of MPI_FILE_NULL (MPI-3.1 13.7: MPI_ERRORS_RETURN
// initially).
std::atomic<MPI_Errhandler> g_file_null_handler{MPI_ERRORS_RETURN};

int raise_file(const char* fn, int code, const std::string& detail) {
  return mpi_raise_on(fn, g_file_null_handler.load(std::memory_order_acquire), MPI_FILE_NULL, code, detail);
}

[[gnu::cold]] int unsupported(const char* fn) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  return raise_file(fn, MPI_ERR_UNSUPPORTED_OPERATION, kNoIo);
}

void null_request(MPI_Request* request) {
  if (request) *request = MPI_REQUEST_NULL;
}

}  // namespace

extern "C" {

int PMPI_File_open(MPI_Comm comm, const char*, int, MPI_Info, MPI_File* fh) {
  const char* fn = "MPI_File_open";
  if (fh) *fh = MPI_FILE_NULL;
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!lookup_comm(comm)) return raise_file(fn, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  return raise_file(fn, MPI_ERR_UNSUPPORTED_OPERATION, kNoIo);
}

int PMPI_File_close(MPI_File* fh) {
  const char* fn = "MPI_File_close";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!fh) return raise_file(fn, MPI_ERR_ARG, "null file pointer");
  if (*fh == MPI_FILE_NULL) return raise_file(fn, MPI_ERR_FILE, "MPI_FILE_NULL is not an open file");
  return raise_file(fn, MPI_ERR_FILE,
                    "invalid file handle " + std::to_string(*fh) + " (no file can be open: " + kNoIo + ")");
}

int PMPI_File_delete(const char*, MPI_Info) { return unsupported("MPI_File_delete"); }
int PMPI_Register_datarep(const char*, MPI_Datarep_conversion_function*, MPI_Datarep_conversion_function*,
                          MPI_Datarep_extent_function*, void*) {
  return unsupported("MPI_Register_datarep");
}

int PMPI_File_set_size(MPI_File, MPI_Offset) { return unsupported("MPI_File_set_size"); }
int PMPI_File_preallocate(MPI_File, MPI_Offset) { return unsupported("MPI_File_preallocate"); }
int PMPI_File_get_size(MPI_File, MPI_Offset*) { return unsupported("MPI_File_get_size"); }
int PMPI_File_get_group(MPI_File, MPI_Group* group) {
  if (group) *group = MPI_GROUP_NULL;
  return unsupported("MPI_File_get_group");
}
int PMPI_File_get_amode(MPI_File, int*) { return unsupported("MPI_File_get_amode"); }
int PMPI_File_set_info(MPI_File, MPI_Info) { return unsupported("MPI_File_set_info"); }
int PMPI_File_get_info(MPI_File, MPI_Info* info_used) {
  if (info_used) *info_used = MPI_INFO_NULL;
  return unsupported("MPI_File_get_info");
}
int PMPI_File_set_view(MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char*, MPI_Info) {
  return unsupported("MPI_File_set_view");
}
int PMPI_File_get_view(MPI_File, MPI_Offset*, MPI_Datatype* etype, MPI_Datatype* filetype, char*) {
  if (etype) *etype = MPI_DATATYPE_NULL;
  if (filetype) *filetype = MPI_DATATYPE_NULL;
  return unsupported("MPI_File_get_view");
}
int PMPI_File_read_at(MPI_File, MPI_Offset, void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_read_at");
}
int PMPI_File_read_at_all(MPI_File, MPI_Offset, void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_read_at_all");
}
int PMPI_File_write_at(MPI_File, MPI_Offset, const void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_write_at");
}
int PMPI_File_write_at_all(MPI_File, MPI_Offset, const void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_write_at_all");
}
int PMPI_File_iread_at(MPI_File, MPI_Offset, void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iread_at");
}
int PMPI_File_iwrite_at(MPI_File, MPI_Offset, const void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iwrite_at");
}
int PMPI_File_iread_at_all(MPI_File, MPI_Offset, void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iread_at_all");
}
int PMPI_File_iwrite_at_all(MPI_File, MPI_Offset, const void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iwrite_at_all");
}
int PMPI_File_read(MPI_File, void*, int, MPI_Datatype, MPI_Status*) { return unsupported("MPI_File_read"); }
int PMPI_File_read_all(MPI_File, void*, int, MPI_Datatype, MPI_Status*) { return unsupported("MPI_File_read_all"); }
int PMPI_File_write(MPI_File, const void*, int, MPI_Datatype, MPI_Status*) { return unsupported("MPI_File_write"); }
int PMPI_File_write_all(MPI_File, const void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_write_all");
}
int PMPI_File_iread(MPI_File, void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iread");
}
int PMPI_File_iwrite(MPI_File, const void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iwrite");
}
int PMPI_File_iread_all(MPI_File, void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iread_all");
}
int PMPI_File_iwrite_all(MPI_File, const void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iwrite_all");
}
int PMPI_File_seek(MPI_File, MPI_Offset, int) { return unsupported("MPI_File_seek"); }
int PMPI_File_get_position(MPI_File, MPI_Offset*) { return unsupported("MPI_File_get_position"); }
int PMPI_File_get_byte_offset(MPI_File, MPI_Offset, MPI_Offset*) { return unsupported("MPI_File_get_byte_offset"); }
int PMPI_File_read_shared(MPI_File, void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_read_shared");
}
int PMPI_File_write_shared(MPI_File, const void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_write_shared");
}
int PMPI_File_iread_shared(MPI_File, void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iread_shared");
}
int PMPI_File_iwrite_shared(MPI_File, const void*, int, MPI_Datatype, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_File_iwrite_shared");
}
int PMPI_File_read_ordered(MPI_File, void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_read_ordered");
}
int PMPI_File_write_ordered(MPI_File, const void*, int, MPI_Datatype, MPI_Status*) {
  return unsupported("MPI_File_write_ordered");
}
int PMPI_File_seek_shared(MPI_File, MPI_Offset, int) { return unsupported("MPI_File_seek_shared"); }
int PMPI_File_get_position_shared(MPI_File, MPI_Offset*) { return unsupported("MPI_File_get_position_shared"); }
int PMPI_File_read_at_all_begin(MPI_File, MPI_Offset, void*, int, MPI_Datatype) {
  return unsupported("MPI_File_read_at_all_begin");
}
int PMPI_File_read_at_all_end(MPI_File, void*, MPI_Status*) { return unsupported("MPI_File_read_at_all_end"); }
int PMPI_File_write_at_all_begin(MPI_File, MPI_Offset, const void*, int, MPI_Datatype) {
  return unsupported("MPI_File_write_at_all_begin");
}
int PMPI_File_write_at_all_end(MPI_File, const void*, MPI_Status*) { return unsupported("MPI_File_write_at_all_end"); }
int PMPI_File_read_all_begin(MPI_File, void*, int, MPI_Datatype) { return unsupported("MPI_File_read_all_begin"); }
int PMPI_File_read_all_end(MPI_File, void*, MPI_Status*) { return unsupported("MPI_File_read_all_end"); }
int PMPI_File_write_all_begin(MPI_File, const void*, int, MPI_Datatype) {
  return unsupported("MPI_File_write_all_begin");
}
int PMPI_File_write_all_end(MPI_File, const void*, MPI_Status*) { return unsupported("MPI_File_write_all_end"); }
int PMPI_File_read_ordered_begin(MPI_File, void*, int, MPI_Datatype) {
  return unsupported("MPI_File_read_ordered_begin");
}
int PMPI_File_read_ordered_end(MPI_File, void*, MPI_Status*) { return unsupported("MPI_File_read_ordered_end"); }
int PMPI_File_write_ordered_begin(MPI_File, const void*, int, MPI_Datatype) {
  return unsupported("MPI_File_write_ordered_begin");
}
int PMPI_File_write_ordered_end(MPI_File, const void*, MPI_Status*) {
  return unsupported("MPI_File_write_ordered_end");
}
int PMPI_File_get_type_extent(MPI_File, MPI_Datatype, MPI_Aint*) { return unsupported("MPI_File_get_type_extent"); }
int PMPI_File_set_atomicity(MPI_File, int) { return unsupported("MPI_File_set_atomicity"); }
int PMPI_File_get_atomicity(MPI_File, int*) { return unsupported("MPI_File_get_atomicity"); }
int PMPI_File_sync(MPI_File) { return unsupported("MPI_File_sync"); }

// ---- error handlers ----
int PMPI_File_create_errhandler(MPI_File_errhandler_function* fn, MPI_Errhandler* errhandler) {
  const char* name = "MPI_File_create_errhandler";
  if (!check_initialized(name)) return MPI_ERR_OTHER;
  if (!fn || !errhandler) return raise_file(name, MPI_ERR_ARG, "null function or errhandler pointer");
  // Same calling convention as a communicator handler (a pointer to an
  // int handle, a pointer to the code): one table holds both.
  return PMPI_Comm_create_errhandler(reinterpret_cast<MPI_Comm_errhandler_function*>(fn), errhandler);
}

int PMPI_File_set_errhandler(MPI_File file, MPI_Errhandler errhandler) {
  const char* fn = "MPI_File_set_errhandler";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (file != MPI_FILE_NULL) return raise_file(fn, MPI_ERR_UNSUPPORTED_OPERATION, kNoIo);
  if (!valid_errhandler(errhandler))
    return raise_file(fn, MPI_ERR_ARG, "invalid error handler " + std::to_string(errhandler));
  g_file_null_handler.store(errhandler, std::memory_order_release);
  return MPI_SUCCESS;
}

int PMPI_File_get_errhandler(MPI_File file, MPI_Errhandler* errhandler) {
  const char* fn = "MPI_File_get_errhandler";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!errhandler) return raise_file(fn, MPI_ERR_ARG, "null errhandler pointer");
  if (file != MPI_FILE_NULL) {
    *errhandler = MPI_ERRHANDLER_NULL;
    return raise_file(fn, MPI_ERR_UNSUPPORTED_OPERATION, kNoIo);
  }
  *errhandler = g_file_null_handler.load(std::memory_order_acquire);
  return MPI_SUCCESS;
}

int PMPI_File_call_errhandler(MPI_File fh, int errorcode) {
  const char* fn = "MPI_File_call_errhandler";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (fh != MPI_FILE_NULL) return raise_file(fn, MPI_ERR_UNSUPPORTED_OPERATION, kNoIo);
  raise_file(fn, errorcode, {});
  return MPI_SUCCESS;  // MPI-3.1 8.3.6: success if the handler was called
}

MPI_Fint PMPI_File_c2f(MPI_File file) { return file; }
MPI_File PMPI_File_f2c(MPI_Fint file) { return file; }

}  // extern "C"

#pragma weak MPI_File_open = PMPI_File_open
#pragma weak MPI_File_close = PMPI_File_close
#pragma weak MPI_File_delete = PMPI_File_delete
#pragma weak MPI_File_set_size = PMPI_File_set_size
#pragma weak MPI_File_preallocate = PMPI_File_preallocate
#pragma weak MPI_File_get_size = PMPI_File_get_size
#pragma weak MPI_File_get_group = PMPI_File_get_group
#pragma weak MPI_File_get_amode = PMPI_File_get_amode
#pragma weak MPI_File_set_info = PMPI_File_set_info
#pragma weak MPI_File_get_info = PMPI_File_get_info
#pragma weak MPI_File_set_view = PMPI_File_set_view
#pragma weak MPI_File_get_view = PMPI_File_get_view
#pragma weak MPI_File_read_at = PMPI_File_read_at
#pragma weak MPI_File_read_at_all = PMPI_File_read_at_all
#pragma weak MPI_File_write_at = PMPI_File_write_at
#pragma weak MPI_File_write_at_all = PMPI_File_write_at_all
#pragma weak MPI_File_iread_at = PMPI_File_iread_at
#pragma weak MPI_File_iwrite_at = PMPI_File_iwrite_at
#pragma weak MPI_File_iread_at_all = PMPI_File_iread_at_all
#pragma weak MPI_File_iwrite_at_all = PMPI_File_iwrite_at_all
#pragma weak MPI_File_read = PMPI_File_read
#pragma weak MPI_File_read_all = PMPI_File_read_all
#pragma weak MPI_File_write = PMPI_File_write
#pragma weak MPI_File_write_all = PMPI_File_write_all
#pragma weak MPI_File_iread = PMPI_File_iread
#pragma weak MPI_File_iwrite = PMPI_File_iwrite
#pragma weak MPI_File_iread_all = PMPI_File_iread_all
#pragma weak MPI_File_iwrite_all = PMPI_File_iwrite_all
#pragma weak MPI_File_seek = PMPI_File_seek
#pragma weak MPI_File_get_position = PMPI_File_get_position
#pragma weak MPI_File_get_byte_offset = PMPI_File_get_byte_offset
#pragma weak MPI_File_read_shared = PMPI_File_read_shared
#pragma weak MPI_File_write_shared = PMPI_File_write_shared
#pragma weak MPI_File_iread_shared = PMPI_File_iread_shared
#pragma weak MPI_File_iwrite_shared = PMPI_File_iwrite_shared
#pragma weak MPI_File_read_ordered = PMPI_File_read_ordered
#pragma weak MPI_File_write_ordered = PMPI_File_write_ordered
#pragma weak MPI_File_seek_shared = PMPI_File_seek_shared
#pragma weak MPI_File_get_position_shared = PMPI_File_get_position_shared
#pragma weak MPI_File_read_at_all_begin = PMPI_File_read_at_all_begin
#pragma weak MPI_File_read_at_all_end = PMPI_File_read_at_all_end
#pragma weak MPI_File_write_at_all_begin = PMPI_File_write_at_all_begin
#pragma weak MPI_File_write_at_all_end = PMPI_File_write_at_all_end
#pragma weak MPI_File_read_all_begin = PMPI_File_read_all_begin
#pragma weak MPI_File_read_all_end = PMPI_File_read_all_end
#pragma weak MPI_File_write_all_begin = PMPI_File_write_all_begin
#pragma weak MPI_File_write_all_end = PMPI_File_write_all_end
#pragma weak MPI_File_read_ordered_begin = PMPI_File_read_ordered_begin
#pragma weak MPI_File_read_ordered_end = PMPI_File_read_ordered_end
#pragma weak MPI_File_write_ordered_begin = PMPI_File_write_ordered_begin
#pragma weak MPI_File_write_ordered_end = PMPI_File_write_ordered_end
#pragma weak MPI_File_get_type_extent = PMPI_File_get_type_extent
#pragma weak MPI_Register_datarep = PMPI_Register_datarep
#pragma weak MPI_File_set_atomicity = PMPI_File_set_atomicity
#pragma weak MPI_File_get_atomicity = PMPI_File_get_atomicity
#pragma weak MPI_File_sync = PMPI_File_sync
#pragma weak MPI_File_create_errhandler = PMPI_File_create_errhandler
#pragma weak MPI_File_set_errhandler = PMPI_File_set_errhandler
#pragma weak MPI_File_get_errhandler = PMPI_File_get_errhandler
#pragma weak MPI_File_call_errhandler = PMPI_File_call_errhandler
#pragma weak MPI_File_c2f = PMPI_File_c2f
#pragma weak MPI_File_f2c = PMPI_File_f2c
