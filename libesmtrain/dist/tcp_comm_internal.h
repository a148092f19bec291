/* SPDX-License-Identifier: MIT */
/* Shared by tcp_comm.c (rendezvous protocol), tcp_comm_net.c (sockets,
 * rendezvous file), tcp_comm_io.c (transfers, control channel, failures)
 * and tcp_comm_coll.c (collectives).
 *
 * Topology: a ring (rank r sends to r+1, receives from r-1) for data, plus
 * the star of rendezvous sockets to rank 0 kept as a control channel.
 * Why a ring rather than a mesh: ring reduce-scatter/all-gather moves
 * 2(W-1)/W of the buffer per rank whatever W is, so one neighbour per
 * direction is all the collectives need, and W sockets beat W^2. Why keep
 * the star: it carries abort notices out of band, so the ring streams raw,
 * unframed data, and rank 0 notices a dead rank (EOF without goodbye) even
 * when it is not that rank's ring neighbour, then relays it to everyone. */
#ifndef ESMTRAIN_TCP_COMM_INTERNAL_H
#define ESMTRAIN_TCP_COMM_INTERNAL_H

#include "tcp_comm.h"

#define COMM_MAGIC 0x45534d43u /* "ESMC" */
#define COMM_SCRATCH (1u << 20)
#define COMM_MSG_MAX 900

/* Control-channel message types (16-byte header + payload). */
enum { MSG_HELLO = 1, MSG_TABLE, MSG_REJECT, MSG_RING, MSG_READY, MSG_GO, MSG_ABORT, MSG_GOODBYE };

typedef struct comm_hdr {
  uint32_t magic, type;
  int32_t origin;
  uint32_t len;
} comm_hdr;

struct esmt_tcp_comm {
  int rank, world;
  double timeout_s;
  uint64_t token;
  int next_fd, prev_fd; /* ring; -1 when world == 1 */
  int *ctl_fds;         /* [world]: rank 0 holds one per peer; others only [0] */
  unsigned char *ctl_bye; /* [world]: that peer said goodbye (a later EOF is clean) */
  unsigned char *scratch; /* COMM_SCRATCH bytes for receive-and-reduce */
  /* current / last operation */
  const char *op;
  uint64_t seq;
  size_t op_bytes;
  int op_state; /* 0 none, 1 in progress, 2 done, 3 failed */
  int in_header; /* exchanging the operation header (for timeout messages) */
  int64_t step;
  /* after a failure every call returns this */
  int dead;
  esmt_status dead_status;
  char dead_msg[1024];
};

/* ---- tcp_comm_net.c ---- */
ESMT_HIDDEN void comm_sleep(double s);
/* CLOEXEC, non-blocking, TCP_NODELAY. */
ESMT_HIDDEN void comm_prep_socket(int fd);
ESMT_HIDDEN void comm_put_u32(unsigned char *p, uint32_t v);
ESMT_HIDDEN uint32_t comm_get_u32(const unsigned char *p);
ESMT_HIDDEN void comm_put_u64(unsigned char *p, uint64_t v);
ESMT_HIDDEN uint64_t comm_get_u64(const unsigned char *p);
/* IPv4 listener on `port` (0 = ephemeral) on all interfaces; EADDRINUSE
 * is reported naming the port and MASTER_PORT. */
ESMT_HIDDEN esmt_status comm_listen(int port, int *fd_out, int *port_out);
/* One connection attempt; the fd, or -1 with a reason in err. */
ESMT_HIDDEN int comm_connect_once(const char *host, int port, double deadline, char *err,
                                  size_t cap);
/* Connect, retrying until the deadline (the listener may not be up yet). */
ESMT_HIDDEN esmt_status comm_connect_retry(const char *what, const char *host, int port,
                                           double deadline, double timeout_s, int *fd_out);
/* Rank 0 publishes "host port token" atomically (temp file + rename). */
ESMT_HIDDEN esmt_status comm_publish_file(const char *path, const char *host, int port,
                                          uint64_t token);
/* 1 when the file holds this job's address (same token). */
ESMT_HIDDEN int comm_read_file(const char *path, uint64_t token, char *host, size_t cap,
                               int *port);

/* ---- tcp_comm_io.c ---- */
ESMT_HIDDEN void comm_put_hdr(unsigned char out[16], uint32_t type, int32_t origin, uint32_t len);
ESMT_HIDDEN comm_hdr comm_get_hdr(const unsigned char in[16]);
/* Blocking-with-deadline I/O on non-blocking sockets; 0 ok, 1 EOF, -1 error
 * (errno; ETIMEDOUT when the deadline passed). */
ESMT_HIDDEN int comm_send_all(int fd, const void *buf, size_t n, double deadline);
ESMT_HIDDEN int comm_recv_all(int fd, void *buf, size_t n, double deadline);
/* One control message; payload up to cap bytes (longer is an error). */
ESMT_HIDDEN int comm_send_msg(int fd, uint32_t type, int32_t origin, const void *payload,
                              uint32_t len, double deadline);
ESMT_HIDDEN int comm_recv_msg(int fd, comm_hdr *h, void *payload, size_t cap, double deadline);

/* "allreduce #37 (step 12): " for the current operation. */
ESMT_HIDDEN void comm_op_prefix(const esmt_tcp_comm *c, char *buf, size_t cap);
/* Mark the communicator dead. origin == own rank: `reason` is this rank's
 * own failure; else "rank <origin> failed: <reason>". With `forward`, the
 * failure is sent on the control channel (rank 0: to all but `skip`). */
ESMT_HIDDEN esmt_status comm_kill(esmt_tcp_comm *c, int origin, const char *reason, int forward,
                                  int skip);
/* The dead communicator's error, set again as the thread's last error. */
ESMT_HIDDEN esmt_status comm_dead_error(const esmt_tcp_comm *c);
/* Read and act on one control message from peer p (abort, goodbye, EOF). */
ESMT_HIDDEN esmt_status comm_handle_ctl(esmt_tcp_comm *c, int p, uint32_t expect_type, int *got);
/* Wait up to `seconds` for a control message that explains a failure. */
ESMT_HIDDEN void comm_wait_explanation(esmt_tcp_comm *c, double seconds);
/* Send slen bytes to the next rank while receiving rlen bytes from the
 * previous one; with dtype != 0 the received elements are added into rbuf.
 * Fails on a peer's abort, a lost connection, or timeout_s without progress. */
ESMT_HIDDEN esmt_status comm_xfer(esmt_tcp_comm *c, const void *sbuf, size_t slen, void *rbuf,
                                  size_t rlen, int dtype);

#endif
