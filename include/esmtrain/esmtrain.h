/*
 * esmtrain: train ESM-2 protein language models from C.
 *
 * This is the only header a consumer includes. Everything declared here is
 * part of the stable ABI (see docs/ABI.md); symbols not declared here are
 * hidden in libesmtrain.so.
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - it returns an esmt_status; ESMT_OK (0) is success;
 *  - on failure it sets a per-thread message readable with esmt_last_error();
 *  - handles are opaque, created by *_create and released by *_destroy, and
 *    every *_destroy accepts NULL;
 *  - options structs begin with `struct_size`; fill them with the matching
 *    *_INIT macro or *_init() function so that a newer library can tell how
 *    much of the struct an older caller knows about;
 *  - the library never prints, exits or aborts on its own: it reports through
 *    return codes and the log/progress callbacks.
 */
#ifndef ESMTRAIN_ESMTRAIN_H
#define ESMTRAIN_ESMTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ESMT_API marks the exported symbols; everything else is hidden. */
#if defined(_WIN32)
#  define ESMT_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define ESMT_API __attribute__((visibility("default")))
#else
#  define ESMT_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* The ABI major is the SOVERSION of libesmtrain.so. */
#define ESMT_VERSION_MAJOR 0
#define ESMT_VERSION_MINOR 1
#define ESMT_VERSION_PATCH 0
#define ESMT_VERSION_NUMBER \
  (ESMT_VERSION_MAJOR * 10000 + ESMT_VERSION_MINOR * 100 + ESMT_VERSION_PATCH)

/* Version of the library actually loaded at run time (which may differ from
 * the header the caller was compiled against). Any pointer may be NULL.
 * Returns ESMT_VERSION_NUMBER of the library. */
ESMT_API int esmt_version(int *major, int *minor, int *patch);

/* "0.1.0", static storage. */
ESMT_API const char *esmt_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                   */
/* ------------------------------------------------------------------------ */

typedef enum esmt_status {
  ESMT_OK = 0,
  ESMT_ERR_INVALID_ARGUMENT = 1, /* NULL handle, bad value, unknown option */
  ESMT_ERR_OUT_OF_MEMORY = 2,    /* host or device allocation failed */
  ESMT_ERR_IO = 3,               /* open/read/write/fsync/rename failed */
  ESMT_ERR_FORMAT = 4,           /* malformed file: FASTA, shard, checkpoint */
  ESMT_ERR_NO_BACKEND = 5,       /* no usable backend found / forced one absent */
  ESMT_ERR_BACKEND = 6,          /* a backend call failed */
  ESMT_ERR_ABI = 7,              /* ABI or struct size mismatch */
  ESMT_ERR_UNSUPPORTED = 8,      /* valid request this build/backend cannot do */
  ESMT_ERR_CANCELLED = 9,        /* a progress callback asked to stop */
  ESMT_ERR_NUMERIC = 10,         /* non-finite loss or gradient */
  ESMT_ERR_CONFIG = 11,          /* invalid configuration */
  ESMT_ERR_STATE = 12,           /* call not valid in the object's state */
  ESMT_ERR_INTERNAL = 13         /* a bug in esmtrain: please report it */
} esmt_status;

/* A short constant description of a status code ("invalid argument").
 * Never NULL; unknown codes give "unknown status". */
ESMT_API const char *esmt_status_string(int status);

/* The message of the last failure on the calling thread: what failed and
 * where ("esmt_context_create: backend dir '/x' does not exist"). Never
 * NULL; "" when no error was recorded. Valid until the next esmtrain call on
 * this thread. */
ESMT_API const char *esmt_last_error(void);

/* Forget the calling thread's last error message. */
ESMT_API void esmt_clear_error(void);

/* ------------------------------------------------------------------------ */
/* Logging and progress                                                      */
/* ------------------------------------------------------------------------ */

typedef enum esmt_log_level {
  ESMT_LOG_DEBUG = 0,
  ESMT_LOG_INFO = 1,
  ESMT_LOG_WARN = 2,
  ESMT_LOG_ERROR = 3,
  ESMT_LOG_NONE = 4
} esmt_log_level;

/* Receives one complete line (no trailing newline). Called from the thread
 * that produced the message; must be thread-safe if the caller uses several
 * threads. */
typedef void (*esmt_log_fn)(void *user, esmt_log_level level, const char *message);

/* Progress of a long operation (ingest, training, checkpointing, probing). */
typedef struct esmt_progress {
  uint32_t struct_size;
  const char *stage;    /* "ingest", "train", "eval", "save", ... */
  uint64_t done;        /* units completed */
  uint64_t total;       /* units expected, 0 when unknown */
  const char *unit;     /* "bytes", "steps", "sequences" */
  double elapsed_s;     /* since the operation started */
} esmt_progress;

/* Return non-zero to cancel: the operation stops at the next safe point and
 * returns ESMT_ERR_CANCELLED, leaving existing files intact. */
typedef int (*esmt_progress_fn)(void *user, const esmt_progress *progress);

/* Process-wide default log sink used before/without a context (e.g. by
 * backend loading). NULL fn silences. Default: no sink. */
ESMT_API void esmt_set_log_callback(esmt_log_fn fn, void *user, esmt_log_level min_level);

/* ------------------------------------------------------------------------ */
/* Machine description                                                       */
/* ------------------------------------------------------------------------ */

typedef struct esmt_cpu_info {
  uint32_t struct_size;
  char vendor[16];
  char model[64];
  int logical_cores;    /* online logical CPUs */
  int avx2;             /* 1 when the CPU and OS support it */
  int fma;
  int avx512f;
  int avx512bf16;
  int amx_tile;
  int amx_bf16;
} esmt_cpu_info;

#define ESMT_CPU_INFO_INIT { sizeof(esmt_cpu_info), {0}, {0}, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info with this machine's CPU features. info->struct_size must be set. */
ESMT_API esmt_status esmt_cpu_info_query(esmt_cpu_info *info);

/* ------------------------------------------------------------------------ */
/* Context: backend registry, threads, callbacks                             */
/* ------------------------------------------------------------------------ */

typedef struct esmt_context esmt_context;

typedef struct esmt_context_options {
  uint32_t struct_size;
  /* Colon-separated directories to load backends from. When set, ONLY these
   * are searched; otherwise $ESMTRAIN_BACKEND_PATH, and when that is unset
   * too, the installed ${libdir}/esmtrain/backends and the esmtrain/backends
   * directory next to libesmtrain.so. The current directory never is. */
  const char *backend_path;
  /* Force a backend by name ("cpu", "turing_fp16", ...). NULL: use
   * $ESMTRAIN_BACKEND if set, else the highest probe score. */
  const char *backend;
  int num_threads;            /* CPU threads; 0 = all online cores */
  esmt_log_fn log;            /* NULL: the process-wide sink */
  void *log_user;
  esmt_log_level log_level;   /* minimum level delivered to `log` */
  esmt_progress_fn progress;  /* may be NULL */
  void *progress_user;
  /* Describes the job so backends can score themselves (0 = unknown). */
  uint64_t job_param_count;
  int job_seq_len;
  int job_micro_batch;
} esmt_context_options;

#define ESMT_CONTEXT_OPTIONS_INIT \
  { sizeof(esmt_context_options), NULL, NULL, 0, NULL, NULL, ESMT_LOG_INFO, NULL, NULL, 0, 0, 0 }

/* Same as assigning ESMT_CONTEXT_OPTIONS_INIT. */
ESMT_API esmt_status esmt_context_options_init(esmt_context_options *opts);

/* Load backends, probe them, choose one. opts may be NULL for defaults.
 * Fails with ESMT_ERR_NO_BACKEND when no directory holds a usable backend
 * or a forced backend is unknown/unavailable (the message lists what was
 * found and why each is unusable). *out is NULL on failure. */
ESMT_API esmt_status esmt_context_create(const esmt_context_options *opts, esmt_context **out);

ESMT_API void esmt_context_destroy(esmt_context *ctx);

/* Set a tunable by name from a string, e.g. ("num_threads", "4") or
 * ("log_level", "debug"). An unknown name is ESMT_ERR_INVALID_ARGUMENT with
 * a message naming the closest valid one. */
ESMT_API esmt_status esmt_context_set_option(esmt_context *ctx, const char *name, const char *value);

/* Bounds of an integer tunable (e.g. "num_threads"): [*min, *max]. */
ESMT_API esmt_status esmt_context_option_bounds(const esmt_context *ctx, const char *name,
                                                int64_t *min, int64_t *max);

/* One device a backend can drive. */
typedef struct esmt_device_info {
  uint32_t struct_size;
  char name[128];
  int cc_major, cc_minor;     /* compute capability; 0.0 for CPU */
  uint64_t total_bytes;       /* device memory (host RAM for CPU) */
  uint64_t free_bytes;
} esmt_device_info;

#define ESMT_MAX_DEVICES 16

/* What the registry found: one entry per backend file examined. */
typedef struct esmt_backend_info {
  uint32_t struct_size;
  char name[32];              /* "cpu", or the file name when it did not load */
  char path[512];             /* file it was loaded from */
  char description[128];
  int loaded;                 /* the file loaded and its ABI was accepted */
  int available;              /* it can run on this machine */
  int score;                  /* 0 when unavailable; highest wins */
  int chosen;                 /* the one the context uses */
  char reason[256];           /* why unavailable / not loaded; "" otherwise */
  int device_count;
  esmt_device_info devices[ESMT_MAX_DEVICES];
} esmt_backend_info;

/* Number of backend files the context examined (loaded or not). */
ESMT_API esmt_status esmt_context_backend_count(const esmt_context *ctx, int *count);

/* Details of backend `index` (0 <= index < count). info->struct_size must
 * be set (sizeof(esmt_backend_info) or that of an older version). */
ESMT_API esmt_status esmt_context_backend_info(const esmt_context *ctx, int index,
                                               esmt_backend_info *info);

/* Name of the chosen backend; static for the context's lifetime. */
ESMT_API const char *esmt_context_backend_name(const esmt_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* ESMTRAIN_ESMTRAIN_H */
