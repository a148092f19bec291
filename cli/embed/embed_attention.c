/* SPDX-License-Identifier: MIT */
/* `embed --include attention`: before anything is created, the size of
 * the maps the run will write (a pass over the input's lengths; not for
 * standard input, which cannot be read twice), the memory one protein's
 * maps take while computed (esmt_plan_attention_maps), a warning over
 * EMBED_ATTENTION_WARN_BYTES, and the proteins over --max-attention-bytes
 * refused up front, each named with its length and bytes; from standard
 * input, chunk by chunk as they are read. */
#include <stdio.h>
#include <string.h>

#include "embed.h"

/* A warning above this many bytes of maps in all (they go to disk). */
#define EMBED_ATTENTION_WARN_BYTES (4ull << 30)

typedef struct sizes {
  uint64_t proteins, total, largest, over;
  int64_t largest_len;
  char largest_id[256], first_over[256];
  int64_t first_over_len;
  uint64_t first_over_bytes;
} sizes;

static int measure(const embed_options *o, esmt_model *m, sizes *z) {
  esmt_sequence_reader *r = NULL;
  esmt_status st = esmt_sequence_reader_open(o->input, o->split, &r);
  if (st) return cli_error("embed: input", st), -1;
  esmt_sequence q = ESMT_SEQUENCE_INIT;
  for (;;) {
    int got = 0;
    uint64_t b = 0;
    if ((st = esmt_sequence_reader_next(r, &q, &got)) ||
        (got && (st = esmt_embed_attention_bytes(m, o->nl, (int64_t)q.length, &b)))) {
      cli_error("embed: input", st);
      esmt_sequence_reader_close(r);
      return -1;
    }
    if (!got || cli_signal_caught()) break;
    z->proteins++;
    z->total += b;
    if (b > z->largest || z->proteins == 1) {
      z->largest = b;
      z->largest_len = (int64_t)q.length;
      snprintf(z->largest_id, sizeof z->largest_id, "%s", cli_esc(q.id));
    }
    if (o->max_attention_bytes && b > o->max_attention_bytes && !z->over++) {
      snprintf(z->first_over, sizeof z->first_over, "%s", cli_esc(q.id));
      z->first_over_len = (int64_t)q.length;
      z->first_over_bytes = b;
    }
  }
  esmt_sequence_reader_close(r);
  return 0;
}

int embed_attention_estimate(const embed_options *o, esmt_model *m) {
  char a[32], b[32], c[32];
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_model_get_config(m, &mc);
  const uint64_t cap = o->max_attention_bytes;
  if (!strcmp(o->input, "-")) {
    if (!o->quiet)
      fprintf(stderr, "embed: attention maps: %d layer%s x %d heads x residues^2 fp32 per "
              "protein (standard input: no estimate ahead; each protein over %s is refused)\n",
              o->nl, o->nl == 1 ? "" : "s", mc.num_heads, cap ? cli_bytes(cap, a, sizeof a) : "no cap");
    return 0;
  }
  sizes z = {0};
  if (measure(o, m, &z)) return 1;
  const int T = (int)(z.largest_len < o->window ? z.largest_len : o->window) + 2;
  uint64_t dev = 0, host = 0;
  esmt_plan_attention_maps(&mc, 1, T, &dev, &host);
  if (!o->quiet)
    fprintf(stderr, "embed: attention maps: %llu proteins, %s to write (%d layer%s x %d heads "
            "x residues^2 fp32); the largest, '%s' (%lld residues), %s on disk and %s of memory "
            "while computed\n", (unsigned long long)z.proteins, cli_bytes(z.total, a, sizeof a),
            o->nl, o->nl == 1 ? "" : "s", mc.num_heads, z.largest_id, (long long)z.largest_len,
            cli_bytes(z.largest, b, sizeof b), cli_bytes(host + dev, c, sizeof c));
  if (z.over) {
    fprintf(stderr, "esmtrain-example: embed: protein '%s' (%lld residues): its attention maps "
            "take %s, over --max-attention-bytes %s (%llu proteins are): nothing was written; "
            "raise the cap, ask for fewer layers or leave those proteins out\n", z.first_over,
            (long long)z.first_over_len, cli_bytes(z.first_over_bytes, a, sizeof a),
            cli_bytes(cap, b, sizeof b), (unsigned long long)z.over);
    return 1;
  }
  if (z.total > EMBED_ATTENTION_WARN_BYTES)
    fprintf(stderr, "esmtrain-example: embed: warning: the attention maps take %s on disk "
            "(over %s)\n", cli_bytes(z.total, a, sizeof a),
            cli_bytes(EMBED_ATTENTION_WARN_BYTES, b, sizeof b));
  return 0;
}

int embed_attention_check_chunk(const embed_options *o, esmt_model *m, const embed_chunk *c) {
  char a[32], b[32];
  for (int i = 0; i < c->n && o->max_attention_bytes; i++) {
    uint64_t bytes = 0;
    if (esmt_embed_attention_bytes(m, o->nl, c->lengths[i], &bytes) == ESMT_OK &&
        bytes > o->max_attention_bytes) {
      fprintf(stderr, "esmtrain-example: embed: protein '%s' (%lld residues): its attention "
              "maps take %s, over --max-attention-bytes %s\n", cli_esc(c->ids[i]),
              (long long)c->lengths[i], cli_bytes(bytes, a, sizeof a),
              cli_bytes(o->max_attention_bytes, b, sizeof b));
      return 1;
    }
  }
  return 0;
}
