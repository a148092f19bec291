/* SPDX-License-Identifier: MIT */
/* Rank layout of a data-parallel job, read from the launcher's environment
 * (explicit ESMTRAIN_*, torchrun, Slurm, Open MPI, an MPICH-style PMI
 * launcher, or a single process), and which communicator to use.
 * Internal: used by the host communicator (tcp_comm.h) and to bootstrap
 * NCCL. */
#ifndef ESMTRAIN_DIST_ENV_H
#define ESMTRAIN_DIST_ENV_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

#define ESMT_DIST_ADDR_MAX 256
#define ESMT_DIST_PATH_MAX 1024

typedef struct esmt_dist_env {
  int rank, world_size;
  int local_rank, local_world_size;
  char master_addr[ESMT_DIST_ADDR_MAX]; /* "" when unknown (rendezvous file) */
  int master_port;                      /* 0: unset (ephemeral with a rendezvous file) */
  char rendezvous_file[ESMT_DIST_PATH_MAX]; /* "" unless ESMTRAIN_RENDEZVOUS_FILE */
  const char *source;   /* "esmtrain", "torchrun", "slurm", "openmpi", "pmi", "single" */
  uint64_t job_token;   /* same on every rank of one job; rejects strays */
  double timeout_s;     /* ESMTRAIN_COMM_TIMEOUT, default 300 */
  int mpi_launched;     /* an MPI launcher (mpirun, mpiexec, srun --mpi) started this process */
  int comm;             /* ESMTRAIN_COMM: esmt_comm_kind (comm.h), 0 = auto when unset */
} esmt_dist_env;

/* Looks a variable up; NULL when unset. Lets tests feed a fake environment. */
typedef const char *(*esmt_getenv_fn)(const char *name, void *user);

/* Detect from the process environment. */
ESMT_HIDDEN esmt_status esmt_dist_env_detect(esmt_dist_env *out);
/* Detect through `get` (NULL = getenv). Errors name the variable. */
ESMT_HIDDEN esmt_status esmt_dist_env_detect_with(esmt_dist_env *out, esmt_getenv_fn get,
                                                  void *user);

/* One line for logs: "rank 3 of 8 (local 1 of 2) from torchrun, rank 0 at
 * node7:29500". */
ESMT_HIDDEN void esmt_dist_env_describe(const esmt_dist_env *env, char *buf, size_t cap);

/* Slurm's compressed host list ("gpu[01-04,07],login1"): the number of
 * hosts in *count and, when index < count, host `index` in out. */
ESMT_HIDDEN esmt_status esmt_hostlist_nth(const char *list, size_t index, char *out, size_t cap,
                                          size_t *count);

/* Slurm's SLURM_TASKS_PER_NODE ("2(x3),1"): tasks on node `node`. */
ESMT_HIDDEN esmt_status esmt_slurm_tasks_on_node(const char *spec, int node, int *tasks);

#endif
