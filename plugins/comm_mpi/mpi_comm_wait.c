/* SPDX-License-Identifier: MIT */
/* Point-to-point requests and the one place the plugin waits for them.
 *
 * A wait polls (MPI_Testsome) rather than blocks, so that it can also test
 * the abort receive each round (a peer's abort ends it at once) and give up
 * after timeout_s without any request completing. It spins while requests
 * are completing and for MC_SPIN_S after, then naps between polls, so a rank
 * that waits for a slower peer does not take a core from the backward pass
 * running beside it. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_comm_internal.h"

#include <stdio.h>
#include <string.h>

#define MC_SPIN_S 100e-6 /* poll flat out this long after the last completion */
#define MC_NAP_NS 20000  /* then sleep this long between polls */

void mc_batch_reset(mc_batch *b) { b->n = 0; }

int mc_post(mpi_comm *c, mc_batch *b, int is_recv, void *buf, size_t bytes, int peer, int tag) {
  if (c->dead) return c->dead_status;
  if (b->n >= b->cap || bytes > MC_PIECE_MAX)
    return mc_kill(c, MC_ERR_INTERNAL, c->rank,
                   "internal error: a step posted too many or too large messages", 1);
  MPI_Request *r = &b->req[b->n];
  int rc = is_recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->data, r)
                   : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->data, r);
  if (rc != MPI_SUCCESS) {
    char what[80];
    snprintf(what, sizeof what, "%s rank %d (%s)", is_recv ? "receiving from" : "sending to", peer,
             is_recv ? "MPI_Irecv" : "MPI_Isend");
    return mc_kill_mpi(c, what, rc);
  }
  b->peer[b->n] = peer;
  b->is_recv[b->n] = (unsigned char)is_recv;
  b->n++;
  return MC_OK;
}

/* "rank 2" or "ranks 1, 2, 5, ..." with requests still open in b. */
static void open_peers(const mc_batch *b, char *buf, size_t cap) {
  int seen[4], n = 0, more = 0;
  for (int i = 0; i < b->n; i++) {
    if (b->req[i] == MPI_REQUEST_NULL) continue;
    int dup = 0;
    for (int j = 0; j < n; j++) dup |= seen[j] == b->peer[i];
    if (dup) continue;
    if (n < 4) seen[n++] = b->peer[i];
    else more = 1;
  }
  size_t m = (size_t)snprintf(buf, cap, "%s", n == 1 ? "rank " : "ranks ");
  for (int j = 0; j < n && m < cap; j++)
    m += (size_t)snprintf(buf + m, cap - m, "%s%d", j ? ", " : "", seen[j]);
  if (more && m < cap) snprintf(buf + m, cap - m, ", ...");
  if (n == 0) snprintf(buf, cap, "its peers");
}

static int timed_out(mpi_comm *c, const mc_batch *b) {
  char who[96], why[320];
  open_peers(b, who, sizeof who);
  if (c->in_header) /* a peer has not entered this collective */
    snprintf(why, sizeof why,
             "no progress in %g s: a peer died, hangs or cannot be reached (waiting for %s to "
             "join)",
             c->timeout_s, who);
  else
    snprintf(why, sizeof why,
             "no progress in %g s: a peer died, hangs or cannot be reached (waiting on data "
             "with %s)",
             c->timeout_s, who);
  mc_runtime_note_hazard(c->timeout_s);
  return mc_kill(c, MC_ERR_IO, c->rank, why, 1);
}

/* MPI_Testsome failed: name the request (and peer) that did, if it says. */
static int request_failed(mpi_comm *c, const mc_batch *b, int rc, int out) {
  if (rc == MPI_ERR_IN_STATUS)
    for (int j = 0; j < out; j++) {
      int err = c->statuses[j].MPI_ERROR, i = c->indices[j];
      if (err == MPI_SUCCESS || i < 0 || i >= b->n) continue;
      char what[80];
      snprintf(what, sizeof what, "%s rank %d", b->is_recv[i] ? "receiving from" : "sending to",
               b->peer[i]);
      return mc_kill_mpi(c, what, err);
    }
  return mc_kill_mpi(c, "waiting for messages (MPI_Testsome)", rc);
}

int mc_wait(mpi_comm *c, mc_batch *b, mc_done_fn done, void *ctx) {
  if (c->dead) return c->dead_status;
  int left = b->n;
  double last = mc_now();
  while (left > 0) {
    int out = 0;
    int rc = MPI_Testsome(b->n, b->req, &out, c->indices, c->statuses);
    if (rc != MPI_SUCCESS) return request_failed(c, b, rc, out);
    if (out == MPI_UNDEFINED) break; /* none active */
    if (out > 0) {
      left -= out;
      last = mc_now();
      for (int j = 0; done && j < out; j++) {
        int st = done(c, b, c->indices[j], ctx);
        if (st != MC_OK) return st;
      }
      continue;
    }
    if (mc_poll_abort(c)) return c->dead_status;
    double t = mc_now();
    if (t - last > c->timeout_s) return timed_out(c, b);
    if (t - last > MC_SPIN_S) mc_nap(MC_NAP_NS);
  }
  b->n = 0;
  return MC_OK;
}

int mc_run_steps(mpi_comm *c, size_t nsteps, int depth, mc_step_fn post, mc_step_fn finish,
                 void *ctx) {
  int st = MC_OK;
  for (size_t s = 0; st == MC_OK && s < nsteps && s < (size_t)depth; s++) {
    mc_batch_reset(&c->batch[s & 1]);
    st = post(c, &c->batch[s & 1], s, ctx);
  }
  for (size_t s = 0; st == MC_OK && s < nsteps; s++) {
    mc_batch *b = &c->batch[s & 1];
    st = mc_wait(c, b, NULL, NULL);
    if (st == MC_OK && finish) st = finish(c, b, s, ctx);
    if (st == MC_OK && s + (size_t)depth < nsteps) {
      mc_batch *nb = &c->batch[(s + (size_t)depth) & 1];
      mc_batch_reset(nb);
      st = post(c, nb, s + (size_t)depth, ctx);
    }
  }
  return st;
}
