/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: inference from protein
 * strings (tokens, batches, embeddings with the long-protein rule, masked
 * scoring, embedding files).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs.
 * Threads: a builder, scorer or stream is used by one thread at a time;
 * the calls that take a model run inference on it (esmt_model_infer's
 * rule applies). */
#ifndef ESMTRAIN_INFER_H
#define ESMTRAIN_INFER_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Tokens and batches                                                        */
/* ------------------------------------------------------------------------ */

/* A protein string (len bytes; no <cls>/<eos>) into residue token ids with
 * the policy of the FASTA reader (esmt_sequence_reader): letters of the
 * alphabet (either case, gaps '-' and '.') become their ids, any other
 * letter and '*' become <unk> (counted in *unknown, which may be NULL);
 * any other character is ESMT_ERR_INVALID_ARGUMENT naming it and its
 * 1-based position. ids holds cap entries (cap >= len). */
ESMT_API esmt_status esmt_tokenize(const char *text, size_t len, int32_t *ids, size_t cap,
                                   uint64_t *unknown);

/* How a batch builder lays out its proteins. */
typedef enum esmt_row_layout {
  ESMT_ROWS_PADDED = 0, /* one protein per row, right-padded to the longest */
  ESMT_ROWS_PACKED = 1  /* proteins one after the other in rows of row_len positions
                         * (esmt_batch.num_segments; a backend with ESMTB_CAP_VARLEN) */
} esmt_row_layout;

/* Proteins (residue ids) into an esmt_batch as the model expects each:
 * <cls> residues <eos>, the rest of a row <pad>. */
typedef struct esmt_batch_builder esmt_batch_builder;

/* row_len: the most positions of a row (the model's max_positions). */
ESMT_API esmt_status esmt_batch_builder_create(esmt_row_layout layout, int row_len,
                                               esmt_batch_builder **out);
ESMT_API void esmt_batch_builder_destroy(esmt_batch_builder *builder);
/* Append a protein of n residues. A protein of more than row_len - 2
 * residues is ESMT_ERR_INVALID_ARGUMENT (esmt_embed truncates or windows). */
ESMT_API esmt_status esmt_batch_builder_add(esmt_batch_builder *builder, const int32_t *residues,
                                            int n);
/* The batch of every protein added since the last reset; its arrays stay
 * valid until the next add, reset or destroy. Row order = protein order. */
ESMT_API esmt_status esmt_batch_builder_get(esmt_batch_builder *builder, esmt_batch *batch);
ESMT_API void esmt_batch_builder_reset(esmt_batch_builder *builder);

/* ------------------------------------------------------------------------ */
/* Embeddings: proteins of any length                                        */
/* ------------------------------------------------------------------------ */

/* Proteins longer than the model's window W = max_positions - 2 residues. */
typedef enum esmt_long_policy {
  /* The first W residues, as fair-esm's extract.py (--truncation_seq_length). */
  ESMT_LONG_TRUNCATE = 0,
  /* Windows of W residues starting at 0, S, 2S, ... and a last one ending at
   * the protein's end; a residue's representation is the average over the
   * windows that hold it, the cls the average of the windows' cls. */
  ESMT_LONG_WINDOWS = 1
} esmt_long_policy;

typedef struct esmt_embed_request {
  uint32_t struct_size;
  int num_layers;            /* representations wanted: 0 = the last layer alone */
  const int *layers;         /* [num_layers] as esmt_infer_request.layers (-1 = L) */
  int per_token;             /* also per-residue representations */
  esmt_long_policy long_policy;
  int stride;                /* windows: residues between window starts; 0 = W / 2 */
  int64_t batch_tokens;      /* positions of a batch at most (one row always fits) */
  /* Called after each batch (stage "embed", unit "windows": pieces done of
   * the total); non-zero cancels with ESMT_ERR_CANCELLED. May be NULL. */
  esmt_progress_fn progress;
  void *progress_user;
  /* Appended (issue #42): also each requested layer's attention maps
   * (layers 1..L: block l's softmax; layer 0 has none and is refused), per
   * protein [layers, heads, kept, kept] fp32 over the kept residues (no
   * <cls>/<eos>), one protein a forward pass. A protein longer than the
   * window is truncated (ESMT_LONG_TRUNCATE) or refused (windows' maps are
   * not averaged). max_attention_bytes: a protein whose maps
   * (esmt_embed_attention_bytes) exceed it is refused; 0 = no cap. */
  int attention;
  uint64_t max_attention_bytes;
} esmt_embed_request;

#define ESMT_EMBED_REQUEST_INIT \
  { sizeof(esmt_embed_request), 0, NULL, 0, ESMT_LONG_TRUNCATE, 0, 16384, NULL, NULL, 0, 0 }

/* One protein's results (arrays malloc'd by esmt_embed, freed by
 * esmt_embedding_release). Blocks follow the request's layers. */
typedef struct esmt_embedding {
  uint32_t struct_size;
  int64_t length;            /* residues given */
  int64_t kept;              /* residues with a representation: length, or W when truncated */
  int pieces;                /* rows it took: 1, or its windows */
  float *mean;               /* [layers, hidden]: mean over the kept residues */
  float *cls;                /* [layers, hidden] */
  float *per_token;          /* [layers, kept, hidden] with per_token, else NULL */
  /* Appended (issue #42): [layers, heads, kept, kept] with attention, else NULL. */
  float *attention;
} esmt_embedding;

#define ESMT_EMBEDDING_INIT { sizeof(esmt_embedding), 0, 0, 0, NULL, NULL, NULL, NULL }

/* Representations of `count` proteins (residue ids, no cls/eos; an empty
 * protein has a cls and a zero mean). Pieces (whole proteins, truncated
 * ones or windows) are sorted by length, longest first, and cut into
 * right-padded batches of at most batch_tokens positions, so that padding
 * stays small; the results do not depend on that order. out[i] must be
 * initialised (struct_size); on failure nothing stays allocated. */
ESMT_API esmt_status esmt_embed(esmt_model *model, const esmt_embed_request *request, int count,
                                const int32_t *const *residues, const int64_t *lengths,
                                esmt_embedding *out);
ESMT_API void esmt_embedding_release(esmt_embedding *embeddings, int count);
/* The bytes of one protein's attention maps as esmt_embed returns them
 * (and `embed --include attention` writes them): num_layers x heads x
 * kept^2 fp32, kept = the residues that fit the window. */
ESMT_API esmt_status esmt_embed_attention_bytes(esmt_model *model, int num_layers,
                                                int64_t residues, uint64_t *bytes);

/* ------------------------------------------------------------------------ */
/* Masked scoring: pseudo-log-likelihood and masked marginals                */
/* ------------------------------------------------------------------------ */

/* A masked row is a protein with one residue replaced by <mask>, as
 * <cls> residues <eos>. A protein longer than W = max_positions - 2
 * residues is cut to the window of W residues that gives the masked
 * residue the most context: it starts at clamp(r - W/2, 0, n - W) (r the
 * 0-based masked residue). Rows are right-padded into batches of B rows x
 * T positions with B*T <= batch_tokens (one row always fits). */

/* Receives log_softmax (double, all 33 tokens) of the logits at the masked
 * position of the row added with `tag`, in the order rows were added.
 * Non-zero stops the scorer with ESMT_ERR_CANCELLED. */
typedef int (*esmt_masked_row_fn)(void *user, uint64_t tag, const double *logp);

typedef struct esmt_masked_scorer esmt_masked_scorer;

/* The model needs the ESM-2 vocabulary and rows of 3 or more positions. */
ESMT_API esmt_status esmt_masked_scorer_create(esmt_model *model, uint64_t batch_tokens,
                                               esmt_masked_row_fn fn, void *user,
                                               esmt_masked_scorer **out);
ESMT_API void esmt_masked_scorer_destroy(esmt_masked_scorer *scorer);
/* Queue the row masking residue r (0-based) of residues[0..n); the array
 * must stay valid until the next flush. Runs the queued batch first when
 * the row does not fit in it. */
ESMT_API esmt_status esmt_masked_scorer_add(esmt_masked_scorer *scorer, const int32_t *residues,
                                            int n, int r, uint64_t tag);
/* Run what is queued. */
ESMT_API esmt_status esmt_masked_scorer_flush(esmt_masked_scorer *scorer);
/* Rows scored so far; W (the most residues of a row). */
ESMT_API uint64_t esmt_masked_scorer_rows_done(const esmt_masked_scorer *scorer);
ESMT_API int esmt_masked_scorer_window(const esmt_masked_scorer *scorer);

/* Pseudo-log-likelihood, PLL = sum over residues i of log p(residue i |
 * the protein with i masked), for a stream of proteins whose masked rows
 * share batches. Receives each protein's result, in the order added. */
typedef int (*esmt_pll_fn)(void *user, uint64_t index, int length, double pll);

typedef struct esmt_pll_scorer esmt_pll_scorer;

ESMT_API esmt_status esmt_pll_scorer_create(esmt_model *model, uint64_t batch_tokens,
                                            esmt_pll_fn fn, void *user, esmt_pll_scorer **out);
ESMT_API void esmt_pll_scorer_destroy(esmt_pll_scorer *scorer);
/* Queue protein number `index` (0, 1, ... in order; the residues are
 * copied; n >= 1). fn is called for it once its last row is scored. */
ESMT_API esmt_status esmt_pll_scorer_add(esmt_pll_scorer *scorer, const int32_t *residues, int n);
/* Score what is queued (every protein added gets its fn call). */
ESMT_API esmt_status esmt_pll_scorer_finish(esmt_pll_scorer *scorer);
ESMT_API uint64_t esmt_pll_scorer_rows_done(const esmt_pll_scorer *scorer);

/* One protein's PLL in one call (its own batches). */
ESMT_API esmt_status esmt_score_pll(esmt_model *model, const int32_t *residues, int n,
                                    uint64_t batch_tokens, double *pll);

/* A substitution: the 0-based residue, the wild-type and mutant token ids. */
typedef struct esmt_mutation {
  int64_t residue;
  int wt, mt;
} esmt_mutation;

/* Parse "A123G" or "A123G:L45P" (letters of the alphabet; the position as
 * written, 1-based or as the caller's numbering) into at most cap
 * mutations, residue = the written position. *count gets how many;
 * ESMT_ERR_INVALID_ARGUMENT says why a text is not one. */
ESMT_API esmt_status esmt_mutations_parse(const char *text, esmt_mutation *out, int cap,
                                          int *count);

/* A variant: substitutions of one protein (an index into the proteins
 * passed with it). */
typedef struct esmt_variant {
  int protein;
  int count;
  const esmt_mutation *mutations; /* residue 0-based; wt must be the protein's residue */
} esmt_variant;

/* Masked marginals (Meier et al. 2021; fair-esm's "masked-marginals"):
 * the score of a variant is the sum over its mutations of log p(mt) -
 * log p(wt) at the mutated residue, masked in the wild type. Each distinct
 * (protein, residue) is masked once however many variants name it; the
 * rows of every protein share batches. progress (may be NULL; stage
 * "score", unit "positions", items: proteins done) is called after each
 * row is queued and at the end; non-zero cancels. scores[num_variants]. */
ESMT_API esmt_status esmt_score_variants(esmt_model *model, int num_proteins,
                                         const int32_t *const *residues, const int *lengths,
                                         const esmt_variant *variants, size_t num_variants,
                                         uint64_t batch_tokens, esmt_progress_fn progress,
                                         void *progress_user, double *scores);

/* ------------------------------------------------------------------------ */
/* Contact maps                                                              */
/* ------------------------------------------------------------------------ */

/* The contact head (esm.contact_head.regression of an HF checkpoint,
 * carried through import, checkpoints and export): count = layers x heads
 * weights, feature k = layer * heads + head, and the bias. A model without
 * one, or with an all-zero one (an export of a model that never had one),
 * is ESMT_ERR_STATE. */
ESMT_API esmt_status esmt_model_contact_head(esmt_model *model, float *weight, int count,
                                             float *bias);
/* Replace (or add) the model's contact head; an export writes it. */
ESMT_API esmt_status esmt_model_set_contact_head(esmt_model *model, const float *weight,
                                                 int count, float bias);

/* The contact head's features of one protein of n residues (no cls/eos;
 * 1 <= n <= max_positions - 2, else ESMT_ERR_INVALID_ARGUMENT): for each
 * layer and head k = layer * heads + head, the attention map without the
 * <cls> and <eos> rows and columns, symmetrised and average-product
 * corrected, as fair-esm's ContactPredictionHead: features [layers x heads,
 * n, n]. Needs a backend with attention maps (esmt_infer_request.attention). */
ESMT_API esmt_status esmt_contact_features(esmt_model *model, const int32_t *residues, int n,
                                           float *features);
/* Contact probabilities [n, n] of one protein: the sigmoid of the contact
 * head's logistic regression over esmt_contact_features, fair-esm's
 * predict_contacts for the protein's residues. */
ESMT_API esmt_status esmt_predict_contacts(esmt_model *model, const int32_t *residues, int n,
                                           float *contacts);
/* Contact probabilities [n, n] of a protein of any length n >= 1: one that
 * fits the window is esmt_predict_contacts; a longer one is cut into
 * esmt_embed's windows (ESMT_LONG_WINDOWS: W = max_positions - 2 residues
 * starting at 0, stride, 2 stride, ... and a last one ending at the
 * protein's end; stride 0 = W / 2), each window's map predicted as a
 * protein of its own and the maps averaged where windows overlap. A pair
 * of residues that no window holds together is 0 (no evidence). */
ESMT_API esmt_status esmt_predict_contacts_windowed(esmt_model *model, const int32_t *residues,
                                                    int n, int stride, float *contacts);

/* Training the contact head as fair-esm did: a logistic regression on the
 * frozen model's contact features, here L2-penalised and fitted by
 * Newton's method. Residues are 0-based; a pair may be listed either way
 * round, or twice. */
typedef struct esmt_contact_pair {
  int protein;               /* index into the proteins passed with it */
  int i, j;                  /* 0-based residues */
} esmt_contact_pair;

typedef struct esmt_contact_train_options {
  uint32_t struct_size;
  int min_separation;        /* samples: pairs with j - i >= this (6: fair-esm's minimum) */
  double l2;                 /* penalty l2/2 |w|^2 on the weights (not the bias) */
  int max_iterations;        /* Newton steps at most */
} esmt_contact_train_options;

#define ESMT_CONTACT_TRAIN_OPTIONS_INIT { sizeof(esmt_contact_train_options), 6, 1e-3, 50 }

typedef struct esmt_contact_train_result {
  uint32_t struct_size;
  uint64_t pairs;            /* samples: residue pairs at least min_separation apart */
  uint64_t contacts;         /* of them listed as contacts */
  int iterations;            /* Newton steps taken */
  double loss;               /* final mean log-loss plus the penalty */
  double precision_long_l5;  /* on the training proteins: mean precision of each protein's
                              * top n/5 pairs 24 or more apart; -1 when none */
} esmt_contact_train_result;

#define ESMT_CONTACT_TRAIN_RESULT_INIT { sizeof(esmt_contact_train_result), 0, 0, 0, 0.0, 0.0 }

/* Fit the contact head on `count` proteins (residue ids, each fitting the
 * window) and their contacts, and make it the model's
 * (esmt_model_set_contact_head; an export writes it). options NULL: the
 * defaults; result may be NULL. Needs contacts and non-contacts among the
 * samples. */
ESMT_API esmt_status esmt_contact_head_train(esmt_model *model,
                                             const esmt_contact_train_options *options, int count,
                                             const int32_t *const *residues, const int *lengths,
                                             const esmt_contact_pair *contacts,
                                             size_t num_contacts,
                                             esmt_contact_train_result *result);

/* Contacts from a text file, one a line: "ID I J" (whitespace-separated,
 * I and J 1-based residue numbers of the protein whose id is ID among
 * ids[count] of lengths[count]); '#' comments and blank lines skipped.
 * Any other line is ESMT_ERR_FORMAT naming the file and line. *out is
 * freed with esmt_contact_pairs_free. */
ESMT_API esmt_status esmt_contact_pairs_read(const char *path, int count,
                                             const char *const *ids, const int *lengths,
                                             esmt_contact_pair **out, size_t *n);
ESMT_API void esmt_contact_pairs_free(esmt_contact_pair *pairs);

/* ------------------------------------------------------------------------ */
/* Embedding files: .npy streams and one safetensors file                    */
/* ------------------------------------------------------------------------ */

/* A NumPy .npy array (format 1.0, little-endian) written as a stream of
 * rows: a fixed header of ESMT_NPY_HEADER_BYTES rewritten with the row
 * count at each commit, so that the file is a valid array of every
 * committed row at all times and can be cut back to them (resume). The
 * caller opens the descriptor read-write (how a file is created or
 * re-opened without harming another is its policy) and closes it after
 * esmt_npy_stream_end; `path` only names the file in messages. */
#define ESMT_NPY_HEADER_BYTES 128

typedef enum esmt_npy_dtype {
  ESMT_NPY_F32 = 0, /* "<f4" */
  ESMT_NPY_I64 = 1  /* "<i8" */
} esmt_npy_dtype;

typedef struct esmt_npy_stream esmt_npy_stream;

/* cols 0: a 1-D array. resume_rows < 0: a new file, its header (0 rows)
 * written; >= 0: a file this stream wrote before, which must hold that
 * many committed rows (nothing is changed until esmt_npy_stream_cut). */
ESMT_API esmt_status esmt_npy_stream_start(int fd, const char *path, esmt_npy_dtype dtype,
                                           int64_t cols, int64_t resume_rows,
                                           esmt_npy_stream **out);
/* A resumed file cut back to its committed rows, positioned after them. */
ESMT_API esmt_status esmt_npy_stream_cut(esmt_npy_stream *stream);
/* Append rows (rows * max(cols, 1) elements). */
ESMT_API esmt_status esmt_npy_stream_append(esmt_npy_stream *stream, const void *data,
                                            uint64_t rows);
/* The header with the current row count, then fsync. */
ESMT_API esmt_status esmt_npy_stream_commit(esmt_npy_stream *stream);
ESMT_API uint64_t esmt_npy_stream_rows(const esmt_npy_stream *stream);
/* Free the stream (the descriptor stays the caller's). NULL accepted. */
ESMT_API void esmt_npy_stream_end(esmt_npy_stream *stream);

/* The committed rows of `count` streams, in order, into one safetensors
 * file at `path`, created new (O_EXCL, a symbolic link not followed),
 * fsync'd; tensor i is named names[i] with the stream's dtype and shape.
 * meta: meta_count key/value pairs (meta[2k], meta[2k + 1]) for the
 * header's "__metadata__". On failure `path` is removed. */
ESMT_API esmt_status esmt_npy_streams_to_safetensors(const char *path,
                                                     esmt_npy_stream *const *streams,
                                                     const char *const *names, int count,
                                                     const char *const *meta, int meta_count);

/* ------------------------------------------------------------------------ */
/* Contact-map directories and the temporaries of killed writers            */
/* ------------------------------------------------------------------------ */

/* Called with the path of each temporary removed (may be NULL). */
typedef void (*esmt_removed_fn)(const char *path, void *user);

/* Temporaries beside `out` that a writer killed before it finished left:
 * entries of out's directory named "BASE.PID.KIND", BASE out's last
 * component (trailing slashes ignored), KIND one of kinds[0..n_kinds), and
 * PID a process that no longer runs. A regular file of one link is
 * removed; a directory (not a link) only when it holds nothing but regular
 * files of one link named *.npy, *.png or index.tsv (what esmt_contact_dir
 * writes). Anything else is left alone. Returns how many were removed. */
ESMT_API int esmt_remove_dead_temporaries(const char *out, const char *const *kinds, int n_kinds,
                                          esmt_removed_fn removed, void *user);

/* A new directory of contact maps, one protein at a time: ID.npy (float32,
 * n x n, row-major) or ID.png per protein and index.tsv (a header "id length file",
 * then a line per protein in order, tab-separated; tabs and line breaks of
 * an id as spaces). File names are the ids made safe: bytes other than
 * A-Z a-z 0-9 . _ - as '_', a leading '.' as '_', at most 200 bytes, and
 * "~2", "~3", ... added to a name already taken. The directory is built
 * under "OUT.PID.tmp" beside OUT and renamed to OUT by
 * esmt_contact_dir_finish, never replacing anything, so OUT appears whole
 * or not at all; begin first removes the "OUT.PID.tmp" directories of
 * killed writers (esmt_remove_dead_temporaries). */
typedef struct esmt_contact_dir esmt_contact_dir;

/* ESMT_ERR_STATE naming out when it exists (a link included). */
ESMT_API esmt_status esmt_contact_dir_begin(const char *out, esmt_removed_fn removed, void *user,
                                            esmt_contact_dir **dir);
ESMT_API esmt_status esmt_contact_dir_add(esmt_contact_dir *dir, const char *id,
                                          const float *map, int n);
/* A new file ID.EXT (ext ".npy" or ".png"; the same safe, unique name)
 * in the directory, listed in index.tsv with n; *fd is open read-write for
 * the caller to write, fsync and close before esmt_contact_dir_finish
 * (esmt_contact_dir_add is this with the map as .npy). */
ESMT_API esmt_status esmt_contact_dir_add_file(esmt_contact_dir *dir, const char *id, int n,
                                               const char *ext, int *fd);
/* index.tsv, every file fsync'd, the rename to OUT (ESMT_ERR_STATE when OUT
 * appeared meanwhile). The directory stays open for esmt_contact_dir_close. */
ESMT_API esmt_status esmt_contact_dir_finish(esmt_contact_dir *dir);
/* Free; unless finished, the temporary directory is removed. NULL accepted. */
ESMT_API void esmt_contact_dir_close(esmt_contact_dir *dir);

/* ------------------------------------------------------------------------ */
/* Tables of one's own columns (variants, labels)                           */
/* ------------------------------------------------------------------------ */

/* A CSV (RFC 4180: quoted fields may hold commas, doubled quotes and line
 * breaks) or TSV (a row a line, fields split at tabs) table with a header
 * row, plain or gzip, or standard input ("-"), read row by row with every
 * column kept: the reader ingest uses for tables of proteins. Refused,
 * naming the file and the line: a row whose field count differs from the
 * header's, malformed or unterminated quoting, a NUL byte, a field longer
 * than 16 MiB. A UTF-8 byte order mark and blank lines are skipped. */
typedef struct esmt_table_reader esmt_table_reader;

typedef enum esmt_table_format {
  ESMT_TABLE_BY_NAME = 0,  /* TSV when the name ends in .tsv or .tab (.gz after), else CSV */
  ESMT_TABLE_READ_CSV = 1,
  ESMT_TABLE_READ_TSV = 2
} esmt_table_format;

ESMT_API esmt_status esmt_table_reader_open(const char *path, esmt_table_format format,
                                            esmt_table_reader **out);
/* The next data row: *fields[*count] (count: the header's columns; valid
 * until the next call), *got 0 at the end of the table. */
ESMT_API esmt_status esmt_table_reader_next(esmt_table_reader *reader,
                                            const char *const **fields, int *count, int *got);
/* progress (NULL: none) is called after each read of the input (stage
 * "read", unit "bytes", items: rows so far); non-zero cancels the read
 * with ESMT_ERR_CANCELLED. */
ESMT_API void esmt_table_reader_set_progress(esmt_table_reader *reader,
                                             esmt_progress_fn progress, void *progress_user);
/* The header's names (valid until close) once the first row was asked for;
 * returns how many (0 before). */
ESMT_API int esmt_table_reader_columns(const esmt_table_reader *reader,
                                       const char *const **names);
/* The header's column `name`: an exact match, else the only one equal
 * ignoring case; -1 none, -2 named twice. */
ESMT_API int esmt_table_reader_column(const esmt_table_reader *reader, const char *name);
/* The line where the last row returned starts (1-based). */
ESMT_API uint64_t esmt_table_reader_line(const esmt_table_reader *reader);
ESMT_API void esmt_table_reader_close(esmt_table_reader *reader);

/* ------------------------------------------------------------------------ */
/* Embedding output directories (embed.json, ids.txt, the arrays)            */
/* ------------------------------------------------------------------------ */

/* A directory of embeddings written protein by protein and committed in
 * steps, so that an interrupted writer continues where it stopped
 * (docs/formats.md, "Embedding output directory"): embed.json (the
 * request, the committed counts, the files it created), ids.txt,
 * lengths.npy, {mean,cls,per_tok}.layer<L>.npy, per_tok.offsets.npy, and
 * with safetensors embeddings.safetensors at the end. Files are created
 * new (never through a link), re-opened only as the ones the record names,
 * and nothing in the directory is changed when it is refused. The caller
 * holds the directory's run.lock (esmt_run_lock_take) from
 * esmt_embed_dir_check to esmt_embed_dir_close. */
typedef struct esmt_embed_dir esmt_embed_dir;

typedef enum esmt_embed_include {
  ESMT_EMBED_MEAN = 1,      /* mean.layer<L>.npy */
  ESMT_EMBED_PER_TOKEN = 2, /* per_tok.layer<L>.npy and per_tok.offsets.npy */
  ESMT_EMBED_CLS = 4,       /* cls.layer<L>.npy */
  ESMT_EMBED_ATTENTION = 8  /* attn.layer<L>.npy and attn.offsets.npy (issue #42) */
} esmt_embed_include;

typedef struct esmt_embed_dir_options {
  uint32_t struct_size;
  const char *out;          /* the directory: new, empty, or one this API wrote */
  esmt_model *model;        /* depth, width, window and the checksum of its weights */
  const char *model_path;   /* recorded (its real path) */
  const char *model_kind;   /* recorded: "huggingface", "esmtrain" */
  const char *backend;      /* recorded */
  const char *input;        /* FASTA file, dataset directory or "-": its checksum */
  const char *split;        /* recorded; NULL = "train" */
  int num_layers;           /* representations, each in 0..L (no -1) */
  const int *layers;
  unsigned include;         /* esmt_embed_include bits */
  esmt_long_policy long_policy;
  int stride;               /* windows: residues between starts (0: half the window) */
  int safetensors;          /* 1: embeddings.safetensors at the end */
} esmt_embed_dir_options;

#define ESMT_EMBED_DIR_OPTIONS_INIT                                                     \
  { sizeof(esmt_embed_dir_options), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, \
    ESMT_EMBED_MEAN, ESMT_LONG_TRUNCATE, 0, 0 }

typedef enum esmt_embed_dir_state {
  ESMT_EMBED_DIR_NEW = 0,       /* the directory is new or empty */
  ESMT_EMBED_DIR_RESUME = 1,    /* an unfinished output of the same request, model, input */
  ESMT_EMBED_DIR_RESTART = 2,   /* an unfinished output that committed nothing: starts anew */
  ESMT_EMBED_DIR_COMPLETE = 3   /* a finished output of the same request: nothing to do */
} esmt_embed_dir_state;

typedef struct esmt_embed_dir_status {
  uint32_t struct_size;
  esmt_embed_dir_state state;
  uint64_t proteins, residues, truncated, windowed, unknown_residues, empty;
  int staging_removed;      /* COMPLETE: staging .npy arrays an interrupted run left, removed */
} esmt_embed_dir_status;

#define ESMT_EMBED_DIR_STATUS_INIT \
  { sizeof(esmt_embed_dir_status), ESMT_EMBED_DIR_NEW, 0, 0, 0, 0, 0, 0, 0 }

/* Inspect `out` for this request: nothing is created or changed (except
 * the staging arrays a finished safetensors output left). Another request
 * over an existing output, a damaged record or files the API did not
 * write are refused (ESMT_ERR_STATE or ESMT_ERR_IO) naming what differs. */
ESMT_API esmt_status esmt_embed_dir_open(const esmt_embed_dir_options *options,
                                         esmt_embed_dir **out);
/* The same inspection again (under the caller's run.lock). */
ESMT_API esmt_status esmt_embed_dir_check(esmt_embed_dir *dir);
ESMT_API esmt_status esmt_embed_dir_status_get(const esmt_embed_dir *dir,
                                               esmt_embed_dir_status *status);
/* RESUME: the id of the next committed protein as the input gives it
 * again (every committed one, in order, before esmt_embed_dir_begin). */
ESMT_API esmt_status esmt_embed_dir_skip(esmt_embed_dir *dir, const char *id);
/* Create the files (NEW; RESTART after removing the attempt's own files)
 * or re-open them cut back to the commit (RESUME, once the skipped ids
 * matched the committed ones). */
ESMT_API esmt_status esmt_embed_dir_begin(esmt_embed_dir *dir);
/* `count` proteins (ids[i], results[i] of esmt_embed with this request's
 * layers and per_token) appended; unknown_residues: counted by the reader. */
ESMT_API esmt_status esmt_embed_dir_append(esmt_embed_dir *dir, int count,
                                           const char *const *ids,
                                           const esmt_embedding *results,
                                           uint64_t unknown_residues);
/* Everything appended made durable, then recorded in embed.json. */
ESMT_API esmt_status esmt_embed_dir_commit(esmt_embed_dir *dir);
/* After the last commit: embeddings.safetensors (safetensors), the record
 * marked complete, the staging arrays removed. */
ESMT_API esmt_status esmt_embed_dir_finish(esmt_embed_dir *dir);
/* Close the files; what was not committed is cut on resume. NULL accepted. */
ESMT_API void esmt_embed_dir_close(esmt_embed_dir *dir);

#endif /* ESMTRAIN_INFER_H */
