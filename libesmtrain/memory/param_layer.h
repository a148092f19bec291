/* The operations of the parameter memory (param_memory.h) that depend on
 * where the buffers live, as a table with two implementations:
 * esmt_device_layer (param_memory.c) and esmt_offload_layer (offload.c, a
 * layer over the device one). Callers dispatch through m->mem.layer and
 * never test which layer they have. */
#ifndef ESMTRAIN_PARAM_LAYER_H
#define ESMTRAIN_PARAM_LAYER_H

#include "model.h"

typedef struct esmt_param_layer {
  const char *name; /* "device", "offload" */
  /* The compute copy of the weights [off, off + count) from the master
   * (the half copy; under offload the upload, and the fp32 LayerNorm w/b). */
  esmt_status (*sync_compute)(esmt_model *m, uint64_t off, uint64_t count);
  /* Copy `bytes` between host memory and `buf`, a point inside one of the
   * flat buffers (master, gradients, moments) wherever that lives. */
  esmt_status (*copy)(esmt_model *m, void *host, void *buf, uint64_t bytes, int to_buf);
  /* The device gradients changed (zero_grad, backward, a write). */
  void (*grads_changed)(esmt_model *m);
  /* Backward: the gradients [from, layout.total) are final. */
  esmt_status (*grads_ready)(esmt_model *m, uint64_t from);
  /* The trainer's last micro-batch of an update: arm before its backward,
   * finish (or cancel, on an error) after it. */
  esmt_status (*arm)(esmt_model *m);
  esmt_status (*finish)(esmt_model *m);
  void (*cancel)(esmt_model *m);
  /* Sum of squares of all gradients (fp32, deterministic). */
  esmt_status (*grad_sumsq)(esmt_model *m, float *sum);
  /* One optimizer step over the held moments (AdamW: aw, Lion: al; the
   * other NULL; their buffer pointers are filled here) and the compute
   * copy refreshed. */
  esmt_status (*step)(esmt_model *m, esmtb_adamw_args *aw, esmtb_lion_args *al);
  /* Free what the layer allocated (the device may be gone: m->dev NULL). */
  void (*release)(esmt_model *m);
} esmt_param_layer;

ESMT_HIDDEN extern const esmt_param_layer esmt_device_layer;
ESMT_HIDDEN extern const esmt_param_layer esmt_offload_layer;

/* During esmt_model_create: the layer the options ask for (offload or the
 * device), its buffers allocated and the gradients and moments zeroed.
 * The model's layout, dtype and optimizer are set. */
struct esmt_offload_options;
ESMT_HIDDEN esmt_status esmt_param_memory_setup(esmt_model *m,
                                                const struct esmt_offload_options *o);

/* A device allocation for the model, failing with its name, size and the
 * model's out-of-memory advice. */
ESMT_HIDDEN esmt_status esmt_param_dev_alloc(esmt_model *m, uint64_t bytes, void **out,
                                             const char *what);

#endif
