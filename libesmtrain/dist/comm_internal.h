/* SPDX-License-Identifier: MIT */
/* The communicator's dispatch record, shared by comm.c (argument checks,
 * dispatch) and comm_select.c (choosing and loading the transport). */
#ifndef ESMTRAIN_COMM_INTERNAL_H
#define ESMTRAIN_COMM_INTERNAL_H

#include "comm.h"
#include "esmtrain/comm_plugin.h"
#include "tcp_comm.h"

struct esmt_comm {
  esmt_tcp_comm *tcp;              /* the TCP ring, or NULL */
  const esmt_comm_plugin *plugin;  /* else the plugin's table, */
  void *state;                     /* its communicator */
  void *dl;                        /* and the dlopen() handle (kept open: see comm_select.c) */
  char note[512];                  /* why AUTO did not take MPI, or "" */
  uint64_t calls[ESMT_COMM_OP_COUNT]; /* collectives of each kind so far (esmt_comm_test_fault) */
};

#endif
