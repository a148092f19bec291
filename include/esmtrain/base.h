/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: the export macro, the version,
 * status codes and errors, logging and progress callbacks. esmtrain.h includes
 * it first; it stands alone so that the library's own files can include only
 * this part. A consumer includes <esmtrain/esmtrain.h>. */
#ifndef ESMTRAIN_BASE_H
#define ESMTRAIN_BASE_H

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

/* The *_INIT value of a struct whose fields are all zero but struct_size:
 * a designated initializer in C; in C++, which has them only from C++20,
 * a value-initialized copy (valid C++11 and later, -pedantic included). */
#ifdef __cplusplus
#  define ESMT_SIZED_INIT_(T) ([] { T esmt_v_{}; esmt_v_.struct_size = sizeof(T); return esmt_v_; }())
#else
#  define ESMT_SIZED_INIT_(T) { .struct_size = sizeof(T) }
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* The SONAME of libesmtrain.so carries the ABI: libesmtrain.so.0.MINOR
 * before 1.0 (each 0.x minor may break the API), libesmtrain.so.MAJOR from
 * 1.0 (docs/ABI.md). */
#define ESMT_VERSION_MAJOR 0
#define ESMT_VERSION_MINOR 2
#define ESMT_VERSION_PATCH 0
#define ESMT_VERSION_NUMBER \
  (ESMT_VERSION_MAJOR * 10000 + ESMT_VERSION_MINOR * 100 + ESMT_VERSION_PATCH)

/* 1 when a library of version major.minor (esmt_version) serves a program
 * built against this header, by the SONAME rule: before 1.0 the same 0.x
 * minor only (0.3 may have removed or changed what 0.2 had); from 1.0 the
 * same major and a minor at least this header's (a minor only adds).
 *   int maj, min; esmt_version(&maj, &min, NULL);
 *   if (!ESMT_VERSION_COMPATIBLE(maj, min)) ...refuse to run... */
#define ESMT_VERSION_COMPATIBLE(major, minor)                                  \
  ((major) == ESMT_VERSION_MAJOR &&                                            \
   (ESMT_VERSION_MAJOR == 0 ? (minor) == ESMT_VERSION_MINOR : (minor) >= ESMT_VERSION_MINOR))

/* Version of the library actually loaded at run time (which may differ from
 * the header the caller was compiled against). Any pointer may be NULL.
 * Returns ESMT_VERSION_NUMBER of the library. */
ESMT_API int esmt_version(int *major, int *minor, int *patch);

/* "0.2.0", static storage. */
ESMT_API const char *esmt_version_string(void);

/* Seconds on a monotonic clock (for timing esmtrain calls). */
ESMT_API double esmt_clock_seconds(void);

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

/* `text` made safe to print on a terminal: every control character (bytes
 * 0x00-0x1f and 0x7f, and the C1 controls U+0080-U+009F in UTF-8) becomes
 * "\xNN" ("\x1b" for ESC), everything else is copied. Names and strings
 * read from files (plugin names, FASTA ids, config values, CSV fields) go
 * through it before they are printed; the library's own messages
 * (esmt_last_error, log lines) already have. Writes at most `cap` bytes,
 * always NUL-terminated when cap > 0 (never cut inside an escape), and
 * returns `out`; NULL text is "(null)". */
ESMT_API char *esmt_escape_text(const char *text, char *out, size_t cap);

/* The name of names[0..n) closest to `word` by edit distance (the one the
 * library's "did you mean" messages name), when it is near enough to be a
 * likely typo: 1 edit for a word of up to 3 characters, 2 up to 6, a
 * third of its length for longer ones. NULL when none is. */
ESMT_API const char *esmt_suggest(const char *word, const char *const *names, int n);

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
  uint64_t items;       /* secondary count (e.g. sequences during ingest), or 0 */
} esmt_progress;

#define ESMT_PROGRESS_INIT ESMT_SIZED_INIT_(esmt_progress)

/* Return non-zero to cancel: the operation stops at the next safe point and
 * returns ESMT_ERR_CANCELLED, leaving existing files intact. */
typedef int (*esmt_progress_fn)(void *user, const esmt_progress *progress);

/* Process-wide default log sink used before/without a context (e.g. by
 * backend loading). NULL fn silences. Default: no sink. */
ESMT_API void esmt_set_log_callback(esmt_log_fn fn, void *user, esmt_log_level min_level);

#ifdef __cplusplus
}
#endif

#endif /* ESMTRAIN_BASE_H */
