/* SPDX-License-Identifier: MIT */
/* HF-style initialisation: normal(0, 0.02) for every Linear weight and the
 * embedding, zero biases, LayerNorm weight 1 / bias 0, <pad> row zero.
 * Each tensor draws from its own stream keyed by (seed, tensor index), so
 * a tensor's values do not depend on the others' sizes. The copy into the
 * master weights, wherever the parameter memory keeps them, is here too:
 * setting a tensor (model_api.c) and initialising one are the two users. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "param_layer.h"

esmt_status esmt_master_copy(esmt_model *m, void *host, void *buf, uint64_t bytes, int to_master) {
  return m->mem.layer->copy(&m->mem, host, buf, bytes, to_master); /* wherever buf lives */
}

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so log() below is finite. */
static double uniform01(uint64_t *state) {
  return ((double)(splitmix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

static int ends_with(const char *s, const char *suffix) {
  size_t ls = strlen(s), lx = strlen(suffix);
  return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* Fill n values of the kind the tensor's name says. */
static void fill_tensor(const esmt_tensor_info *t, int index, uint64_t seed, float *out) {
  int is_norm = strstr(t->name, "LayerNorm") || strstr(t->name, "layer_norm");
  if (ends_with(t->name, ".bias")) {
    memset(out, 0, t->numel * sizeof *out);
    return;
  }
  if (is_norm) {
    for (uint64_t i = 0; i < t->numel; i++) out[i] = 1.0f;
    return;
  }
  uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(index + 1));
  /* LoRA as peft starts it: B zero (the adapted map is the base one), A
   * kaiming-uniform with a = sqrt(5), i.e. uniform in +-1/sqrt(in) */
  if (strstr(t->name, ".lora_B.")) {
    memset(out, 0, t->numel * sizeof *out);
    return;
  }
  if (strstr(t->name, ".lora_A.")) {
    const double bound = 1.0 / sqrt((double)t->shape[1]);
    for (uint64_t i = 0; i < t->numel; i++)
      out[i] = (float)(bound * (2.0 * uniform01(&state) - 1.0));
    return;
  }
  for (uint64_t i = 0; i < t->numel; i += 2) {
    /* Box-Muller: two normals per pair of uniforms. */
    double r = sqrt(-2.0 * log(uniform01(&state))), th = 6.283185307179586 * uniform01(&state);
    out[i] = (float)(0.02 * r * cos(th));
    if (i + 1 < t->numel) out[i + 1] = (float)(0.02 * r * sin(th));
  }
}

esmt_status esmt_model_init_params(esmt_model *m, uint64_t seed) {
  uint64_t largest = 0;
  for (int i = 0; i < m->layout.count; i++)
    if (m->layout.tensors[i].numel > largest) largest = m->layout.tensors[i].numel;
  float *host = malloc(largest * sizeof *host);
  if (!host)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "model init: out of host memory (%llu floats)",
                     (unsigned long long)largest);
  esmt_status st = ESMT_OK;
  for (int i = 0; i < m->layout.count && st == ESMT_OK; i++) {
    const esmt_tensor_info *t = &m->layout.tensors[i];
    fill_tensor(t, i, seed, host);
    if (t->offset == m->layout.embed) /* the <pad> row */
      memset(host + (size_t)ESMT_TOKEN_PAD * m->d, 0, (size_t)m->d * sizeof *host);
    /* The host buffer is reused: the copy completes before refilling it.
     * A sharded master (ZeRO) takes what this rank holds of the tensor. */
    st = esmt_param_master_sharded(&m->mem)
             ? esmt_param_write_host(&m->mem, host, t->offset, t->numel)
             : esmt_master_copy(m, host, m->mem.master + t->offset, t->numel * sizeof *host, 1);
    if (st) st = esmt_fail_prefix(st, "model init: copying %s: ", t->name);
  }
  free(host);
  return st;
}
