/* nmad_mpi/misc_onesided.h: part of mpi.h, which includes it inside its extern "C"
 * block after the handles and constants: miscellaneous calls, the hsplit extensions (hwsplit.cpp), language
 * interoperability (interop.cpp) and one-sided communication (onesided.cpp:
 * declared, not provided).
 * Programs include <mpi.h>, never this file. */
#ifndef NMAD_MPI_MISC_ONESIDED_H
#define NMAD_MPI_MISC_ONESIDED_H

#ifndef NMAD_MPI_H
#error "include <mpi.h>, not nmad_mpi/misc_onesided.h"
#endif

/* ==== miscellaneous ====================================================== */
/* MPI_Pcontrol is a no-op without a profiler; there are no spawned
 * processes (MPI_Comm_get_parent gives MPI_COMM_NULL); Fortran handles are
 * the C handles (MPI_Fint = int). */
typedef int MPI_Fint;
int MPI_Pcontrol(const int level, ...);
int MPI_Comm_get_parent(MPI_Comm* parent);
int MPI_Status_set_cancelled(MPI_Status* status, int flag);
MPI_Fint MPI_Comm_c2f(MPI_Comm handle);
MPI_Comm MPI_Comm_f2c(MPI_Fint handle);
MPI_Fint MPI_Type_c2f(MPI_Datatype handle);
MPI_Datatype MPI_Type_f2c(MPI_Fint handle);
MPI_Fint MPI_Group_c2f(MPI_Group handle);
MPI_Group MPI_Group_f2c(MPI_Fint handle);
MPI_Fint MPI_Request_c2f(MPI_Request handle);
MPI_Request MPI_Request_f2c(MPI_Fint handle);
MPI_Fint MPI_Op_c2f(MPI_Op handle);
MPI_Op MPI_Op_f2c(MPI_Fint handle);
MPI_Fint MPI_Info_c2f(MPI_Info handle);
MPI_Info MPI_Info_f2c(MPI_Fint handle);
MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler handle);
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint handle);
MPI_Fint MPI_Message_c2f(MPI_Message handle);
MPI_Message MPI_Message_f2c(MPI_Fint handle);
int PMPI_Pcontrol(const int level, ...);
int PMPI_Comm_get_parent(MPI_Comm* parent);
int PMPI_Status_set_cancelled(MPI_Status* status, int flag);
MPI_Fint PMPI_Comm_c2f(MPI_Comm handle);
MPI_Comm PMPI_Comm_f2c(MPI_Fint handle);
MPI_Fint PMPI_Type_c2f(MPI_Datatype handle);
MPI_Datatype PMPI_Type_f2c(MPI_Fint handle);
MPI_Fint PMPI_Group_c2f(MPI_Group handle);
MPI_Group PMPI_Group_f2c(MPI_Fint handle);
MPI_Fint PMPI_Request_c2f(MPI_Request handle);
MPI_Request PMPI_Request_f2c(MPI_Fint handle);
MPI_Fint PMPI_Op_c2f(MPI_Op handle);
MPI_Op PMPI_Op_f2c(MPI_Fint handle);
MPI_Fint PMPI_Info_c2f(MPI_Info handle);
MPI_Info PMPI_Info_f2c(MPI_Fint handle);
MPI_Fint PMPI_Errhandler_c2f(MPI_Errhandler handle);
MPI_Errhandler PMPI_Errhandler_f2c(MPI_Fint handle);
MPI_Fint PMPI_Message_c2f(MPI_Message handle);
MPI_Message PMPI_Message_f2c(MPI_Fint handle);

/* ==== hardware-topology communicators: hsplit extensions (hwsplit.cpp) ====
 * From Goglin, Jeannot, Mansouri, Mercier, "Hardware topology management in
 * MPI applications through hierarchical communicators" (Parallel Computing
 * 76, 2018). Resource type names are those of MPI_Comm_split_type's
 * "mpi_hw_resource_type" ("Machine", "Package", "NUMANode", "L3Cache",
 * "L2Cache", "L1Cache", "Core", "PU"); see docs/MPI.md.
 *
 * MPIX_Comm_hsplit_with_roots: MPI_Comm_split_type(comm, split_type, key,
 *   info, newcomm), and at the same time *rootcomm: the communicator of the
 *   processes that are rank 0 of their newcomm (ordered by rank in comm);
 *   MPI_COMM_NULL for the others and where newcomm is MPI_COMM_NULL.
 *   Collective over comm.
 * MPIX_Get_hw_resource_info: for a communicator made by a hardware split
 *   (HW_GUIDED, HW_UNGUIDED, RESOURCE_GUIDED naming a level, or the
 *   functions above; kept by MPI_Comm_dup), the level's resource type name
 *   (type_name: MPI_MAX_OBJECT_NAME characters), how many sibling
 *   communicators the split made from the parent (this one included) and
 *   this one's index among them (in order of their lowest parent rank);
 *   *flag = 1. Any other communicator: *flag = 0, type_name "",
 *   *num_siblings 0, *index -1. Local.
 * MPIX_Get_hw_topo_common_level: the deepest level whose one resource holds
 *   all n processes ranks[] of comm (each bound inside it, all on one host):
 *   its type name and *flag = 1; *flag = 0 and "" when they are on
 *   different hosts. Collective over comm (every process passes its own
 *   set). */
int MPIX_Comm_hsplit_with_roots(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm,
                                MPI_Comm* rootcomm);
int MPIX_Get_hw_resource_info(MPI_Comm comm, char* type_name, int* num_siblings, int* index, int* flag);
int MPIX_Get_hw_topo_common_level(MPI_Comm comm, int n, const int ranks[], char* type_name, int* flag);
int PMPIX_Comm_hsplit_with_roots(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm,
                                 MPI_Comm* rootcomm);
int PMPIX_Get_hw_resource_info(MPI_Comm comm, char* type_name, int* num_siblings, int* index, int* flag);
int PMPIX_Get_hw_topo_common_level(MPI_Comm comm, int n, const int ranks[], char* type_name, int* flag);
/* ==== language interoperability (interop.cpp) ============================ */
/* A status as MPI_F_STATUS_SIZE MPI_Fints (the C layout copied as is: source,
 * tag and error at MPI_F_SOURCE, MPI_F_TAG, MPI_F_ERROR). The f90 type
 * constructors return the predefined C type of the smallest kind that has
 * the requested decimal precision p and exponent range r (MPI_UNDEFINED:
 * any), as Fortran's SELECTED_INT_KIND / SELECTED_REAL_KIND would pick. */
#define MPI_F_STATUS_SIZE 6
#define MPI_STATUS_SIZE MPI_F_STATUS_SIZE
#define MPI_F_SOURCE 0
#define MPI_F_TAG 1
#define MPI_F_ERROR 2
#define MPI_F_STATUS_IGNORE ((MPI_Fint*)0)
#define MPI_F_STATUSES_IGNORE ((MPI_Fint*)0)
int MPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status);
int MPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status);
int MPI_Type_create_f90_integer(int r, MPI_Datatype* newtype);
int MPI_Type_create_f90_real(int p, int r, MPI_Datatype* newtype);
int MPI_Type_create_f90_complex(int p, int r, MPI_Datatype* newtype);
int PMPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status);
int PMPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status);
int PMPI_Type_create_f90_integer(int r, MPI_Datatype* newtype);
int PMPI_Type_create_f90_real(int p, int r, MPI_Datatype* newtype);
int PMPI_Type_create_f90_complex(int p, int r, MPI_Datatype* newtype);
/* ==== end of language interoperability ==================================== */

/* ==== one-sided communication (onesided.cpp): declared, not provided ===== */
/* The MPI-3.1 chapter 11 interface, so that programs which name windows
 * compile and link. No window can be created: every call raises
 * MPI_ERR_UNSUPPORTED_OPERATION ("one-sided communication is not provided by
 * this MPI") and sets its output handles to their null value; MPI_Win_free
 * of a window that cannot exist is MPI_ERR_WIN. MPI_Win_create_errhandler
 * really creates a handler (it can be freed). */
typedef int MPI_Win;
#define MPI_WIN_NULL ((MPI_Win)0)

/* Assertions (MPI_Win_fence, post, start, lock). */
#define MPI_MODE_NOCHECK 1024
#define MPI_MODE_NOSTORE 2048
#define MPI_MODE_NOPUT 4096
#define MPI_MODE_NOPRECEDE 8192
#define MPI_MODE_NOSUCCEED 16384
#define MPI_LOCK_EXCLUSIVE 234
#define MPI_LOCK_SHARED 235
/* Window attributes (MPI_Win_get_attr keyvals) and their values. */
#define MPI_WIN_BASE 8
#define MPI_WIN_SIZE 9
#define MPI_WIN_DISP_UNIT 10
#define MPI_WIN_CREATE_FLAVOR 11
#define MPI_WIN_MODEL 12
#define MPI_WIN_FLAVOR_CREATE 1
#define MPI_WIN_FLAVOR_ALLOCATE 2
#define MPI_WIN_FLAVOR_DYNAMIC 3
#define MPI_WIN_FLAVOR_SHARED 4
#define MPI_WIN_SEPARATE 1
#define MPI_WIN_UNIFIED 2

typedef int MPI_Win_copy_attr_function(MPI_Win oldwin, int win_keyval, void* extra_state,
                                       void* attribute_val_in, void* attribute_val_out, int* flag);
typedef int MPI_Win_delete_attr_function(MPI_Win win, int win_keyval, void* attribute_val,
                                         void* extra_state);
typedef void MPI_Win_errhandler_function(MPI_Win* win, int* error_code, ...);
int nmad_mpi_win_null_copy_fn(MPI_Win, int, void*, void*, void*, int*);
int nmad_mpi_win_dup_fn(MPI_Win, int, void*, void*, void*, int*);
int nmad_mpi_win_null_delete_fn(MPI_Win, int, void*, void*);
#define MPI_WIN_NULL_COPY_FN nmad_mpi_win_null_copy_fn
#define MPI_WIN_DUP_FN nmad_mpi_win_dup_fn
#define MPI_WIN_NULL_DELETE_FN nmad_mpi_win_null_delete_fn

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win);
int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win);
int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                            MPI_Win* win);
int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr);
int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win);
int MPI_Win_attach(MPI_Win win, void* base, MPI_Aint size);
int MPI_Win_detach(MPI_Win win, const void* base);
int MPI_Win_free(MPI_Win* win);
int MPI_Win_get_group(MPI_Win win, MPI_Group* group);
int MPI_Win_set_info(MPI_Win win, MPI_Info info);
int MPI_Win_get_info(MPI_Win win, MPI_Info* info_used);
int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int MPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int MPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                   MPI_Win win);
int MPI_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                       void* result_addr, int result_count, MPI_Datatype result_datatype, int target_rank,
                       MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                       MPI_Win win);
int MPI_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win);
int MPI_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win);
int MPI_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win,
             MPI_Request* request);
int MPI_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win,
             MPI_Request* request);
int MPI_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                    MPI_Win win, MPI_Request* request);
int MPI_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                        void* result_addr, int result_count, MPI_Datatype result_datatype, int target_rank,
                        MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                        MPI_Win win, MPI_Request* request);
int MPI_Win_fence(int assert, MPI_Win win);
int MPI_Win_start(MPI_Group group, int assert, MPI_Win win);
int MPI_Win_complete(MPI_Win win);
int MPI_Win_post(MPI_Group group, int assert, MPI_Win win);
int MPI_Win_wait(MPI_Win win);
int MPI_Win_test(MPI_Win win, int* flag);
int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win);
int MPI_Win_lock_all(int assert, MPI_Win win);
int MPI_Win_unlock(int rank, MPI_Win win);
int MPI_Win_unlock_all(MPI_Win win);
int MPI_Win_flush(int rank, MPI_Win win);
int MPI_Win_flush_all(MPI_Win win);
int MPI_Win_flush_local(int rank, MPI_Win win);
int MPI_Win_flush_local_all(MPI_Win win);
int MPI_Win_sync(MPI_Win win);
int MPI_Win_create_keyval(MPI_Win_copy_attr_function* win_copy_attr_fn,
                          MPI_Win_delete_attr_function* win_delete_attr_fn, int* win_keyval,
                          void* extra_state);
int MPI_Win_free_keyval(int* win_keyval);
int MPI_Win_set_attr(MPI_Win win, int win_keyval, void* attribute_val);
int MPI_Win_get_attr(MPI_Win win, int win_keyval, void* attribute_val, int* flag);
int MPI_Win_delete_attr(MPI_Win win, int win_keyval);
int MPI_Win_set_name(MPI_Win win, const char* win_name);
int MPI_Win_get_name(MPI_Win win, char* win_name, int* resultlen);
int MPI_Win_create_errhandler(MPI_Win_errhandler_function* win_errhandler_fn, MPI_Errhandler* errhandler);
int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler);
int MPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler);
int MPI_Win_call_errhandler(MPI_Win win, int errorcode);
MPI_Fint MPI_Win_c2f(MPI_Win win);
MPI_Win MPI_Win_f2c(MPI_Fint win);
int PMPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win);
int PMPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                      MPI_Win* win);
int PMPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                             MPI_Win* win);
int PMPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr);
int PMPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win);
int PMPI_Win_attach(MPI_Win win, void* base, MPI_Aint size);
int PMPI_Win_detach(MPI_Win win, const void* base);
int PMPI_Win_free(MPI_Win* win);
int PMPI_Win_get_group(MPI_Win win, MPI_Group* group);
int PMPI_Win_set_info(MPI_Win win, MPI_Info info);
int PMPI_Win_get_info(MPI_Win win, MPI_Info* info_used);
int PMPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int PMPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int PMPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                    MPI_Win win);
int PMPI_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                        void* result_addr, int result_count, MPI_Datatype result_datatype, int target_rank,
                        MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                        MPI_Win win);
int PMPI_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                      MPI_Aint target_disp, MPI_Op op, MPI_Win win);
int PMPI_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr,
                          MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win);
int PMPI_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
              MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win,
              MPI_Request* request);
int PMPI_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
              MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win,
              MPI_Request* request);
int PMPI_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                     MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                     MPI_Win win, MPI_Request* request);
int PMPI_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         void* result_addr, int result_count, MPI_Datatype result_datatype, int target_rank,
                         MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                         MPI_Win win, MPI_Request* request);
int PMPI_Win_fence(int assert, MPI_Win win);
int PMPI_Win_start(MPI_Group group, int assert, MPI_Win win);
int PMPI_Win_complete(MPI_Win win);
int PMPI_Win_post(MPI_Group group, int assert, MPI_Win win);
int PMPI_Win_wait(MPI_Win win);
int PMPI_Win_test(MPI_Win win, int* flag);
int PMPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win);
int PMPI_Win_lock_all(int assert, MPI_Win win);
int PMPI_Win_unlock(int rank, MPI_Win win);
int PMPI_Win_unlock_all(MPI_Win win);
int PMPI_Win_flush(int rank, MPI_Win win);
int PMPI_Win_flush_all(MPI_Win win);
int PMPI_Win_flush_local(int rank, MPI_Win win);
int PMPI_Win_flush_local_all(MPI_Win win);
int PMPI_Win_sync(MPI_Win win);
int PMPI_Win_create_keyval(MPI_Win_copy_attr_function* win_copy_attr_fn,
                           MPI_Win_delete_attr_function* win_delete_attr_fn, int* win_keyval,
                           void* extra_state);
int PMPI_Win_free_keyval(int* win_keyval);
int PMPI_Win_set_attr(MPI_Win win, int win_keyval, void* attribute_val);
int PMPI_Win_get_attr(MPI_Win win, int win_keyval, void* attribute_val, int* flag);
int PMPI_Win_delete_attr(MPI_Win win, int win_keyval);
int PMPI_Win_set_name(MPI_Win win, const char* win_name);
int PMPI_Win_get_name(MPI_Win win, char* win_name, int* resultlen);
int PMPI_Win_create_errhandler(MPI_Win_errhandler_function* win_errhandler_fn, MPI_Errhandler* errhandler);
int PMPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler);
int PMPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler);
int PMPI_Win_call_errhandler(MPI_Win win, int errorcode);
MPI_Fint PMPI_Win_c2f(MPI_Win win);
MPI_Win PMPI_Win_f2c(MPI_Fint win);
/* ==== end of one-sided communication ====================================== */

#endif /* NMAD_MPI_MISC_ONESIDED_H */
