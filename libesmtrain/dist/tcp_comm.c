/* SPDX-License-Identifier: MIT */
/* Setup and teardown of the TCP communicator.
 *
 * Rendezvous: rank 0 listens on master_port; every other rank opens its own
 * listener on an ephemeral port, connects to rank 0 (retrying until the
 * timeout) and sends HELLO (rank, world size, listener port, job token).
 * Rank 0 checks them, answers with the table of listener addresses (or a
 * REJECT with the reason), every rank connects to rank+1 and accepts rank-1,
 * and a READY/GO round through rank 0 makes sure the whole ring is up
 * before anyone returns. The rendezvous sockets stay open as the control
 * channel. */
#define _POSIX_C_SOURCE 200809L
#include "tcp_comm_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENTRY_SIZE 20 /* table entry: 16-byte dotted IPv4 address + port */

/* ---- rank 0 --------------------------------------------------------------- */

static void reject_all(int *fds, int n, int extra_fd, const char *reason) {
  double dl = esmt_now_s() + 1.0;
  for (int i = 0; i <= n; i++) {
    int fd = i < n ? fds[i] : extra_fd;
    if (fd < 0) continue;
    comm_send_msg(fd, MSG_REJECT, 0, reason, (uint32_t)strlen(reason), dl);
  }
}

/* Accept HELLOs until every rank is there; fills ctl_fds and the table. */
static esmt_status gather_hellos(esmt_tcp_comm *c, int lfd, unsigned char *table, double deadline) {
  int have = 0;
  char reason[COMM_MSG_MAX];
  while (have < c->world - 1) {
    struct pollfd pf = {lfd, POLLIN, 0};
    double left = deadline - esmt_now_s();
    int r = left <= 0 ? 0 : poll(&pf, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 && left > 0 && r == 0) continue;
    if (r <= 0) {
      char missing[256] = "";
      size_t m = 0;
      for (int p = 1; p < c->world && m < sizeof missing - 16; p++)
        if (c->ctl_fds[p] < 0)
          m += (size_t)snprintf(missing + m, sizeof missing - m, "%s%d", m ? ", " : "", p);
      snprintf(reason, sizeof reason,
               "rendezvous: timed out after %.1f s waiting for rank(s) %s to connect "
               "(%d of %d ranks arrived)",
               c->timeout_s, missing, have + 1, c->world);
      reject_all(c->ctl_fds, c->world, -1, reason);
      return esmt_fail(ESMT_ERR_IO, "%s", reason);
    }
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    int fd = accept(lfd, (struct sockaddr *)&peer, &pl);
    if (fd < 0) continue; /* EINTR, EAGAIN, ECONNABORTED: try again */
    comm_prep_socket(fd);
    comm_hdr h;
    unsigned char hello[24];
    double dl = esmt_now_s() + 2.0 < deadline ? esmt_now_s() + 2.0 : deadline;
    if (comm_recv_msg(fd, &h, hello, sizeof hello, dl) != 0 || h.type != MSG_HELLO ||
        h.len != sizeof hello) {
      close(fd); /* not one of ours (port scanner, stray) */
      continue;
    }
    int rank = (int)comm_get_u32(hello), world = (int)comm_get_u32(hello + 4);
    int port = (int)comm_get_u32(hello + 8);
    uint64_t token = comm_get_u64(hello + 16);
    char addr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &peer.sin_addr, addr, sizeof addr);
    if (token != c->token) {
      /* Another job's process: turn it away without failing this job. */
      snprintf(reason, sizeof reason,
               "rank 0 at this port belongs to another job (job token differs); check "
               "MASTER_ADDR/MASTER_PORT");
      reject_all(NULL, 0, fd, reason);
      close(fd);
      continue;
    }
    reason[0] = '\0';
    if (world != c->world)
      snprintf(reason, sizeof reason,
               "rendezvous: rank %d (%s) has world size %d but rank 0 has %d", rank, addr, world,
               c->world);
    else if (rank <= 0 || rank >= c->world)
      snprintf(reason, sizeof reason, "rendezvous: a process at %s claims rank %d of %d", addr,
               rank, c->world);
    else if (c->ctl_fds[rank] >= 0)
      snprintf(reason, sizeof reason,
               "rendezvous: duplicate rank %d (from %s and %s): two processes have the same rank",
               rank, (const char *)table + rank * ENTRY_SIZE, addr);
    if (reason[0]) {
      reject_all(c->ctl_fds, c->world, fd, reason);
      close(fd);
      return esmt_fail(ESMT_ERR_CONFIG, "%s", reason);
    }
    c->ctl_fds[rank] = fd;
    memcpy(table + rank * ENTRY_SIZE, addr, strlen(addr) + 1);
    comm_put_u32(table + rank * ENTRY_SIZE + 16, (uint32_t)port);
    have++;
  }
  double dl = esmt_now_s() + c->timeout_s;
  for (int p = 1; p < c->world; p++)
    if (comm_send_msg(c->ctl_fds[p], MSG_TABLE, 0, table, (uint32_t)(c->world * ENTRY_SIZE), dl))
      return esmt_fail(ESMT_ERR_IO, "rendezvous: sending the rank table to rank %d failed: %s", p,
                       strerror(errno));
  return ESMT_OK;
}

/* ---- every rank --------------------------------------------------------- */

/* Connect to rank+1 and accept rank-1 (verified by rank and token). */
static esmt_status build_ring(esmt_tcp_comm *c, int lfd, const unsigned char *table,
                              const char *host0, int port0, double deadline,
                              unsigned char *ready) {
  int next = (c->rank + 1) % c->world, prev = (c->rank + c->world - 1) % c->world;
  char host[ESMT_DIST_ADDR_MAX];
  int port = port0;
  snprintf(host, sizeof host, "%s", host0);
  if (next != 0) {
    memcpy(host, table + next * ENTRY_SIZE, 16);
    host[15] = '\0';
    port = (int)comm_get_u32(table + next * ENTRY_SIZE + 16);
  }
  char what[32];
  snprintf(what, sizeof what, "rank %d", next);
  esmt_status st = comm_connect_retry(what, host, port, deadline, c->timeout_s, &c->next_fd);
  if (st != ESMT_OK) return comm_kill(c, c->rank, esmt_last_error(), 1, -1);
  unsigned char tok[8];
  comm_put_u64(tok, c->token);
  if (comm_send_msg(c->next_fd, MSG_RING, c->rank, tok, 8, deadline) != 0) {
    char why[200];
    snprintf(why, sizeof why, "cannot send to rank %d at %s:%d: %s", next, host, port,
             strerror(errno));
    return comm_kill(c, c->rank, why, 1, -1);
  }
  /* Watch the control sockets too: a rank that fails now sends an abort. */
  struct pollfd *pf = malloc((size_t)(c->world + 1) * sizeof *pf);
  int *peer = malloc((size_t)(c->world + 1) * sizeof *peer);
  if (!pf || !peer) {
    free(pf);
    free(peer);
    return comm_kill(c, c->rank, "out of memory", 1, -1);
  }
  st = ESMT_OK;
  while (st == ESMT_OK && c->prev_fd < 0) {
    int n = 1;
    pf[0] = (struct pollfd){lfd, POLLIN, 0};
    for (int p = 0; p < c->world; p++)
      if (c->ctl_fds[p] >= 0) {
        pf[n] = (struct pollfd){c->ctl_fds[p], POLLIN, 0};
        peer[n++] = p;
      }
    double left = deadline - esmt_now_s();
    if (left <= 0) {
      char why[160];
      snprintf(why, sizeof why, "timed out after %.1f s waiting for rank %d to connect",
               c->timeout_s, prev);
      st = comm_kill(c, c->rank, why, 1, -1);
      break;
    }
    int r = poll(pf, (nfds_t)n, (int)(left * 1000) + 1);
    if (r <= 0) continue;
    for (int i = 1; i < n && st == ESMT_OK; i++) {
      int got = 0; /* rank 0 may get READY from ranks already done */
      if (pf[i].revents) st = comm_handle_ctl(c, peer[i], c->rank == 0 ? MSG_READY : 0, &got);
      if (got) ready[peer[i]] = 1;
    }
    if (c->dead) st = comm_dead_error(c);
    if (st != ESMT_OK || !pf[0].revents) continue;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) continue;
    comm_prep_socket(fd);
    comm_hdr h;
    unsigned char got[8];
    double dl = esmt_now_s() + 2.0 < deadline ? esmt_now_s() + 2.0 : deadline;
    if (comm_recv_msg(fd, &h, got, sizeof got, dl) == 0 && h.type == MSG_RING &&
        h.origin == prev && h.len == 8 && comm_get_u64(got) == c->token)
      c->prev_fd = fd;
    else close(fd);
  }
  free(pf);
  free(peer);
  return st;
}

/* READY from every rank to rank 0, then GO back: nobody returns from create
 * before the whole ring exists. */
static esmt_status ready_round(esmt_tcp_comm *c, double deadline, unsigned char *ready) {
  if (c->rank != 0) {
    if (comm_send_msg(c->ctl_fds[0], MSG_READY, c->rank, NULL, 0, deadline) != 0)
      return comm_kill(c, 0, "connection lost during rendezvous", 0, -1);
  }
  struct pollfd *pf = calloc((size_t)c->world, sizeof *pf);
  int *peer = calloc((size_t)c->world, sizeof *peer);
  esmt_status st = ESMT_OK;
  if (!pf || !peer) st = comm_kill(c, c->rank, "out of memory", 1, -1);
  int need = 0;
  if (c->rank != 0) need = 1;
  else
    for (int p = 1; p < c->world; p++) need += !ready[p];
  while (st == ESMT_OK && need > 0) {
    int n = 0;
    for (int p = 0; p < c->world; p++)
      if (c->ctl_fds[p] >= 0) {
        pf[n] = (struct pollfd){c->ctl_fds[p], POLLIN, 0};
        peer[n++] = p;
      }
    double left = deadline - esmt_now_s();
    if (left <= 0 || n == 0) {
      st = comm_kill(c, c->rank,
                     c->rank == 0 ? "timed out waiting for every rank to finish connecting"
                                  : "timed out waiting for rank 0 to confirm the ring",
                     1, -1);
      break;
    }
    int r = poll(pf, (nfds_t)n, (int)(left * 1000) + 1);
    for (int i = 0; r > 0 && i < n && st == ESMT_OK; i++) {
      if (!pf[i].revents) continue;
      int got = 0;
      st = comm_handle_ctl(c, peer[i], c->rank == 0 ? MSG_READY : MSG_GO, &got);
      if (got && !ready[peer[i]]) {
        ready[peer[i]] = 1;
        need--;
      }
    }
    if (c->dead) st = comm_dead_error(c);
  }
  for (int p = 1; st == ESMT_OK && c->rank == 0 && p < c->world; p++)
    if (comm_send_msg(c->ctl_fds[p], MSG_GO, 0, NULL, 0, deadline) != 0)
      st = comm_kill(c, p, "connection lost during rendezvous", 1, p);
  free(pf);
  free(peer);
  return st;
}

static esmt_status setup(esmt_tcp_comm *c, const esmt_comm_options *opt) {
  double deadline = esmt_now_s() + c->timeout_s;
  const char *rv = opt->rendezvous_file && opt->rendezvous_file[0] ? opt->rendezvous_file : NULL;
  char host0[ESMT_DIST_ADDR_MAX] = "";
  int port0 = opt->master_port, lfd = -1, lport = 0;
  if (opt->master_addr) snprintf(host0, sizeof host0, "%s", opt->master_addr);
  unsigned char *table = calloc((size_t)c->world, ENTRY_SIZE);
  unsigned char *ready = calloc((size_t)c->world, 1);
  if (!table || !ready) {
    free(table);
    free(ready);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "rendezvous: out of memory");
  }
  esmt_status st = comm_listen(c->rank == 0 ? port0 : 0, &lfd, &lport);
  if (st == ESMT_OK && c->rank == 0) {
    if (rv) {
      unlink(rv); /* a stale file from an earlier run */
      if (!host0[0] && gethostname(host0, sizeof host0 - 1) != 0) strcpy(host0, "localhost");
      st = comm_publish_file(rv, host0, lport, c->token);
    }
    if (st == ESMT_OK) st = gather_hellos(c, lfd, table, deadline);
  } else if (st == ESMT_OK) {
    /* With a file, re-read it on every attempt: it may be stale at first. */
    int fd = -1;
    char err[256] = "";
    while (fd < 0) {
      if (esmt_now_s() >= deadline) {
        st = rv && !comm_read_file(rv, c->token, host0, sizeof host0, &port0)
                 ? esmt_fail(ESMT_ERR_IO,
                             "rendezvous: file %s did not appear (with this job's token) "
                             "within %.1f s: is rank 0 running and the path shared?",
                             rv, c->timeout_s)
                 : esmt_fail(ESMT_ERR_IO,
                             "rendezvous: could not connect to rank 0 at %s:%d within %.1f s (%s)",
                             host0, port0, c->timeout_s, err);
        break;
      }
      if (!rv || comm_read_file(rv, c->token, host0, sizeof host0, &port0))
        fd = comm_connect_once(host0, port0, deadline, err, sizeof err);
      if (fd < 0) comm_sleep(0.05);
    }
    if (st == ESMT_OK) {
      c->ctl_fds[0] = fd;
      unsigned char hello[24] = {0};
      comm_put_u32(hello, (uint32_t)c->rank);
      comm_put_u32(hello + 4, (uint32_t)c->world);
      comm_put_u32(hello + 8, (uint32_t)lport);
      comm_put_u64(hello + 16, c->token);
      comm_hdr h;
      size_t cap = (size_t)c->world * ENTRY_SIZE;
      size_t rcap = cap > COMM_MSG_MAX ? cap : COMM_MSG_MAX;
      char *reply = malloc(rcap + 1);
      int r = -1;
      if (!reply) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "rendezvous: out of memory");
      else if (comm_send_msg(fd, MSG_HELLO, c->rank, hello, sizeof hello, deadline) == 0)
        r = comm_recv_msg(fd, &h, reply, rcap, deadline + 1.0); /* let rank 0 say why */
      if (st != ESMT_OK) {
      } else if (r == 0 && h.type == MSG_REJECT) {
        reply[h.len] = '\0';
        st = esmt_fail(ESMT_ERR_IO, "rank 0 refused this rank: %s", reply);
      } else if (r == 0 && h.type == MSG_TABLE && h.len == cap) {
        memcpy(table, reply, cap);
      } else {
        st = esmt_fail(ESMT_ERR_IO, "rendezvous: no rank table from rank 0 at %s:%d (%s)", host0,
                       port0,
                       r == 1 ? "connection closed" : r == 0 ? "unexpected message"
                              : strerror(errno));
      }
      free(reply);
    }
  }
  if (st == ESMT_OK) st = build_ring(c, lfd, table, host0, port0, deadline, ready);
  if (st == ESMT_OK) st = ready_round(c, deadline, ready);
  if (c->rank == 0 && rv) unlink(rv); /* everyone has read it (or failed) */
  if (lfd >= 0) close(lfd);
  free(table);
  free(ready);
  return st;
}

/* ---- public ---------------------------------------------------------------- */

static void close_all(esmt_tcp_comm *c) {
  if (c->next_fd >= 0) close(c->next_fd);
  if (c->prev_fd >= 0) close(c->prev_fd);
  for (int p = 0; c->ctl_fds && p < c->world; p++)
    if (c->ctl_fds[p] >= 0) close(c->ctl_fds[p]);
  free(c->ctl_fds);
  free(c->ctl_bye);
  free(c->scratch);
  free(c);
}

esmt_status esmt_tcp_comm_create(esmt_tcp_comm **out, const esmt_comm_options *opt) {
  ESMT_CHECK_ARG(out && opt, "esmt_comm_create", "NULL argument");
  *out = NULL;
  int rv = opt->rendezvous_file && opt->rendezvous_file[0];
  if (opt->world_size < 1 || opt->rank < 0 || opt->rank >= opt->world_size)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_comm_create: rank %d is not in 0..%d",
                     opt->rank, opt->world_size - 1);
  if (!(opt->timeout_s > 0 && opt->timeout_s <= 1e6)) /* poll() takes int milliseconds */
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                     "esmt_comm_create: timeout must be between 0 and 1e6 seconds");
  if (opt->master_port < 0 || opt->master_port > 65535)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_comm_create: port %d is not a port number",
                     opt->master_port);
  if (opt->world_size > 1 && !rv && (!opt->master_addr || !opt->master_addr[0] || !opt->master_port))
    return esmt_fail(ESMT_ERR_CONFIG,
                     "esmt_comm_create: %d ranks need rank 0's address and port (MASTER_ADDR, "
                     "MASTER_PORT) or a rendezvous file",
                     opt->world_size);
  if (rv && strlen(opt->rendezvous_file) >= ESMT_DIST_PATH_MAX)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "esmt_comm_create: rendezvous path too long");
  esmt_tcp_comm *c = calloc(1, sizeof *c);
  if (!c) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_comm_create: out of memory");
  c->rank = opt->rank;
  c->world = opt->world_size;
  c->timeout_s = opt->timeout_s;
  c->token = opt->job_token;
  c->next_fd = c->prev_fd = -1;
  c->step = -1;
  c->ctl_fds = malloc((size_t)c->world * sizeof *c->ctl_fds);
  c->ctl_bye = calloc((size_t)c->world, 1);
  c->scratch = c->world > 1 ? malloc(COMM_SCRATCH) : NULL;
  if (!c->ctl_fds || !c->ctl_bye || (c->world > 1 && !c->scratch)) {
    close_all(c);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_comm_create: out of memory");
  }
  for (int p = 0; p < c->world; p++) c->ctl_fds[p] = -1;
  if (c->world > 1) {
    c->op = "rendezvous";
    esmt_status st = setup(c, opt);
    if (st != ESMT_OK) {
      close_all(c);
      return st;
    }
  }
  c->op = NULL;
  *out = c;
  return ESMT_OK;
}

void esmt_tcp_comm_destroy(esmt_tcp_comm *c) {
  if (!c) return;
  if (!c->dead) { /* a clean exit: peers should not report it as a crash */
    double dl = esmt_now_s() + 1.0;
    for (int p = 0; p < c->world; p++)
      if (c->ctl_fds[p] >= 0) comm_send_msg(c->ctl_fds[p], MSG_GOODBYE, c->rank, NULL, 0, dl);
  }
  close_all(c);
}

int esmt_tcp_comm_rank(const esmt_tcp_comm *c) { return c ? c->rank : -1; }
int esmt_tcp_comm_world_size(const esmt_tcp_comm *c) { return c ? c->world : 0; }
