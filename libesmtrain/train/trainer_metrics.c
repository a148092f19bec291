/* SPDX-License-Identifier: MIT */
/* The trainer's metrics files (metrics.jsonl, TensorBoard): one place that
 * writes a step's or an evaluation's figures into the run, used by the
 * training loop (trainer.c) and by evaluations (trainer_eval.c). Only rank
 * 0 of a run writes; a failure turns the files off and training goes on. */
#include "trainer.h"

#include "metrics_sink.h"

void esmt_trainer_write_metrics(esmt_trainer *t, const esmt_train_metrics *tm,
                                const esmt_eval_metrics *em) {
  if (!t->run_dir || t->o.metrics_files_off || esmt_dp_rank(t->dp) != 0) return;
  esmt_status st = esmt_trainer_claim_run(t, "metrics files");
  if (st) { /* e.g. an evaluation by a trainer into another run: it writes nothing there */
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "%s", esmt_last_error());
    return;
  }
  if (!t->sink_opened) { /* once: a failure to open is not retried every step */
    t->sink_opened = 1;
    st = esmt_metrics_sink_open(t->run_dir, t->sink_start_step, &t->sink);
  }
  if (!st && tm) st = esmt_metrics_sink_train(t->sink, tm, t->o.max_steps);
  if (!st && em) st = esmt_metrics_sink_eval(t->sink, em);
  /* each file fails once and is then off: training goes on */
  if (st) esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "metrics files: %s (training "
                          "goes on)", esmt_last_error());
}
