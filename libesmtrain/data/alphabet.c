/* SPDX-License-Identifier: MIT */
/* The fixed 33-token ESM-2 alphabet (docs/esm2.md). */
#include <ctype.h>

#include "esmtrain/esmtrain.h"
#include "fasta_stream.h"
#include "internal.h"

static const char *const k_tokens[ESMT_VOCAB_SIZE] = {
    "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R",
    "T",     "I",     "D",     "P",     "K", "Q", "N", "F", "Y", "M", "H",
    "W",     "C",     "X",     "B",     "U", "Z", "O", ".", "-", "<null_1>", "<mask>"};

/* ids 4..28 are single letters, then '.' 29 and '-' 30; a byte table so
 * that ingest maps residues with one load each. */
static signed char g_table[256];
static int g_table_ready;

static void build_table(void) {
  static const char letters[] = "LAGVSERTIDPKQNFYMHWCXBUZO";
  for (int i = 0; i < 256; i++) g_table[i] = -1;
  for (int i = 0; letters[i]; i++) {
    g_table[(unsigned char)letters[i]] = (signed char)(4 + i);
    g_table[(unsigned char)tolower(letters[i])] = (signed char)(4 + i);
  }
  g_table['.'] = 29;
  g_table['-'] = 30;
  g_table_ready = 1; /* benign race: every thread writes the same bytes */
}

int esmt_token_id(int c) {
  if (c < 0 || c > 255) return -1;
  if (!g_table_ready) build_table();
  return g_table[c];
}

const char *esmt_token_string(int id) {
  return (id >= 0 && id < ESMT_VOCAB_SIZE) ? k_tokens[id] : NULL;
}

size_t esmt_tokenize_letters(const char *text, size_t len, int32_t *ids, uint64_t *unknown) {
  for (size_t i = 0; i < len; i++) {
    const int c = (unsigned char)text[i];
    int id = esmt_token_id(c);
    if (id < 0) {
      const int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '*';
      if (!letter) return i;
      id = ESMT_TOKEN_UNK;
      ++*unknown;
    }
    ids[i] = id;
  }
  return len;
}

esmt_status esmt_tokenize(const char *text, size_t len, int32_t *ids, size_t cap,
                          uint64_t *unknown) {
  const char *fn = "esmt_tokenize";
  ESMT_CHECK_ARG(text || !len, fn, "text must not be NULL");
  ESMT_CHECK_ARG(ids || !len, fn, "ids must not be NULL");
  if (cap < len)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %zu letters into %zu ids", fn, len, cap);
  uint64_t unk = 0;
  const size_t at = esmt_tokenize_letters(text, len, ids, &unk);
  if (unknown) *unknown = unk;
  if (at < len) {
    const unsigned char c = (unsigned char)text[at];
    if (c >= 0x20 && c < 0x7f)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: character '%c' at position %zu is not "
                       "an amino-acid letter", fn, c, at + 1);
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: byte 0x%02x at position %zu is not an "
                     "amino-acid letter", fn, c, at + 1);
  }
  return ESMT_OK;
}
