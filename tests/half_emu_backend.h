/* SPDX-License-Identifier: MIT */
/* A test-only backend for the core's half-precision paths: the cpu
 * backend's table with F16/BF16 caps added. Every ESM-2 op checks that
 * each pointer lies, aligned, inside the model buffer its role needs
 * (activation arena, params_lowp, fp32 params, fp32 grads) for the byte
 * count its shape and dtype imply, and that the dtype is the model's. Half
 * ops are then emulated: inputs widened to fp32 temporaries, the cpu op
 * run in fp32, outputs rounded back; so results carry half-precision
 * storage rounding and the core's data flow can be checked numerically. */
#ifndef HALF_EMU_BACKEND_H
#define HALF_EMU_BACKEND_H

#include "esmtrain/backend.h"
#include "ops_table.h"
#include "model.h"

typedef struct half_emu_stats {
  uint64_t ops;              /* ESM-2 op calls checked */
  uint64_t half_ops;         /* ... of them in F16/BF16 */
  uint64_t gemm_c_f32;       /* gemms with c_f32 = 1 */
  uint64_t converts;         /* convert calls (weight copy refreshes) */
  uint64_t adamw_lowp;       /* adamw calls that refreshed params_lowp */
  uint64_t attn_bwd_nondet;  /* attention_backward calls with nondeterministic = 1 */
  uint64_t problems;         /* failed checks */
  char first_problem[512];
} half_emu_stats;

/* The table: `cpu`'s ops wrapped, caps = cpu caps | `extra_caps`, handed
 * to the core as ABI 2 groups (backend_tables.h). Static storage: one
 * table per process. */
const esmtb_ops *half_emu_ops(const esmtb_ops *cpu, uint32_t extra_caps);

/* Check role-specific pointers against this model's buffers from now on
 * (NULL: only check that pointers lie inside some allocation). */
void half_emu_watch(const esmt_model *m);

/* ctx's backend replaced by an entry with this table (the cpu backend's
 * ops, F16 and BF16 caps) until half_emu_uninstall puts the
 * real one back. One at a time. */
void half_emu_install(esmt_context *ctx);
void half_emu_uninstall(esmt_context *ctx);

half_emu_stats *half_emu_get_stats(void);
void half_emu_reset_stats(void);

#endif
