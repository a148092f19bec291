/* SPDX-License-Identifier: MIT */
/* Embeddings of protein strings through the public API: tokenize, embed
 * (a protein longer than the model's window is averaged over overlapping
 * windows, as fair-esm's long-protein rule), print each mean vector's
 * norm and the pseudo-log-likelihood of the first protein.
 * Usage: embed MODEL   (a run directory or a checkpoint directory;
 * esmt_model_import_hf reads a Hugging Face ESM-2 directory instead). */
#include <esmtrain/esmtrain.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, esmt_status st) {
  fprintf(stderr, "embed: %s: %s (%s)\n", what, esmt_last_error(), esmt_status_string(st));
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) return fprintf(stderr, "usage: embed MODEL\n"), 2;
  esmt_context *ctx = NULL;
  esmt_model *model = NULL;
  esmt_status st = esmt_context_create(NULL, &ctx);
  if (st) return fail("context", st);
  if ((st = esmt_model_create_from_checkpoint(ctx, argv[1], &model))) return esmt_context_destroy(ctx), fail(argv[1], st);
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  esmt_model_get_config(model, &cfg);

  /* Three proteins; the last is longer than the window (max_positions - 2). */
  const int long_len = 2 * cfg.max_positions + 17;
  char *long_one = malloc((size_t)long_len + 1);
  if (!long_one) return 1;
  for (int i = 0; i < long_len; i++) long_one[i] = "MKTAYIAKQRQISFVKSHFSRQ"[i % 22];
  long_one[long_len] = 0;
  const char *text[3] = {"MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ", "GLSDGEWQQVLNVWGKVEAD", long_one};
  int32_t *ids[3] = {NULL, NULL, NULL};
  int64_t len[3];
  esmt_embedding out[3] = {ESMT_EMBEDDING_INIT, ESMT_EMBEDDING_INIT, ESMT_EMBEDDING_INIT};
  for (int i = 0; i < 3 && !st; i++) {
    len[i] = (int64_t)strlen(text[i]);
    if (!(ids[i] = malloc((size_t)len[i] * sizeof *ids[i]))) return 1;
    st = esmt_tokenize(text[i], (size_t)len[i], ids[i], (size_t)len[i], NULL);
  }
  esmt_embed_request rq = ESMT_EMBED_REQUEST_INIT;
  rq.long_policy = ESMT_LONG_WINDOWS;
  if (!st) st = esmt_embed(model, &rq, 3, (const int32_t *const *)ids, len, out);
  for (int i = 0; i < 3 && !st; i++) {
    double norm = 0;
    for (int c = 0; c < cfg.hidden_size; c++) norm += (double)out[i].mean[c] * out[i].mean[c];
    printf("protein %d: %lld residues, %d window%s, |mean| = %.4f\n", i, (long long)len[i],
           out[i].pieces, out[i].pieces == 1 ? "" : "s", sqrt(norm));
  }
  double pll = 0;
  if (!st && !(st = esmt_score_pll(model, ids[0], (int)len[0], 4096, &pll)))
    printf("protein 0: pseudo-log-likelihood %.4f\n", pll);
  if (st) fail("inference", st);
  esmt_embedding_release(out, 3);
  for (int i = 0; i < 3; i++) free(ids[i]);
  free(long_one);
  esmt_model_destroy(model);
  esmt_context_destroy(ctx);
  return st ? 1 : 0;
}
