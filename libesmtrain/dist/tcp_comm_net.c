/* SPDX-License-Identifier: MIT */
/* Socket and rendezvous-file helpers of the TCP communicator. */
#define _POSIX_C_SOURCE 200809L
#include "tcp_comm_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void comm_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void comm_prep_socket(int fd) {
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void comm_put_u32(unsigned char *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
uint32_t comm_get_u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return ntohl(v);
}
void comm_put_u64(unsigned char *p, uint64_t v) {
  comm_put_u32(p, (uint32_t)(v >> 32));
  comm_put_u32(p + 4, (uint32_t)v);
}
uint64_t comm_get_u64(const unsigned char *p) {
  return ((uint64_t)comm_get_u32(p) << 32) | comm_get_u32(p + 4);
}

/* IPv4 listener on `port` (0 = ephemeral) on all interfaces. */
esmt_status comm_listen(int port, int *fd_out, int *port_out) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "socket() failed: %s", strerror(errno));
  int one = 1;
  /* Lets a restarted job reuse a port whose old connections sit in
   * TIME_WAIT; a port with a live listener still fails (EADDRINUSE). */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons((uint16_t)port);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
    int err = errno;
    close(fd);
    if (err == EADDRINUSE)
      return esmt_fail(ESMT_ERR_IO,
                       "rank 0 cannot listen on port %d: address already in use (another job "
                       "or process holds it; choose a free port with MASTER_PORT)",
                       port);
    return esmt_fail(ESMT_ERR_IO, "cannot listen on port %d: %s", port, strerror(err));
  }
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  *port_out = ntohs(a.sin_port);
  comm_prep_socket(fd);
  *fd_out = fd;
  return ESMT_OK;
}

/* One connection attempt, waiting at most until `deadline`. */
int comm_connect_once(const char *host, int port, double deadline, char *err, size_t cap) {
  char ps[8];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(host, ps, &hints, &res);
  if (g != 0) {
    snprintf(err, cap, "cannot resolve '%s': %s", host, gai_strerror(g));
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    snprintf(err, cap, "socket() failed: %s", strerror(errno));
    freeaddrinfo(res);
    return -1;
  }
  comm_prep_socket(fd);
  int r = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (r != 0 && errno == EINPROGRESS) {
    struct pollfd pf = {fd, POLLOUT, 0};
    double left = deadline - esmt_now_s();
    int ms = left <= 0 ? 0 : left > 2.0 ? 2000 : (int)(left * 1000) + 1;
    while ((r = poll(&pf, 1, ms)) < 0 && errno == EINTR) {
    }
    int soerr = ETIMEDOUT;
    socklen_t sl = sizeof soerr;
    if (r == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    r = soerr ? -1 : 0;
    errno = soerr;
  }
  if (r != 0) {
    snprintf(err, cap, "%s", strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* Connect, retrying until the deadline (the listener may not be up yet). */
esmt_status comm_connect_retry(const char *what, const char *host, int port, double deadline,
                                 double timeout_s, int *fd_out) {
  char err[256] = "no attempt";
  double pause = 0.02;
  while (esmt_now_s() < deadline) {
    int fd = comm_connect_once(host, port, deadline, err, sizeof err);
    if (fd >= 0) {
      *fd_out = fd;
      return ESMT_OK;
    }
    comm_sleep(pause);
    if (pause < 0.25) pause *= 2;
  }
  return esmt_fail(ESMT_ERR_IO, "could not connect to %s at %s:%d within %.1f s (%s)",
                   what, host, port, timeout_s, err);
}

/* ---- rendezvous file ---------------------------------------------------- */

esmt_status comm_publish_file(const char *path, const char *host, int port, uint64_t token) {
  char tmp[ESMT_DIST_PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return esmt_fail(ESMT_ERR_IO, "rendezvous file %s: cannot create: %s", tmp, strerror(errno));
  int ok = fprintf(f, "esmtrain-rendezvous 1 %s %d %016llx\n", host, port,
                   (unsigned long long)token) > 0;
  ok = (fclose(f) == 0) && ok;
  /* rename() makes the file appear complete or not at all. */
  if (!ok || rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return esmt_fail(ESMT_ERR_IO, "rendezvous file %s: cannot write: %s", path, strerror(err));
  }
  return ESMT_OK;
}

/* 1 when the file holds this job's address. A file from another job or an
 * older run (different token) is ignored: rank 0 will replace it. */
int comm_read_file(const char *path, uint64_t token, char *host, size_t cap, int *port) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[ESMT_DIST_ADDR_MAX + 64];
  char h[ESMT_DIST_ADDR_MAX];
  unsigned long long t;
  int p, ok = 0;
  if (fgets(line, sizeof line, f) &&
      sscanf(line, "esmtrain-rendezvous 1 %255s %d %llx", h, &p, &t) == 3 && t == token &&
      p > 0 && p < 65536 && strlen(h) < cap) {
    strcpy(host, h);
    *port = p;
    ok = 1;
  }
  fclose(f);
  return ok;
}
