/* SPDX-License-Identifier: MIT */
/* API misuse cases for the bad-input corpus: `api_misuse NAME` makes one
 * wrong call sequence against the public API, prints "status N: message"
 * and exits with the status (0 if the library accepted it, which the
 * corpus counts as a failure). Backends come from ESMT_BACKEND_DIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

static esmt_context *ctx(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = getenv("ESMT_BACKEND_DIR");
  o.backend = "cpu";
  o.num_threads = 1;
  esmt_context *c = NULL;
  if (esmt_context_create(&o, &c)) {
    fprintf(stderr, "setup: %s\n", esmt_last_error());
    exit(100);
  }
  return c;
}

static esmt_model *tiny(esmt_context *c) {
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  mc.num_layers = 1; mc.hidden_size = 16; mc.num_heads = 2; mc.max_positions = 32;
  esmt_model *m = NULL;
  if (esmt_model_create(c, &mc, 1, &m)) {
    fprintf(stderr, "setup: %s\n", esmt_last_error());
    exit(100);
  }
  return m;
}

static esmt_status empty_next(void *u, esmt_batch *b) {
  (void)u; (void)b;
  return ESMT_ERR_STATE;
}

static esmt_status run(const char *name) {
  esmt_status st = ESMT_ERR_INTERNAL;
  if (!strcmp(name, "null-context")) {
    esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
    esmt_model *m = NULL;
    return esmt_model_create(NULL, &mc, 1, &m);
  }
  if (!strcmp(name, "null-out")) return esmt_config_create(NULL);
  if (!strcmp(name, "old-struct-size")) {
    esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
    o.struct_size = 8; /* a caller built against a much older header */
    esmt_context *c = NULL;
    return esmt_context_create(&o, &c);
  }
  if (!strcmp(name, "unknown-backend")) {
    esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
    o.backend_path = getenv("ESMT_BACKEND_DIR");
    o.backend = "tpu";
    esmt_context *c = NULL;
    return esmt_context_create(&o, &c);
  }
  esmt_context *c = ctx();
  if (!strcmp(name, "unknown-option")) {
    st = esmt_context_set_option(c, "log_levle", "debug");
  } else if (!strcmp(name, "heads-do-not-divide")) {
    esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
    mc.hidden_size = 32; mc.num_heads = 3;
    esmt_model *m = NULL;
    st = esmt_model_create(c, &mc, 1, &m);
  } else if (!strcmp(name, "unknown-model-preset")) {
    esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
    st = esmt_model_config_preset("esm2_t6_8", &mc);
  } else {
    esmt_model *m = tiny(c);
    int32_t tok[8] = {0, 5, 6, 99, 7, 2, 1, 1}, lab[8] = {-100, -100, -100, 5, -100, -100, -100, -100};
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = 1; b.seq_len = 8; b.tokens = tok; b.labels = lab;
    esmt_forward_result fr = ESMT_FORWARD_RESULT_INIT;
    esmt_trainer_options to = ESMT_TRAINER_OPTIONS_INIT;
    esmt_loss_scale_config to_ls = ESMT_LOSS_SCALE_CONFIG_INIT;
    to.loss_scale = &to_ls;
    esmt_batch_source src = {sizeof src, NULL, empty_next, NULL, NULL, NULL, NULL};
    esmt_trainer *t = NULL;
    if (!strcmp(name, "token-out-of-range")) {
      st = esmt_model_forward(m, &b, &fr, NULL);
    } else if (!strcmp(name, "too-long-batch")) {
      b.seq_len = 64; /* > max_positions 32 */
      int32_t big[64] = {0};
      b.tokens = big; b.labels = NULL;
      st = esmt_model_forward(m, &b, &fr, NULL);
    } else if (!strcmp(name, "packed-overlap")) {
      /* two packed sequences in one row of 8, the second starting inside the first */
      int32_t pt[8] = {0, 5, 6, 2, 0, 7, 2, 1}, st0[2] = {0, 2}, ln[2] = {4, 3};
      b.tokens = pt; b.labels = NULL;
      b.num_segments = 2; b.seg_start = st0; b.seg_len = ln;
      st = esmt_model_forward(m, &b, &fr, NULL);
    } else if (!strcmp(name, "recompute-null-model")) {
      st = esmt_model_set_recompute(NULL, 1);
    } else if (!strcmp(name, "backward-before-forward")) {
      st = esmt_model_backward(m);
    } else if (!strcmp(name, "unknown-tensor")) {
      float x[4];
      st = esmt_model_read_tensor(m, "esm.encoder.layer.9.attention.self.query.weight",
                                  ESMT_BUF_PARAMS, x, 4);
    } else if (!strcmp(name, "tensor-wrong-size")) {
      float x[4];
      st = esmt_model_read_tensor(m, "lm_head.bias", ESMT_BUF_PARAMS, x, 4);
    } else if (!strcmp(name, "negative-lr")) {
      esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
      st = esmt_model_optimizer_step(m, &ac, -1.0, 1.0, 1);
    } else if (!strcmp(name, "trainer-no-next")) {
      src.next = NULL;
      st = esmt_trainer_create(m, &to, &src, &t);
    } else if (!strcmp(name, "trainer-exhausted")) {
      if (!(st = esmt_trainer_create(m, &to, &src, &t))) {
        esmt_train_metrics mt = {.struct_size = sizeof mt};
        st = esmt_trainer_step(t, &mt);
      }
    } else if (!strcmp(name, "save-without-run-dir")) {
      if (!(st = esmt_trainer_create(m, &to, &src, &t))) st = esmt_trainer_save(t, NULL, 0);
    } else if (!strcmp(name, "resume-missing")) {
      if (!(st = esmt_trainer_create(m, &to, &src, &t)))
        st = esmt_trainer_resume(t, "/nonexistent/esmtrain-run");
    } else if (!strcmp(name, "bad-loss-scale")) {
      to_ls.enabled = 1;
      to_ls.backoff = 2;
      st = esmt_trainer_create(m, &to, &src, &t);
    } else if (!strcmp(name, "metrics-struct-too-small")) {
      if (!(st = esmt_trainer_create(m, &to, &src, &t))) {
        esmt_train_metrics mt = {.struct_size = 4};
        st = esmt_trainer_step(t, &mt);
      }
    } else if (!strcmp(name, "loader-missing-dir")) {
      esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
      lo.dir = "/nonexistent/esmtrain-data";
      esmt_loader *l = NULL;
      st = esmt_loader_create(&lo, &l);
    } else if (!strcmp(name, "config-wrong-type")) {
      esmt_config *cfg = NULL;
      if (!(st = esmt_config_create(&cfg))) {
        int64_t v;
        st = esmt_config_get_int(cfg, "schedule.kind", &v);
        esmt_config_destroy(cfg);
      }
    } else {
      fprintf(stderr, "api_misuse: unknown case '%s'\n", name);
      exit(101);
    }
    esmt_trainer_destroy(t);
    esmt_model_destroy(m);
  }
  esmt_context_destroy(c);
  return st;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: api_misuse CASE\n");
    return 101;
  }
  esmt_status st = run(argv[1]);
  printf("status %d (%s): %s\n", (int)st, esmt_status_string(st), st ? esmt_last_error() : "");
  return (int)st;
}
