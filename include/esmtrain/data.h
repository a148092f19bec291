/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: protein data (alphabet, FASTA ingest, the MLM loader, the sequence reader).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs. */
#ifndef ESMTRAIN_DATA_H
#define ESMTRAIN_DATA_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Protein data: alphabet, FASTA ingest into shards, the MLM batch loader     */
/* ------------------------------------------------------------------------ */

/* Token id of a residue letter (case-insensitive; gaps '-' and '.' too),
 * or -1 when the character is not in the ESM-2 alphabet. */
ESMT_API int esmt_token_id(int residue);

/* The token string of an id ("<cls>", "L", ...), or NULL out of range. */
ESMT_API const char *esmt_token_string(int id);

/* Reading proteins one at a time, for inference (embed, score): a FASTA
 * file (plain or gzip; "-" standard input) or a dataset directory that
 * esmt_ingest wrote (one split). Memory: one sequence. Letters outside the
 * alphabet (and '*') become <unk> and are counted; any other character is
 * an error naming the file, line and record. */
typedef struct esmt_sequence_reader esmt_sequence_reader;

typedef struct esmt_sequence {
  uint32_t struct_size;
  const char *id;           /* FASTA: the header up to its first whitespace;
                             * dataset: "<split>:<record index>" */
  const int32_t *tokens;    /* residue token ids, no cls/eos (valid until the next call) */
  uint64_t length;          /* residues (0 for an empty FASTA record) */
  uint64_t index;           /* 0-based position in the input */
  uint64_t unknown;         /* residues read as <unk> */
} esmt_sequence;

#define ESMT_SEQUENCE_INIT ESMT_SIZED_INIT_(esmt_sequence)

/* `split` ("train" or "valid") is for a dataset directory and ignored for
 * FASTA; NULL means "train". */
ESMT_API esmt_status esmt_sequence_reader_open(const char *path, const char *split,
                                               esmt_sequence_reader **out);
/* The next sequence into *seq and *got = 1, or *got = 0 at the end. */
ESMT_API esmt_status esmt_sequence_reader_next(esmt_sequence_reader *reader, esmt_sequence *seq,
                                               int *got);
/* How far: bytes of the file (compressed bytes for gzip) or records of
 * the dataset; *total 0 when unknown (standard input). */
ESMT_API esmt_status esmt_sequence_reader_position(const esmt_sequence_reader *reader,
                                                   uint64_t *done, uint64_t *total);
ESMT_API void esmt_sequence_reader_close(esmt_sequence_reader *reader);

/* Reading a text input line by line under the library's input policy,
 * which the library's own readers (configuration files, cluster files)
 * follow too: the path must be a regular file (a FIFO, device, socket or
 * directory is refused at once, never waited on), or standard input ("-"
 * or "/dev/stdin") where the caller allows it; the whole input and every
 * line are bounded, and a NUL byte is refused, each with a message naming
 * the file, the line and the limit; between reads the progress callback
 * may cancel (ESMT_ERR_CANCELLED), also while a read from a pipe waits,
 * once a signal handler installed without SA_RESTART interrupts it.
 * Memory: the longest line. */
typedef struct esmt_line_reader esmt_line_reader;

#define ESMT_LINE_READER_MAX_BYTES ((uint64_t)1 << 30) /* 1 GiB: the default input limit */
#define ESMT_LINE_READER_MAX_LINE ((uint64_t)4 << 20)  /* 4 MiB: the default line limit */
#define ESMT_LINE_READER_NO_LIMIT UINT64_MAX

typedef struct esmt_line_reader_options {
  uint32_t struct_size;
  const char *what;          /* its role in messages ("variants CSV"); NULL: "input" */
  uint64_t max_bytes;        /* the whole input; 0: ESMT_LINE_READER_MAX_BYTES */
  uint64_t max_line;         /* one line, its '\n' excluded; 0: ESMT_LINE_READER_MAX_LINE */
  int allow_stdin;           /* "-" and "/dev/stdin" read standard input (not a terminal) */
  esmt_progress_fn progress; /* after every read (stage "read", unit "bytes"); non-zero cancels */
  void *user;
} esmt_line_reader_options;

#define ESMT_LINE_READER_OPTIONS_INIT ESMT_SIZED_INIT_(esmt_line_reader_options)

ESMT_API esmt_status esmt_line_reader_open(const char *path, const esmt_line_reader_options *opts,
                                           esmt_line_reader **out);
/* The next line (its '\n' removed, a '\r' kept; NUL-terminated, valid until
 * the next call) and *got = 1, or *got = 0 at the end of the input. */
ESMT_API esmt_status esmt_line_reader_next(esmt_line_reader *reader, const char **line,
                                           size_t *len, int *got);
/* The 1-based number of the line last returned (0 before the first). */
ESMT_API uint64_t esmt_line_reader_line_number(const esmt_line_reader *reader);
ESMT_API void esmt_line_reader_close(esmt_line_reader *reader);

typedef enum esmt_unknown_policy {
  ESMT_UNKNOWN_AS_UNK = 0,  /* letters outside the alphabet become <unk> (counted) */
  ESMT_UNKNOWN_SKIP = 1,    /* drop the whole record (counted) */
  ESMT_UNKNOWN_FAIL = 2     /* stop with an error naming file, line and record */
} esmt_unknown_policy;

typedef enum esmt_gap_policy {
  ESMT_GAPS_KEEP = 0,       /* '-' and '.' kept as their tokens */
  ESMT_GAPS_DROP = 1,       /* removed from the sequence (counted) */
  ESMT_GAPS_FAIL = 2
} esmt_gap_policy;

/* The format of ingest's inputs (esmt_ingest_options.input_format; issue #21). */
typedef enum esmt_input_format {
  ESMT_INPUT_AUTO = 0,      /* by name: .csv, .tsv, .tab (each optionally .gz, any case) are
                             * tables, anything else (standard input too) FASTA */
  ESMT_INPUT_FASTA = 1,
  ESMT_INPUT_CSV = 2,       /* RFC 4180 with a header row (docs/formats.md) */
  ESMT_INPUT_TSV = 3        /* tab-separated with a header row, no quoting */
} esmt_input_format;

typedef struct esmt_ingest_options {
  uint32_t struct_size;
  const char *const *inputs;  /* FASTA files, plain or gzip (concatenated members too);
                               * "-" is standard input (once). Anything but a regular
                               * file (FIFO, device, directory) is refused at once, and
                               * so is a bzip2/zstd/xz/lz4/zip/tar input, by name */
  int n_inputs;
  const char *output_dir;     /* created; must not exist or be empty */
  double valid_fraction;      /* share of records (by a hash of the id) for validation */
  esmt_unknown_policy unknown;
  esmt_gap_policy gaps;
  uint64_t shard_tokens;      /* residues per shard before starting a new one */
  esmt_progress_fn progress;  /* "ingest" stage in input bytes (total 0 with standard
                               * input: unknown); non-zero cancels */
  void *progress_user;
  uint64_t max_residues;      /* 0 = no limit; longer records are skipped (counted). The
                               * loader crops long records at random, so this only drops
                               * outliers (e.g. titin) */
  /* Appended (issue #21): a cluster file, plain or gzip, one "representative
   * TAB member" line per member (what MMseqs2's easy-cluster/createtsv
   * write; or a UniRef50 id TAB a UniRef90 member id). Members are matched
   * to the inputs' record ids; the validation split then holds out whole
   * clusters (by a hash of the representative), and a <split>.clusters
   * index is written for cluster sampling (docs/formats.md). A record no
   * line names is a cluster of its own (counted). NULL: no clusters. */
  const char *clusters;
  /* Appended (issue #21, tables): an esmt_input_format for every input
   * (AUTO: by each name), and for tables the header names of the sequence
   * column (NULL: "sequence") and of the id column (NULL: "id", and a table
   * without one numbers its rows "row1", "row2", ...; a column named here
   * must exist). A caller whose struct ends before them gets AUTO and the
   * defaults. */
  int input_format;
  const char *seq_column;
  const char *id_column;
  /* Appended (issue #21), with clusters: hold out this many whole clusters
   * for validation instead of valid_fraction (the listed clusters whose
   * representatives hash lowest: deterministic; records in no cluster stay
   * in training). 0: valid_fraction decides. */
  uint64_t valid_clusters;
} esmt_ingest_options;

#define ESMT_INGEST_OPTIONS_INIT \
  { sizeof(esmt_ingest_options), NULL, 0, NULL, 0.005, ESMT_UNKNOWN_AS_UNK, ESMT_GAPS_KEEP, \
    (uint64_t)1 << 28, NULL, NULL, 0, NULL, ESMT_INPUT_AUTO, NULL, NULL, 0 }

typedef struct esmt_ingest_stats {
  uint32_t struct_size;
  uint64_t bytes_read;        /* compressed input bytes (standard input: after gzip) */
  uint64_t records, residues; /* kept */
  uint64_t train_records, valid_records, train_residues, valid_residues;
  uint64_t empty_records;     /* headers without residues (skipped) */
  uint64_t skipped_records;   /* dropped by the unknown policy */
  uint64_t unknown_letters;   /* mapped to <unk> */
  uint64_t gaps_dropped;
  uint64_t terminal_stops;    /* a final '*' removed */
  uint64_t duplicate_ids;
  uint64_t lowercase_letters;
  uint64_t longest;
  int shards;
  double seconds;
  uint64_t too_long_records;  /* skipped: longer than max_residues */
  /* Appended (issue #21), with options.clusters: */
  uint64_t clusters_listed;     /* distinct representatives in the cluster file */
  uint64_t train_clusters, valid_clusters; /* clusters with a record in each split */
  uint64_t unclustered_records; /* records no line names (each a cluster of its own) */
  uint64_t empty_clusters;      /* listed clusters none of whose members is in the input */
  uint64_t duplicate_members;   /* member lines repeated (or a member in two clusters:
                                 * it stays in the first) */
} esmt_ingest_stats;

#define ESMT_INGEST_STATS_INIT ESMT_SIZED_INIT_(esmt_ingest_stats)

/* Stream FASTA inputs into memory-mappable token shards plus a manifest
 * written last: an interrupted or failed ingest leaves nothing the loader
 * accepts, and never touches an existing dataset. */
ESMT_API esmt_status esmt_ingest(const esmt_ingest_options *opts, esmt_ingest_stats *stats);

typedef enum esmt_split { ESMT_SPLIT_TRAIN = 0, ESMT_SPLIT_VALID = 1 } esmt_split;

typedef struct esmt_loader_options {
  uint32_t struct_size;
  const char *dir;            /* from esmt_ingest / `esmtrain-example ingest` */
  esmt_split split;
  uint64_t seed;
  int max_len;                /* tokens per row incl. cls/eos; longer proteins are cropped */
  int batch_rows;             /* rows per batch; 0 = as many as tokens_per_batch allows */
  uint64_t tokens_per_batch;  /* padded-token budget of a batch (rows x longest) */
  int rank, world;            /* this process's share: the batches of all epochs, one after
                               * another, are one stream whatever the world size, and round
                               * k gives rank r batch k * world + r */
  double mask_prob;           /* 0.15 of residues selected ... */
  double mask_token_frac;     /* ... 0.8 of those <mask> ... */
  double random_token_frac;   /* ... 0.1 a random amino acid, the rest unchanged */
  int shuffle;                /* 1: a new order each epoch; 0: file order (evaluation) */
  int fixed_masking;          /* 1: the same masks every epoch (evaluation) */
  int epochs;                 /* 0 = endless; else the source ends after this many */
  int prefetch;               /* batches a background thread prepares ahead; 0 = none */
  /* Appended: 1 packs several proteins (each with its own cls/eos) into
   * rows of max_len tokens, batch_rows rows (or tokens_per_batch / max_len)
   * per batch, with esmt_batch segments; 0: one protein per row. */
  int pack;
  /* Appended (issue #21): what an epoch visits. ESMT_SAMPLING_SEQUENCE:
   * every record once. ESMT_SAMPLING_CLUSTER (a dataset ingested with
   * clusters): every cluster once, each time one member drawn uniformly,
   * as ESM-2 sampled UniRef50 clusters and then a UniRef90 member; an
   * epoch is then one pass over the clusters. */
  int sampling;
} esmt_loader_options;

typedef enum esmt_sampling { ESMT_SAMPLING_SEQUENCE = 0, ESMT_SAMPLING_CLUSTER = 1 } esmt_sampling;

#define ESMT_LOADER_OPTIONS_INIT \
  { sizeof(esmt_loader_options), NULL, ESMT_SPLIT_TRAIN, 1, 1024, 0, 4096, 0, 1, 0.15, 0.8, 0.1, \
    1, 0, 0, 2, 0, ESMT_SAMPLING_SEQUENCE }

typedef struct esmt_loader esmt_loader;

typedef struct esmt_loader_stats {
  uint32_t struct_size;
  uint64_t records;           /* in this split */
  uint64_t epoch;             /* of the batch handed out last (0-based; before the first,
                               * the position's) */
  uint64_t batches;           /* produced so far */
  uint64_t real_tokens, padded_tokens; /* totals so far */
  double padding_fraction;    /* 1 - real / padded */
} esmt_loader_stats;

#define ESMT_LOADER_STATS_INIT ESMT_SIZED_INIT_(esmt_loader_stats)

ESMT_API esmt_status esmt_loader_create(const esmt_loader_options *opts, esmt_loader **out);
ESMT_API void esmt_loader_destroy(esmt_loader *loader);

/* Next batch (tokens/labels valid until the next call). ESMT_ERR_STATE
 * when `epochs` epochs are done. */
ESMT_API esmt_status esmt_loader_next(esmt_loader *loader, esmt_batch *batch);

/* Back to the first batch of epoch 0. */
ESMT_API esmt_status esmt_loader_reset(esmt_loader *loader);

/* Position as JSON text, and back: resuming continues with the same batches.
 * The position is that of the next round, the same on every rank; restored
 * at another world size, the ranks go on with the same stream. */
ESMT_API esmt_status esmt_loader_save_cursor(esmt_loader *loader, char *buf, size_t cap);
ESMT_API esmt_status esmt_loader_restore_cursor(esmt_loader *loader, const char *json);

ESMT_API esmt_status esmt_loader_stats_get(const esmt_loader *loader, esmt_loader_stats *stats);

/* The loader as a trainer batch source (valid while the loader lives). */
ESMT_API esmt_status esmt_loader_as_source(esmt_loader *loader, esmt_batch_source *source);

#endif /* ESMTRAIN_DATA_H */
