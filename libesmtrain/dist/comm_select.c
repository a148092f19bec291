/* SPDX-License-Identifier: MIT */
/* Choosing the transport (esmt_comm_create_from_env) and loading the MPI
 * plugin (esmt_comm_create_mpi).
 *
 * The plugin is found at $ESMTRAIN_COMM_PLUGIN, else next to the loaded
 * library (<libdir>/esmtrain-MAJOR.MINOR/comm/mpi_comm.so, or a build
 * tree's <libdir>/esmtrain/comm), else in the installed
 * <libdir>/esmtrain-MAJOR.MINOR/comm. It is loaded once per process with RTLD_GLOBAL
 * (Open MPI's own components, which it dlopen()s, resolve libmpi's symbols
 * globally) and never unloaded: MPI libraries register handlers at exit
 * and cannot be started again after MPI_Finalize anyway. */
#define _GNU_SOURCE
#include "comm_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"

#define PLUGIN_FILE "mpi_comm.so"

static pthread_mutex_t g_load_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_handle;
static const esmt_comm_plugin *g_plugin;
static char g_path[PATH_MAX];

/* Candidate paths, first existing one wins; *where lists them for messages. */
static int find_plugin(const char *explicit_path, char *out, size_t cap, char *where,
                       size_t wcap) {
  const char *env = getenv("ESMTRAIN_COMM_PLUGIN");
  if (explicit_path && *explicit_path) {
    snprintf(out, cap, "%s", explicit_path);
    snprintf(where, wcap, "%s", explicit_path);
    return access(out, F_OK) == 0;
  }
  if (env && *env) {
    snprintf(out, cap, "%s", env);
    snprintf(where, wcap, "%s (ESMTRAIN_COMM_PLUGIN)", env);
    return access(out, F_OK) == 0;
  }
  char dir[PATH_MAX];
  esmt_plugin_dir("comm", dir, sizeof dir);
  char here[PATH_MAX + 32], inst[PATH_MAX];
  if (dir[0]) snprintf(here, sizeof here, "%s/" PLUGIN_FILE, dir);
  snprintf(inst, sizeof inst, "%s/" PLUGIN_FILE, ESMT_INSTALL_COMM_DIR);
  const char *cands[2] = {dir[0] ? here : NULL, inst};
  size_t n = 0;
  where[0] = '\0';
  for (int i = 0; i < 2; i++) {
    if (!cands[i]) continue;
    if (access(cands[i], F_OK) == 0) {
      snprintf(out, cap, "%s", cands[i]);
      return 1;
    }
    if (n < wcap) n += (size_t)snprintf(where + n, wcap - n, "%s%s", n ? ", " : "", cands[i]);
  }
  return 0;
}

/* The plugin's table, loading it on first use. */
static esmt_status load_plugin(const char *explicit_path, const esmt_comm_plugin **out) {
  pthread_mutex_lock(&g_load_mu);
  esmt_status st = ESMT_OK;
  if (!g_plugin) {
    char path[PATH_MAX], where[2 * PATH_MAX];
    if (!find_plugin(explicit_path, path, sizeof path, where, sizeof where)) {
      st = esmt_fail(ESMT_ERR_UNSUPPORTED,
                     "the MPI plugin is not installed (looked for %s; it is built when "
                     "libopenmpi-dev or another MPI is present at build time)",
                     where);
      goto done;
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      st = esmt_fail(ESMT_ERR_UNSUPPORTED, "cannot load the MPI plugin %s: %s", path, dlerror());
      goto done;
    }
    const esmt_comm_plugin *(*get)(void) =
        (const esmt_comm_plugin *(*)(void))(uintptr_t)dlsym(h, ESMT_COMM_PLUGIN_SYMBOL);
    const esmt_comm_plugin *p = get ? get() : NULL;
    if (!p) {
      st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s is not an esmtrain communication plugin (no %s)",
                     path, ESMT_COMM_PLUGIN_SYMBOL);
      dlclose(h);
      goto done;
    }
    if (p->abi_version != ESMT_COMM_PLUGIN_ABI || p->struct_size < sizeof *p) {
      st = esmt_fail(ESMT_ERR_UNSUPPORTED,
                     "%s speaks communication plugin ABI %u (table of %u bytes); this library "
                     "needs ABI %d (%zu bytes): a plugin of another installation",
                     path, (unsigned)p->abi_version, (unsigned)p->struct_size,
                     ESMT_COMM_PLUGIN_ABI, sizeof *p);
      dlclose(h);
      goto done;
    }
    g_handle = h;
    g_plugin = p;
    snprintf(g_path, sizeof g_path, "%s", path);
  }
  *out = g_plugin;
done:
  pthread_mutex_unlock(&g_load_mu);
  return st;
}

esmt_status esmt_comm_create_mpi(esmt_comm **out, const char *plugin, double timeout_s) {
  ESMT_CHECK_ARG(out, "esmt_comm_create_mpi", "NULL output");
  *out = NULL;
  if (!(timeout_s > 0 && timeout_s <= 1e6))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                     "esmt_comm_create_mpi: timeout must be between 0 and 1e6 seconds");
  const esmt_comm_plugin *p = NULL;
  esmt_status st = load_plugin(plugin, &p);
  if (st) return st;
  esmt_comm *c = calloc(1, sizeof *c);
  if (!c) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_comm_create_mpi: out of memory");
  char err[1024] = "";
  c->plugin = p;
  c->dl = g_handle;
  c->state = p->create(timeout_s, err, sizeof err);
  if (!c->state) {
    free(c);
    return esmt_fail(ESMT_ERR_IO, "MPI communicator: %s", err[0] ? err : "could not start");
  }
  *out = c;
  return ESMT_OK;
}

esmt_status esmt_comm_create_from_env(esmt_comm **out, const esmt_dist_env *env,
                                      esmt_comm_kind kind) {
  ESMT_CHECK_ARG(out && env, "esmt_comm_create_from_env", "NULL argument");
  *out = NULL;
  if (env->comm) kind = (esmt_comm_kind)env->comm; /* ESMTRAIN_COMM wins over the config */
  char note[512] = "";
  if (kind == ESMT_COMM_MPI || (kind == ESMT_COMM_AUTO && env->mpi_launched)) {
    esmt_comm *c = NULL;
    esmt_status st = esmt_comm_create_mpi(&c, NULL, env->timeout_s);
    if (!st && strcmp(env->source, "single") != 0 &&
        (esmt_comm_rank(c) != env->rank || esmt_comm_world_size(c) != env->world_size)) {
      st = esmt_fail(ESMT_ERR_CONFIG,
                     "MPI says this is rank %d of %d, but the launcher's environment (%s) says "
                     "rank %d of %d: start every rank with the same mpirun/srun --mpi",
                     esmt_comm_rank(c), esmt_comm_world_size(c), env->source, env->rank,
                     env->world_size);
      esmt_comm_destroy(c);
      c = NULL;
    }
    if (!st) {
      *out = c;
      return ESMT_OK;
    }
    if (kind == ESMT_COMM_MPI) return esmt_fail_prefix(st, "data parallel over MPI: ");
    snprintf(note, sizeof note, "MPI not used: %s", esmt_last_error());
  }
  esmt_comm_options o = {env->rank, env->world_size, env->master_addr, env->master_port,
                         env->rendezvous_file, env->job_token, env->timeout_s};
  esmt_comm *c = NULL;
  esmt_status st = esmt_comm_create(&c, &o);
  if (st) return note[0] ? esmt_fail_prefix(st, "%s; and TCP: ", note) : st;
  snprintf(c->note, sizeof c->note, "%s", note);
  *out = c;
  return ESMT_OK;
}
