/* SPDX-License-Identifier: MIT */
/* Transfers, the control channel and failure handling of the TCP
 * communicator (see tcp_comm_internal.h for the topology). All sockets are
 * non-blocking; every wait is a poll() with a deadline. */
#define _POSIX_C_SOURCE 200809L
#include "tcp_comm_internal.h"

#include "esmtrain/comm_ring.h"
#include "esmtrain/comm_text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int ms_until(double deadline) {
  double left = deadline - esmt_now_s();
  if (left <= 0) return 0;
  return left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
}

/* 1 ready, 0 deadline passed, -1 error. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    struct pollfd pf = {fd, events, 0};
    int ms = ms_until(deadline);
    if (ms == 0) return 0;
    int r = poll(&pf, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r > 0) return 1;
  }
}

int comm_send_all(int fd, const void *buf, size_t n, double deadline) {
  const unsigned char *p = buf;
  while (n > 0) {
    ssize_t s = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (s > 0) {
      p += s;
      n -= (size_t)s;
      continue;
    }
    if (s < 0 && errno == EINTR) continue;
    if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    int w = wait_fd(fd, POLLOUT, deadline);
    if (w == 0) errno = ETIMEDOUT;
    if (w <= 0) return -1;
  }
  return 0;
}

int comm_recv_all(int fd, void *buf, size_t n, double deadline) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0) return 1;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    int w = wait_fd(fd, POLLIN, deadline);
    if (w == 0) errno = ETIMEDOUT;
    if (w <= 0) return -1;
  }
  return 0;
}

void comm_put_hdr(unsigned char out[16], uint32_t type, int32_t origin, uint32_t len) {
  uint32_t v[4] = {htonl(COMM_MAGIC), htonl(type), htonl((uint32_t)origin), htonl(len)};
  memcpy(out, v, 16);
}

comm_hdr comm_get_hdr(const unsigned char in[16]) {
  uint32_t v[4];
  memcpy(v, in, 16);
  comm_hdr h = {ntohl(v[0]), ntohl(v[1]), (int32_t)ntohl(v[2]), ntohl(v[3])};
  return h;
}

int comm_send_msg(int fd, uint32_t type, int32_t origin, const void *payload, uint32_t len,
                  double deadline) {
  unsigned char hdr[16];
  comm_put_hdr(hdr, type, origin, len);
  if (comm_send_all(fd, hdr, 16, deadline) != 0) return -1;
  return len ? comm_send_all(fd, payload, len, deadline) : 0;
}

int comm_recv_msg(int fd, comm_hdr *h, void *payload, size_t cap, double deadline) {
  unsigned char raw[16];
  int r = comm_recv_all(fd, raw, 16, deadline);
  if (r != 0) return r;
  *h = comm_get_hdr(raw);
  if (h->magic != COMM_MAGIC || h->len > cap) {
    errno = EPROTO;
    return -1;
  }
  return h->len ? comm_recv_all(fd, payload, h->len, deadline) : 0;
}

void comm_op_prefix(const esmt_tcp_comm *c, char *buf, size_t cap) {
  esmt_comm_op_prefix(buf, cap, c->op, c->seq, c->step);
}

esmt_status comm_dead_error(const esmt_tcp_comm *c) {
  return esmt_fail(c->dead_status, "%s", c->dead_msg);
}

esmt_status comm_kill(esmt_tcp_comm *c, int origin, const char *reason, int forward, int skip) {
  if (c->dead) return comm_dead_error(c);
  char pre[160];
  comm_op_prefix(c, pre, sizeof pre);
  if (origin == c->rank) snprintf(c->dead_msg, sizeof c->dead_msg, "%s%s", pre, reason);
  else snprintf(c->dead_msg, sizeof c->dead_msg, "%srank %d failed: %s", pre, origin, reason);
  c->dead = 1;
  c->dead_status = ESMT_ERR_IO;
  if (c->op_state == 1) c->op_state = 3;
  if (forward) {
    /* Best effort and brief: a peer that cannot take 1 KiB within a second
     * will learn from its own timeout or from the closed socket. */
    size_t n = strlen(reason);
    if (n > COMM_MSG_MAX) n = COMM_MSG_MAX;
    double dl = esmt_now_s() + 1.0;
    for (int p = 0; p < c->world; p++) {
      if (p == skip || p == c->rank || c->ctl_fds[p] < 0) continue;
      if (c->rank != 0 && p != 0) continue;
      comm_send_msg(c->ctl_fds[p], MSG_ABORT, origin, reason, (uint32_t)n, dl);
    }
  }
  return comm_dead_error(c);
}

esmt_status comm_handle_ctl(esmt_tcp_comm *c, int p, uint32_t expect_type, int *got) {
  comm_hdr h;
  char msg[COMM_MSG_MAX + 1];
  /* Messages are small and sent whole, so a short wait for the rest of
   * one is enough. */
  int r = comm_recv_msg(c->ctl_fds[p], &h, msg, COMM_MSG_MAX, esmt_now_s() + 5.0);
  if (r == 0 && expect_type && h.type == expect_type) {
    if (got) *got = 1;
    return ESMT_OK;
  }
  if (r == 0 && h.type == MSG_GOODBYE) {
    c->ctl_bye[p] = 1;
    close(c->ctl_fds[p]);
    c->ctl_fds[p] = -1;
    return ESMT_OK;
  }
  if (r == 0 && h.type == MSG_ABORT) {
    msg[h.len] = '\0';
    int origin = h.origin >= 0 && h.origin < c->world ? h.origin : p;
    /* Rank 0 relays it to everyone but the sender. */
    return comm_kill(c, origin, msg, c->rank == 0, p);
  }
  if (r == 0) {
    char why[96];
    snprintf(why, sizeof why, "sent an unexpected control message (type %u)", h.type);
    return comm_kill(c, p, why, c->rank == 0, p);
  }
  int err = errno;
  close(c->ctl_fds[p]);
  c->ctl_fds[p] = -1;
  if (c->ctl_bye[p]) return ESMT_OK;
  char why[200];
  if (r == 1) snprintf(why, sizeof why, "connection lost (the process exited or was killed)");
  else snprintf(why, sizeof why, "control connection failed: %s", strerror(err));
  return comm_kill(c, p, why, c->rank == 0, p);
}

/* Control fds to watch, appended to pf; returns the count; peers[] maps back. */
static int ctl_pollfds(const esmt_tcp_comm *c, struct pollfd *pf, int *peers) {
  int n = 0;
  for (int p = 0; p < c->world; p++) {
    if (c->ctl_fds[p] < 0) continue;
    pf[n].fd = c->ctl_fds[p];
    pf[n].events = POLLIN;
    pf[n].revents = 0;
    peers[n++] = p;
  }
  return n;
}

void comm_wait_explanation(esmt_tcp_comm *c, double seconds) {
  double dl = esmt_now_s() + seconds;
  struct pollfd *pf = malloc((size_t)c->world * sizeof *pf);
  int *peers = malloc((size_t)c->world * sizeof *peers);
  while (pf && peers && !c->dead) {
    int n = ctl_pollfds(c, pf, peers);
    int ms = ms_until(dl);
    if (n == 0 || ms == 0) break;
    int r = poll(pf, (nfds_t)n, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    for (int i = 0; i < n && !c->dead; i++)
      if (pf[i].revents) comm_handle_ctl(c, peers[i], 0, NULL);
  }
  free(pf);
  free(peers);
}

esmt_status esmt_tcp_comm_check_peers(esmt_tcp_comm *c) {
  if (c->dead) return comm_dead_error(c);
  struct pollfd *pf = malloc((size_t)c->world * sizeof *pf);
  int *peers = malloc((size_t)c->world * sizeof *peers);
  if (pf && peers) {
    int n = ctl_pollfds(c, pf, peers);
    if (n > 0 && poll(pf, (nfds_t)n, 0) > 0)
      for (int i = 0; i < n && !c->dead; i++)
        if (pf[i].revents) comm_handle_ctl(c, peers[i], 0, NULL);
  }
  free(pf);
  free(peers);
  return c->dead ? comm_dead_error(c) : ESMT_OK;
}

/* The connection to `peer` broke: give the control channel a moment to say
 * why (an abort travels there), else blame the peer. */
static esmt_status peer_lost(esmt_tcp_comm *c, int peer, int err, const char *doing) {
  static const char left[] =
      "closed its communicator while the other ranks were still in this collective (did it "
      "skip a call?)";
  if (c->ctl_bye[peer]) return comm_kill(c, peer, left, 1, -1); /* rank 0 saw its goodbye */
  double grace = c->timeout_s < 2.0 ? c->timeout_s : 2.0;
  comm_wait_explanation(c, grace);
  if (c->dead) return comm_dead_error(c);
  if (c->ctl_bye[peer]) return comm_kill(c, peer, left, 1, -1);
  char why[300];
  snprintf(why, sizeof why,
           "connection lost while %s (%s; the process exited, was killed or left the job; "
           "seen by rank %d)",
           doing, err ? strerror(err) : "closed by peer", c->rank);
  return comm_kill(c, peer, why, 1, -1);
}

/* Received elements land in scratch and are added into rbuf as soon as
 * whole elements are there; rbuf must be element-aligned (the collective
 * checks). */
esmt_status comm_xfer(esmt_tcp_comm *c, const void *sbuf, size_t slen, void *rbuf, size_t rlen,
                      int dtype) {
  if (c->dead) return comm_dead_error(c);
  const unsigned char *sp = sbuf;
  unsigned char *rp = rbuf;
  size_t esize = dtype == ESMT_COMM_F32 ? 4 : dtype ? 8 : 1;
  size_t sdone = 0, rdone = 0, pend = 0; /* pend: received bytes in scratch */
  double deadline = esmt_now_s() + c->timeout_s;
  struct pollfd pf[64];
  int peers[64];
  struct pollfd *pfs = pf;
  int *pps = peers;
  if (c->world + 2 > 64) {
    pfs = malloc((size_t)(c->world + 2) * sizeof *pfs);
    pps = malloc((size_t)(c->world + 2) * sizeof *pps);
    if (!pfs || !pps) {
      free(pfs == pf ? NULL : pfs);
      free(pps == peers ? NULL : pps);
      return comm_kill(c, c->rank, "out of memory for poll set", 1, -1);
    }
  }
  esmt_status st = ESMT_OK;
  while (st == ESMT_OK && (sdone < slen || rdone < rlen)) {
    int n = 0, si = -1, ri = -1;
    if (sdone < slen) {
      pfs[n] = (struct pollfd){c->next_fd, POLLOUT, 0};
      si = n++;
    }
    if (rdone < rlen) {
      pfs[n] = (struct pollfd){c->prev_fd, POLLIN, 0};
      ri = n++;
    }
    int nc = ctl_pollfds(c, pfs + n, pps);
    int ms = ms_until(deadline);
    if (ms == 0) {
      char why[300];
      int peer = rdone < rlen ? (c->rank + c->world - 1) % c->world : (c->rank + 1) % c->world;
      if (c->in_header) /* the peer has not entered this collective */
        snprintf(why, sizeof why, "timed out after %.1f s waiting for rank %d to join", c->timeout_s,
                 peer);
      else
        snprintf(why, sizeof why,
                 "timed out after %.1f s waiting for rank %d (%s %zu of %zu bytes)", c->timeout_s,
                 peer, rdone < rlen ? "received" : "sent", rdone < rlen ? rdone + pend : sdone,
                 rdone < rlen ? rlen : slen);
      st = comm_kill(c, c->rank, why, 1, -1);
      break;
    }
    int r = poll(pfs, (nfds_t)(n + nc), ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      char why[160];
      snprintf(why, sizeof why, "poll failed: %s", strerror(errno));
      st = comm_kill(c, c->rank, why, 1, -1);
      break;
    }
    if (r == 0) continue;
    for (int i = 0; i < nc && st == ESMT_OK; i++)
      if (pfs[n + i].revents) st = comm_handle_ctl(c, pps[i], 0, NULL);
    if (st != ESMT_OK || c->dead) {
      st = c->dead ? comm_dead_error(c) : st;
      break;
    }
    int progress = 0;
    if (si >= 0 && pfs[si].revents) {
      ssize_t s = send(c->next_fd, sp + sdone, slen - sdone, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (s > 0) {
        sdone += (size_t)s;
        progress = 1;
      } else if (s < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
        st = peer_lost(c, (c->rank + 1) % c->world, errno, "sending to it");
        break;
      }
    }
    if (ri >= 0 && pfs[ri].revents) {
      ssize_t got;
      if (dtype) {
        size_t want = rlen - rdone - pend;
        if (want > COMM_SCRATCH - pend) want = COMM_SCRATCH - pend;
        got = recv(c->prev_fd, c->scratch + pend, want, MSG_DONTWAIT);
        if (got > 0) {
          pend += (size_t)got;
          size_t k = pend / esize;
          esmt_comm_reduce_into(rp + rdone, c->scratch, k, dtype);
          rdone += k * esize;
          pend -= k * esize;
          if (pend) memmove(c->scratch, c->scratch + k * esize, pend);
        }
      } else {
        got = recv(c->prev_fd, rp + rdone, rlen - rdone, MSG_DONTWAIT);
        if (got > 0) rdone += (size_t)got;
      }
      if (got > 0) progress = 1;
      else if (got == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        st = peer_lost(c, (c->rank + c->world - 1) % c->world, got == 0 ? 0 : errno,
                       "receiving from it");
        break;
      }
    }
    if (progress) deadline = esmt_now_s() + c->timeout_s;
  }
  if (pfs != pf) free(pfs);
  if (pps != peers) free(pps);
  return st;
}
