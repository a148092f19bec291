/* SPDX-License-Identifier: MIT */
/* See dist_env.h. Each launcher's variables are read as a group: the first
 * launcher whose rank variable is present wins, and errors name the exact
 * variable that was read. */
#define _POSIX_C_SOURCE 200809L
#include "dist_env.h"

#include "esmtrain/esmtrain.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTLIST_MAX_HOSTS 1000000

/* ---- Slurm host lists --------------------------------------------------- */

typedef struct {
  size_t index, count;
  char *out;
  size_t cap;
  const char *list;
} hl_ctx;

static esmt_status hl_bad(const hl_ctx *cx, const char *why) {
  return esmt_fail(ESMT_ERR_FORMAT, "host list '%s': %s", cx->list, why);
}

static esmt_status hl_emit(hl_ctx *cx, const char *host) {
  if (cx->count == cx->index) {
    if (strlen(host) >= cx->cap) return hl_bad(cx, "host name too long");
    strcpy(cx->out, host);
  }
  if (++cx->count > HOSTLIST_MAX_HOSTS) return hl_bad(cx, "more than a million hosts");
  return ESMT_OK;
}

/* Expand s[0..n) (one top-level item) appended to buf[0..used). Bracket
 * groups multiply: "r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2. */
static esmt_status hl_expand(hl_ctx *cx, const char *s, size_t n, char *buf, size_t used) {
  const char *lb = memchr(s, '[', n);
  const char *stray = memchr(s, ']', lb ? (size_t)(lb - s) : n);
  if (stray) return hl_bad(cx, "']' without '['");
  size_t pre = lb ? (size_t)(lb - s) : n;
  if (used + pre >= ESMT_DIST_ADDR_MAX) return hl_bad(cx, "host name too long");
  memcpy(buf + used, s, pre);
  used += pre;
  if (!lb) {
    buf[used] = '\0';
    return hl_emit(cx, buf);
  }
  const char *rb = memchr(lb, ']', n - pre);
  if (!rb) return hl_bad(cx, "'[' without ']'");
  if (memchr(lb + 1, '[', (size_t)(rb - lb - 1))) return hl_bad(cx, "nested '['");
  const char *rest = rb + 1;
  size_t rest_n = n - (size_t)(rest - s);
  const char *p = lb + 1;
  if (p == rb) return hl_bad(cx, "empty range '[]'");
  while (p < rb) {
    const char *comma = memchr(p, ',', (size_t)(rb - p));
    const char *end = comma ? comma : rb;
    const char *dash = memchr(p, '-', (size_t)(end - p));
    const char *lo_end = dash ? dash : end;
    size_t width = (size_t)(lo_end - p);
    if (width == 0 || width > 9 || (dash && (end - dash - 1 == 0 || end - dash - 1 > 9)))
      return hl_bad(cx, "range bound is not a number of 1-9 digits");
    unsigned long lo = 0, hi = 0;
    for (const char *q = p; q < lo_end; q++) {
      if (*q < '0' || *q > '9') return hl_bad(cx, "range bound is not a number");
      lo = lo * 10 + (unsigned long)(*q - '0');
    }
    hi = lo;
    if (dash) {
      hi = 0;
      for (const char *q = dash + 1; q < end; q++) {
        if (*q < '0' || *q > '9') return hl_bad(cx, "range bound is not a number");
        hi = hi * 10 + (unsigned long)(*q - '0');
      }
      if (hi < lo) return hl_bad(cx, "range goes downwards");
    }
    for (unsigned long v = lo; v <= hi; v++) {
      char num[16];
      int k = snprintf(num, sizeof num, "%0*lu", (int)width, v);
      if (used + (size_t)k >= ESMT_DIST_ADDR_MAX) return hl_bad(cx, "host name too long");
      memcpy(buf + used, num, (size_t)k);
      esmt_status st = hl_expand(cx, rest, rest_n, buf, used + (size_t)k);
      if (st != ESMT_OK) return st;
    }
    p = comma ? comma + 1 : rb;
    if (comma && p == rb) return hl_bad(cx, "empty range after ','");
  }
  return ESMT_OK;
}

esmt_status esmt_hostlist_nth(const char *list, size_t index, char *out, size_t cap,
                              size_t *count) {
  ESMT_CHECK_ARG(list && out && cap > 0, "esmt_hostlist_nth", "NULL argument");
  hl_ctx cx = {index, 0, out, cap, list};
  out[0] = '\0';
  char buf[ESMT_DIST_ADDR_MAX];
  const char *p = list;
  if (!*p) return hl_bad(&cx, "empty");
  for (;;) {
    /* Split at commas outside brackets. */
    const char *q = p;
    int depth = 0;
    while (*q && (depth > 0 || *q != ',')) {
      if (*q == '[') depth++;
      if (*q == ']') depth--;
      q++;
    }
    if (q == p) return hl_bad(&cx, "empty host name");
    esmt_status st = hl_expand(&cx, p, (size_t)(q - p), buf, 0);
    if (st != ESMT_OK) return st;
    if (!*q) break;
    p = q + 1;
  }
  if (count) *count = cx.count;
  return ESMT_OK;
}

esmt_status esmt_slurm_tasks_on_node(const char *spec, int node, int *tasks) {
  ESMT_CHECK_ARG(spec && tasks && node >= 0, "esmt_slurm_tasks_on_node", "bad argument");
  const char *p = spec;
  long seen = 0;
  while (*p) {
    char *end;
    errno = 0;
    long n = strtol(p, &end, 10);
    if (end == p || errno || n < 1 || n > INT_MAX) goto bad;
    long reps = 1;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x') goto bad;
      errno = 0;
      reps = strtol(p + 2, &end, 10);
      if (end == p + 2 || errno || reps < 1 || *end != ')') goto bad;
      p = end + 1;
    }
    if (node < seen + reps) {
      *tasks = (int)n;
      return ESMT_OK;
    }
    seen += reps;
    if (*p == ',') p++;
    else if (*p) goto bad;
  }
  return esmt_fail(ESMT_ERR_CONFIG, "SLURM_TASKS_PER_NODE '%s' lists %ld nodes but this is node %d",
                   spec, seen, node);
bad:
  return esmt_fail(ESMT_ERR_CONFIG,
                   "SLURM_TASKS_PER_NODE '%s' is not a list like '2(x3),1'", spec);
}

/* ---- variables ---------------------------------------------------------- */

typedef struct {
  esmt_getenv_fn get;
  void *user;
} envsrc;

static const char *sys_getenv(const char *name, void *user) {
  (void)user;
  return getenv(name);
}

/* Unset and empty are the same: launchers sometimes export "". */
static const char *ev(const envsrc *e, const char *name) {
  const char *v = e->get(name, e->user);
  return (v && *v) ? v : NULL;
}

static esmt_status parse_int(const char *name, const char *v, long min, long max, int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end || errno == ERANGE)
    return esmt_fail(ESMT_ERR_CONFIG, "%s '%s' is not an integer", name, v);
  if (x < min || x > max)
    return esmt_fail(ESMT_ERR_CONFIG, "%s=%ld is out of range (%ld to %ld)", name, x, min, max);
  *out = (int)x;
  return ESMT_OK;
}

static esmt_status parse_port(const char *name, const char *v, int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end || errno || x < 1 || x > 65535)
    return esmt_fail(ESMT_ERR_CONFIG, "%s '%s' is not a port number (1-65535)", name, v);
  *out = (int)x;
  return ESMT_OK;
}

/* Optional integer variable. */
static esmt_status opt_int(const envsrc *e, const char *name, long min, long max, int *out,
                           int *present) {
  const char *v = ev(e, name);
  *present = v != NULL;
  return v ? parse_int(name, v, min, max, out) : ESMT_OK;
}

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (h ^ 0xff) * 1099511628211ull; /* separator */
}

/* Names of one launcher's variables. */
typedef struct {
  const char *source, *rank, *world, *local_rank, *local_world, *addr, *port;
} layout_vars;

static const layout_vars k_esmtrain = {"esmtrain", "ESMTRAIN_RANK", "ESMTRAIN_WORLD_SIZE",
                                       "ESMTRAIN_LOCAL_RANK", "ESMTRAIN_LOCAL_WORLD_SIZE",
                                       "ESMTRAIN_MASTER_ADDR", "ESMTRAIN_MASTER_PORT"};
static const layout_vars k_torchrun = {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
static const layout_vars k_slurm = {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                    "SLURM_NTASKS_PER_NODE", "MASTER_ADDR", "MASTER_PORT"};
static const layout_vars k_openmpi = {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                      "MASTER_ADDR", "MASTER_PORT"};
/* MPICH's Hydra, Intel MPI, MVAPICH (PMI-1/2 launchers) */
static const layout_vars k_pmi = {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                                  "MPI_LOCALNRANKS", "MASTER_ADDR", "MASTER_PORT"};

static esmt_status read_layout(const envsrc *e, const layout_vars *lv, esmt_dist_env *d) {
  const char *r = ev(e, lv->rank), *w = ev(e, lv->world);
  const char *world_name = lv->world;
  if (lv == &k_slurm && ev(e, "SLURM_STEP_NUM_TASKS")) {
    /* Inside srun the step's task count is the world; SLURM_NTASKS is the job's. */
    w = ev(e, "SLURM_STEP_NUM_TASKS");
    world_name = "SLURM_STEP_NUM_TASKS";
  }
  if (!r) return esmt_fail(ESMT_ERR_CONFIG, "%s is set but %s is not", world_name, lv->rank);
  if (!w) return esmt_fail(ESMT_ERR_CONFIG, "%s is set but %s is not", lv->rank, world_name);
  esmt_status st;
  if ((st = parse_int(world_name, w, 1, 1 << 20, &d->world_size)) != ESMT_OK) return st;
  if ((st = parse_int(lv->rank, r, 0, INT_MAX, &d->rank)) != ESMT_OK) return st;
  if (d->rank >= d->world_size)
    return esmt_fail(ESMT_ERR_CONFIG, "%s=%d but %s=%d (ranks run from 0 to %d)", lv->rank,
                     d->rank, world_name, d->world_size, d->world_size - 1);
  int have_lr, have_lw;
  if ((st = opt_int(e, lv->local_rank, 0, INT_MAX, &d->local_rank, &have_lr)) != ESMT_OK)
    return st;
  const char *lw_name = lv->local_world;
  if ((st = opt_int(e, lw_name, 1, 1 << 20, &d->local_world_size, &have_lw)) != ESMT_OK)
    return st;
  if (lv == &k_slurm && !have_lw && ev(e, "SLURM_TASKS_PER_NODE")) {
    int node = 0, have_node;
    if ((st = opt_int(e, "SLURM_NODEID", 0, INT_MAX, &node, &have_node)) != ESMT_OK) return st;
    lw_name = "SLURM_TASKS_PER_NODE";
    if ((st = esmt_slurm_tasks_on_node(ev(e, lw_name), node, &d->local_world_size)) != ESMT_OK)
      return st;
    have_lw = 1;
  }
  /* Without local variables assume one node: local = global. */
  if (!have_lr) d->local_rank = d->rank;
  if (!have_lw) d->local_world_size = d->world_size;
  if (d->local_rank >= d->local_world_size)
    return esmt_fail(ESMT_ERR_CONFIG, "%s=%d but %s=%d", have_lr ? lv->local_rank : lv->rank,
                     d->local_rank, have_lw ? lw_name : world_name, d->local_world_size);
  if (d->local_world_size > d->world_size)
    return esmt_fail(ESMT_ERR_CONFIG, "%s=%d is larger than %s=%d", lw_name,
                     d->local_world_size, world_name, d->world_size);
  return ESMT_OK;
}

/* Master address and port; `addr_name`/`port_name` are what was read. */
static esmt_status read_master(const envsrc *e, const layout_vars *lv, esmt_dist_env *d) {
  const char *addr_name = lv->addr, *port_name = lv->port;
  const char *a = ev(e, lv->addr), *p = ev(e, lv->port);
  if (lv == &k_esmtrain) { /* ESMTRAIN_MASTER_* first, then the torchrun names */
    if (!a) a = ev(e, addr_name = "MASTER_ADDR");
    if (!p) p = ev(e, port_name = "MASTER_PORT");
  }
  esmt_status st;
  if (p && (st = parse_port(port_name, p, &d->master_port)) != ESMT_OK) return st;
  if (a) {
    if (strlen(a) >= sizeof d->master_addr)
      return esmt_fail(ESMT_ERR_CONFIG, "%s is longer than %d characters", addr_name,
                       ESMT_DIST_ADDR_MAX - 1);
    strcpy(d->master_addr, a);
  }
  if (lv == &k_slurm && !a) {
    const char *names[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    for (int i = 0; i < 3 && !d->master_addr[0]; i++) {
      const char *list = ev(e, names[i]);
      if (!list) continue;
      size_t n;
      if ((st = esmt_hostlist_nth(list, 0, d->master_addr, sizeof d->master_addr, &n)) != ESMT_OK)
        return esmt_fail_prefix(st, "%s: ", names[i]);
      addr_name = names[i];
    }
  }
  if (lv == &k_slurm && !p && d->world_size > 1 && !d->rendezvous_file[0]) {
    const char *job = ev(e, "SLURM_JOB_ID");
    int id;
    if (!job)
      return esmt_fail(ESMT_ERR_CONFIG,
                       "MASTER_PORT is not set and SLURM_JOB_ID is missing to derive one");
    if ((st = parse_int("SLURM_JOB_ID", job, 0, INT_MAX, &id)) != ESMT_OK) return st;
    d->master_port = 20000 + id % 20000; /* same on every task, differs between jobs */
  }
  /* Under an MPI launcher MPI finds the ranks itself; TCP's missing
   * address is reported by esmt_comm_create_from_env if TCP is chosen. */
  const int mpi_may_carry = (d->mpi_launched && d->comm != 1) || d->comm == 2; /* not TCP */
  if (d->world_size > 1 && !d->rendezvous_file[0] && !mpi_may_carry) {
    if (!d->master_addr[0])
      return esmt_fail(ESMT_ERR_CONFIG,
                       "%s is not set: %s=%d needs the address of rank 0 (or set "
                       "ESMTRAIN_RENDEZVOUS_FILE to a path on a shared file system)",
                       addr_name, lv->world, d->world_size);
    if (!d->master_port)
      return esmt_fail(ESMT_ERR_CONFIG, "%s is not set: %s=%d needs rank 0's port", port_name,
                       lv->world, d->world_size);
  }
  return ESMT_OK;
}

esmt_status esmt_dist_env_detect_with(esmt_dist_env *out, esmt_getenv_fn get, void *user) {
  ESMT_CHECK_ARG(out, "esmt_dist_env_detect", "NULL output");
  envsrc e = {get ? get : sys_getenv, user};
  esmt_dist_env d;
  memset(&d, 0, sizeof d);
  d.world_size = d.local_world_size = 1;
  d.source = "single";
  d.timeout_s = 300;
  esmt_status st;
  const char *t = ev(&e, "ESMTRAIN_COMM_TIMEOUT");
  if (t) {
    char *end;
    errno = 0;
    double x = strtod(t, &end);
    if (end == t || *end || errno || !(x > 0) || x > 1e6)
      return esmt_fail(ESMT_ERR_CONFIG,
                       "ESMTRAIN_COMM_TIMEOUT '%s' is not a positive number of seconds", t);
    d.timeout_s = x;
  }
  const char *rf = ev(&e, "ESMTRAIN_RENDEZVOUS_FILE");
  if (rf) {
    if (strlen(rf) >= sizeof d.rendezvous_file)
      return esmt_fail(ESMT_ERR_CONFIG, "ESMTRAIN_RENDEZVOUS_FILE is longer than %d characters",
                       ESMT_DIST_PATH_MAX - 1);
    strcpy(d.rendezvous_file, rf);
  }

  const char *kind = ev(&e, "ESMTRAIN_COMM");
  if (kind && *kind && strcmp(kind, "auto") != 0) {
    if (strcmp(kind, "tcp") == 0) d.comm = 1;      /* ESMT_COMM_TCP */
    else if (strcmp(kind, "mpi") == 0) d.comm = 2; /* ESMT_COMM_MPI */
    else return esmt_fail(ESMT_ERR_CONFIG, "ESMTRAIN_COMM '%s' is not auto, tcp or mpi", kind);
  }
  const int mpi_vars = ev(&e, "OMPI_COMM_WORLD_SIZE") || ev(&e, "PMIX_RANK") ||
                       ev(&e, "PMI_RANK") || ev(&e, "PMI_SIZE") || ev(&e, "PMI_FD");

  const layout_vars *lv = NULL;
  if (ev(&e, "ESMTRAIN_RANK") || ev(&e, "ESMTRAIN_WORLD_SIZE")) lv = &k_esmtrain;
  else if (ev(&e, "RANK") || ev(&e, "WORLD_SIZE")) lv = &k_torchrun;
  else if (ev(&e, "SLURM_PROCID")) lv = &k_slurm;
  else if (ev(&e, "OMPI_COMM_WORLD_RANK") || ev(&e, "OMPI_COMM_WORLD_SIZE")) lv = &k_openmpi;
  else if (ev(&e, "PMI_RANK") && ev(&e, "PMI_SIZE")) lv = &k_pmi;
  /* torchrun's or esmtrain's own variables mean their launcher started us,
   * even where the site exports MPI's */
  d.mpi_launched = mpi_vars && lv != &k_esmtrain && lv != &k_torchrun;
  if (lv) {
    d.source = lv->source;
    if ((st = read_layout(&e, lv, &d)) != ESMT_OK) return st;
    if ((st = read_master(&e, lv, &d)) != ESMT_OK) return st;
  }

  /* The token only has to agree within a job and differ between jobs that
   * could meet on one port; the launcher's job id is the best we have. */
  const char *ids[] = {"ESMTRAIN_JOB_TOKEN", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                       "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
  uint64_t h = fnv1a(14695981039346656037ull, d.source);
  char ws[16];
  snprintf(ws, sizeof ws, "%d", d.world_size);
  h = fnv1a(h, ws);
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *v = ev(&e, ids[i]);
    if (v) h = fnv1a(fnv1a(h, ids[i]), v);
  }
  d.job_token = h;
  *out = d;
  return ESMT_OK;
}

esmt_status esmt_dist_env_detect(esmt_dist_env *out) {
  return esmt_dist_env_detect_with(out, NULL, NULL);
}

esmt_status esmt_launch_layout(int *rank, int *world_size, int *local_rank,
                               int *local_world_size) {
  esmt_dist_env d;
  esmt_status st = esmt_dist_env_detect(&d);
  if (st) return st;
  if (rank) *rank = d.rank;
  if (world_size) *world_size = d.world_size;
  if (local_rank) *local_rank = d.local_rank;
  if (local_world_size) *local_world_size = d.local_world_size;
  return ESMT_OK;
}

void esmt_dist_env_describe(const esmt_dist_env *d, char *buf, size_t cap) {
  if (!buf || cap == 0) return;
  int n = snprintf(buf, cap, "rank %d of %d (local %d of %d) from %s", d->rank, d->world_size,
                   d->local_rank, d->local_world_size, d->source);
  if (n < 0 || (size_t)n >= cap || d->world_size == 1) return;
  if (d->rendezvous_file[0])
    snprintf(buf + n, cap - (size_t)n, ", rendezvous file %s", d->rendezvous_file);
  else snprintf(buf + n, cap - (size_t)n, ", rank 0 at %s:%d", d->master_addr, d->master_port);
}
