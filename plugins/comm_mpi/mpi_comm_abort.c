/* SPDX-License-Identifier: MIT */
/* Failure handling of an MPI communicator: the abort channel, the dead
 * state and its message, mirroring the TCP communicator's (tcp_comm_io.c)
 * wording:
 *   "allreduce #37 (step 12): rank 2 failed: <reason>".
 *
 * Failure agreement: every rank keeps one MPI_Irecv(ANY_SOURCE, MC_TAG_ABORT)
 * posted on the control communicator. A rank that fails (its own timeout, an
 * MPI error, a mismatch, abort()) sends its reason there to every peer; a
 * rank that receives one is dead with "rank K failed: <reason>" and sends
 * nothing on (K told everyone itself). Every wait tests that receive, and a
 * dead communicator releases its outstanding requests (mc_release). */
#define _POSIX_C_SOURCE 200809L
#include "mpi_comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/comm_text.h"

/* "allreduce #37 (step 12): " for the current operation. */
static void op_prefix(const mpi_comm *c, char *buf, size_t cap) {
  esmt_comm_op_prefix(buf, cap, c->op, c->seq, c->step);
}

/* The reason to every peer's abort receive. Best effort and brief: a notice
 * is under 1 KiB and goes out eagerly; a peer that cannot take it within 2 s
 * learns from its own timeout. Sends still pending then are abandoned, and
 * their buffer with them (MPI may read it later). */
static void forward_abort(mpi_comm *c, const char *reason) {
  if (c->world < 2) return;
  size_t n = strlen(reason);
  if (n > MC_MSG_MAX) n = MC_MSG_MAX;
  char *msg = malloc(n + 1);
  MPI_Request *rq = malloc((size_t)(c->world - 1) * sizeof *rq);
  if (!msg || !rq) {
    free(msg);
    free(rq);
    return;
  }
  memcpy(msg, reason, n);
  int k = 0;
  for (int p = 0; p < c->world; p++)
    if (p != c->rank && MPI_Isend(msg, (int)n, MPI_CHAR, p, MC_TAG_ABORT, c->ctl, &rq[k]) ==
                            MPI_SUCCESS)
      k++;
  double deadline = mc_now() + 2.0;
  int done = 0;
  while (!done && mc_now() < deadline) {
    if (MPI_Testall(k, rq, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break;
    if (!done) mc_nap(50000);
  }
  if (done) free(msg);
  else {
    for (int i = 0; i < k; i++)
      if (rq[i] != MPI_REQUEST_NULL) MPI_Request_free(&rq[i]);
    c->leaked = 1;
    mc_runtime_note_hazard(c->timeout_s);
  }
  free(rq);
}

int mc_kill(mpi_comm *c, int status, int origin, const char *reason, int forward) {
  if (c->dead) return c->dead_status;
  char pre[160];
  op_prefix(c, pre, sizeof pre);
  if (origin == c->rank) snprintf(c->dead_msg, sizeof c->dead_msg, "%s%s", pre, reason);
  else snprintf(c->dead_msg, sizeof c->dead_msg, "%srank %d failed: %s", pre, origin, reason);
  c->dead = 1;
  c->dead_status = status;
  if (c->op_state == 1) c->op_state = 3;
  if (forward) forward_abort(c, reason);
  mc_release(c);
  return status;
}

int mc_kill_mpi(mpi_comm *c, const char *what, int code) {
  char e[MPI_MAX_ERROR_STRING + 1], why[MPI_MAX_ERROR_STRING + 200];
  mc_error_string(code, e, sizeof e);
  snprintf(why, sizeof why, "%s failed: %s", what, e);
  return mc_kill(c, MC_ERR_IO, c->rank, why, 1);
}

int mc_poll_abort(mpi_comm *c) {
  if (c->dead) return 1;
  if (c->abort_req == MPI_REQUEST_NULL) return 0;
  int flag = 0;
  MPI_Status st;
  memset(&st, 0, sizeof st);
  int rc = MPI_Test(&c->abort_req, &flag, &st);
  if (rc != MPI_SUCCESS) {
    int src = st.MPI_SOURCE;
    if (flag && src >= 0 && src < c->world && src != c->rank)
      mc_kill(c, MC_ERR_IO, src, "sent an abort notice that could not be read", 0);
    else mc_kill_mpi(c, "testing the abort channel (MPI_Test)", rc);
    return 1;
  }
  if (!flag) return 0;
  int len = 0;
  if (MPI_Get_count(&st, MPI_CHAR, &len) != MPI_SUCCESS || len < 0) len = 0;
  if (len > MC_MSG_MAX) len = MC_MSG_MAX;
  c->abort_in[len] = '\0';
  int src = st.MPI_SOURCE >= 0 && st.MPI_SOURCE < c->world ? st.MPI_SOURCE : c->rank;
  mc_kill(c, MC_ERR_IO, src, len ? c->abort_in : "aborted (no reason given)", 0);
  return 1;
}

void mc_release(mpi_comm *c) {
  int any = 0;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < c->batch[k].n; i++) {
      mc_batch *b = &c->batch[k];
      if (b->req[i] == MPI_REQUEST_NULL) continue;
      any = 1;
      /* Receives can be cancelled; sends finish on their own once eager, or
       * never if the peer stopped receiving. */
      if (b->is_recv[i]) MPI_Cancel(&b->req[i]);
    }
  double deadline = mc_now() + 1.0;
  while (any) {
    int pending = 0;
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < c->batch[k].n; i++) {
        MPI_Request *r = &c->batch[k].req[i];
        int flag = 0;
        if (*r != MPI_REQUEST_NULL) MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        pending += *r != MPI_REQUEST_NULL;
      }
    if (!pending || mc_now() > deadline) break;
    mc_nap(50000);
  }
  /* What is still open is abandoned: MPI may finish it later, into memory
   * that destroy therefore keeps (c->leaked). */
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < c->batch[k].n; i++)
      if (c->batch[k].req[i] != MPI_REQUEST_NULL) {
        MPI_Request_free(&c->batch[k].req[i]);
        c->leaked = 1;
      }
    c->batch[k].n = 0;
  }
  if (c->leaked) mc_runtime_note_hazard(c->timeout_s);
}
