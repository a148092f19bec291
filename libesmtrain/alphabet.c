/* The fixed 33-token ESM-2 alphabet (shared/reference/esm2-spec.md). */
#include <ctype.h>

#include "internal.h"

static const char *const k_tokens[ESMT_VOCAB_SIZE] = {
    "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R",
    "T",     "I",     "D",     "P",     "K", "Q", "N", "F", "Y", "M", "H",
    "W",     "C",     "X",     "B",     "U", "Z", "O", ".", "-", "<null_1>", "<mask>"};

int esmt_token_id(int c) {
  /* ids 4..28 are single letters, then '.' 29 and '-' 30 */
  static const char letters[] = "LAGVSERTIDPKQNFYMHWCXBUZO";
  if (c == '.') return 29;
  if (c == '-') return 30;
  if (c < 0 || c > 127 || !isalpha(c)) return -1;
  c = toupper(c);
  for (int i = 0; letters[i]; i++)
    if (letters[i] == c) return 4 + i;
  return -1;
}

const char *esmt_token_string(int id) {
  return (id >= 0 && id < ESMT_VOCAB_SIZE) ? k_tokens[id] : NULL;
}
