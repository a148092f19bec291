/* SPDX-License-Identifier: MIT */
/* The tiny model and cpu context the trainer tests share: a 2-thread cpu
 * context (cmocka group setup/teardown), a 2-layer d=32 model seeded 7,
 * and a host copy of its fp32 weights. */
#ifndef ESMT_TEST_TRAINER_FIXTURE_H
#define ESMT_TEST_TRAINER_FIXTURE_H

#include "esmtrain/esmtrain.h"

extern esmt_context *g_ctx;

int fixture_setup(void **state);
int fixture_teardown(void **state);
esmt_model *fixture_model(void);
/* A cpu context of `threads` threads and the fixture's model in it. */
esmt_context *fixture_context(int threads);
esmt_model *fixture_model_in(esmt_context *ctx);
float *fixture_weights(esmt_model *m); /* malloc'ed */

#endif
