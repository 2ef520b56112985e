/* nmad_mpi/dynamic.h: part of mpi.h, which includes it inside its extern "C"
 * block after the handles and constants: process creation and management
 * (MPI 4.1 11.8-11.10, dynamic.cpp). Processes are started by the launcher
 * only: spawning, ports and the name service are declared so that programs
 * naming them build, and every such call fails with
 * MPI_ERR_UNSUPPORTED_OPERATION ("process creation and management is not
 * provided by this MPI") after setting its output handles to their null
 * value. MPI_Comm_disconnect works on any communicator (as MPI_Comm_free,
 * after the pending communication of the communicator has completed), and
 * MPI_Comm_get_parent gives MPI_COMM_NULL (misc.cpp).
 * Programs include <mpi.h>, never this file. */
#ifndef NMAD_MPI_DYNAMIC_H
#define NMAD_MPI_DYNAMIC_H

#ifndef NMAD_MPI_H
#error "include <mpi.h>, not nmad_mpi/dynamic.h"
#endif

#define MPI_MAX_PORT_NAME 256
#define MPI_ARGV_NULL ((char**)0)
#define MPI_ARGVS_NULL ((char***)0)
#define MPI_ERRCODES_IGNORE ((int*)0)

int MPI_Comm_spawn(const char* command, char* argv[], int maxprocs, MPI_Info info, int root, MPI_Comm comm,
                   MPI_Comm* intercomm, int array_of_errcodes[]);
int MPI_Comm_spawn_multiple(int count, char* array_of_commands[], char** array_of_argv[],
                            const int array_of_maxprocs[], const MPI_Info array_of_info[], int root, MPI_Comm comm,
                            MPI_Comm* intercomm, int array_of_errcodes[]);
int MPI_Open_port(MPI_Info info, char* port_name);
int MPI_Close_port(const char* port_name);
int MPI_Comm_accept(const char* port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm* newcomm);
int MPI_Comm_connect(const char* port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm* newcomm);
int MPI_Comm_join(int fd, MPI_Comm* intercomm);
int MPI_Comm_disconnect(MPI_Comm* comm);
int MPI_Publish_name(const char* service_name, MPI_Info info, const char* port_name);
int MPI_Unpublish_name(const char* service_name, MPI_Info info, const char* port_name);
int MPI_Lookup_name(const char* service_name, MPI_Info info, char* port_name);

int PMPI_Comm_spawn(const char* command, char* argv[], int maxprocs, MPI_Info info, int root, MPI_Comm comm,
                    MPI_Comm* intercomm, int array_of_errcodes[]);
int PMPI_Comm_spawn_multiple(int count, char* array_of_commands[], char** array_of_argv[],
                             const int array_of_maxprocs[], const MPI_Info array_of_info[], int root, MPI_Comm comm,
                             MPI_Comm* intercomm, int array_of_errcodes[]);
int PMPI_Open_port(MPI_Info info, char* port_name);
int PMPI_Close_port(const char* port_name);
int PMPI_Comm_accept(const char* port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm* newcomm);
int PMPI_Comm_connect(const char* port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm* newcomm);
int PMPI_Comm_join(int fd, MPI_Comm* intercomm);
int PMPI_Comm_disconnect(MPI_Comm* comm);
int PMPI_Publish_name(const char* service_name, MPI_Info info, const char* port_name);
int PMPI_Unpublish_name(const char* service_name, MPI_Info info, const char* port_name);
int PMPI_Lookup_name(const char* service_name, MPI_Info info, char* port_name);

#endif
