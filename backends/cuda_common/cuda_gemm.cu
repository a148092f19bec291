/* SPDX-License-Identifier: MIT */
// gemm: cuBLASLt with fp32 accumulation (TF32 tensor cores for f32
// inputs), the bias as a cuBLASLt epilogue, and exact-erf GELU as our own
// vectorised kernel in one pass over the GEMM's output (cuBLASLt's GELU
// epilogue is the tanh approximation).
// Plans (descriptors, layouts, the heuristic's algorithm) are cached per
// device, keyed by everything the choice depends on.
//
// Row-major to cuBLAS column-major: C[m,n] = op(A) op(B) is computed as
// C^T[n,m] = op(B)^T op(A)^T, i.e. cuBLAS's "A" is our B and its "B" is our
// A, with M = n and N = m; the bias [n] then runs along cuBLAS rows, which
// is what CUBLASLT_EPILOGUE_BIAS broadcasts.
#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stddef.h>

#include "cuda_kernels.cuh"

#define PLAN_SLOTS 64

// Everything the algorithm choice depends on (ints only, so memcmp works).
typedef struct plan_key {
  int dtype, ta, tb, m, n, k, lda, ldb, ldc, bias;
  int c_f32;  // ABI 1.1: c/d fp32 with half a/b (weight gradients)
  int align[4];  // of a, b, c, d in bytes (cuBLASLt assumes 256 otherwise)
  int bias_align;  // of the fused bias: the heuristic sees the real pointer
} plan_key;

typedef struct plan {
  plan_key key;
  int valid;
  unsigned long long last_use;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;  // cuBLAS A (our B), B (our A), C/D
  cublasLtMatmulAlgo_t algo;
} plan;

// One workspace per device: gemms on one device are assumed not to run
// concurrently on different streams (the core issues them on one stream).
struct cuda_gemm_state {
  cublasLtHandle_t lt;
  void *ws;
  size_t ws_bytes;
  unsigned long long clock;
  plan plans[PLAN_SLOTS];
};

static esmtb_status lt_fail(cublasStatus_t s, const char *what) {
  return cuda_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? ESMTB_ERR_OUT_OF_MEMORY : ESMTB_ERR_BACKEND, "gemm: %s: %s (%s)", what,
                   cublasLtGetStatusString(s), cublasLtGetStatusName(s));
}
#define LT_TRY(call, what)                                  \
  do {                                                      \
    cublasStatus_t s_ = (call);                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) return lt_fail(s_, what); \
  } while (0)

static void plan_destroy(plan *p) {
  if (p->op) cublasLtMatmulDescDestroy(p->op);
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  memset(p, 0, sizeof *p);
}

void cuda_gemm_release(esmtb_device *dev) {
  cuda_gemm_state *g = dev->gemm;
  if (!g) return;
  for (int i = 0; i < PLAN_SLOTS; i++) plan_destroy(&g->plans[i]);
  if (g->ws) {
    cudaFree(g->ws);
    dev->allocated -= g->ws_bytes;
  }
  if (g->lt) cublasLtDestroy(g->lt);
  free(g);
  dev->gemm = NULL;
}

// The handle and a workspace (32 MiB on Hopper, 8 MiB before, as NVIDIA
// recommends), counted against device_memory_limit; without room for it
// cuBLASLt runs workspace-free algorithms.
static esmtb_status gemm_state(esmtb_device *dev, cuda_gemm_state **out) {
  if (dev->gemm) {
    *out = dev->gemm;
    return 0;
  }
  esmtb_status st = cuda_check(cudaSetDevice(dev->ordinal), "gemm: cudaSetDevice");
  if (st) return st;
  cuda_gemm_state *g = (cuda_gemm_state *)calloc(1, sizeof *g);
  if (!g) return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY, "gemm: out of host memory");
  cublasStatus_t s = cublasLtCreate(&g->lt);
  if (s != CUBLAS_STATUS_SUCCESS) {
    free(g);
    return lt_fail(s, "cublasLtCreate");
  }
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev->ordinal);
  size_t want = (major >= 9 ? 32u : 8u) << 20;
  if (dev->memory_limit && dev->allocated + want > dev->memory_limit) want = 0;
  if (want && cudaMalloc(&g->ws, want) == cudaSuccess) {
    g->ws_bytes = want;
    dev->allocated += want;
  } else {
    cudaGetLastError();
    g->ws = NULL;
  }
  dev->gemm = g;
  *out = g;
  return 0;
}

static int align_of(const void *p) {
  uintptr_t v = (uintptr_t)p;
  int a = 256;
  while (a > 1 && v % (uintptr_t)a) a >>= 1;
  return a;
}

static esmtb_status plan_build(cuda_gemm_state *g, const plan_key *k, const void *bias, plan *p) {
  cudaDataType_t t = k->dtype == ESMTB_F32 ? CUDA_R_32F : k->dtype == ESMTB_F16 ? CUDA_R_16F
                                                                                 : CUDA_R_16BF;
  cublasComputeType_t ct = k->dtype == ESMTB_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  memset(p, 0, sizeof *p);
  p->key = *k;
  LT_TRY(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F), "cublasLtMatmulDescCreate");
  cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS A = our B
  cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = our A
  LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa),
         "set TRANSA");
  LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb),
         "set TRANSB");
  cublasLtEpilogue_t epi = k->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
         "set EPILOGUE");
  // The bias pointer before the heuristic, so the algorithm it picks does not
  // assume a bias alignment the real one lacks (the key holds bias_align).
  if (k->bias)
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias),
           "set BIAS_POINTER");
  // Stored (pre-op) shapes in column-major terms.
  LT_TRY(cublasLtMatrixLayoutCreate(&p->la, t, k->tb ? k->k : k->n, k->tb ? k->n : k->k, k->ldb),
         "layout of b");
  LT_TRY(cublasLtMatrixLayoutCreate(&p->lb, t, k->ta ? k->m : k->k, k->ta ? k->k : k->m, k->lda),
         "layout of a");
  const cudaDataType_t tc = k->c_f32 ? CUDA_R_32F : t;
  LT_TRY(cublasLtMatrixLayoutCreate(&p->lc, tc, k->n, k->m, k->ldc), "layout of c");

  cublasLtMatmulPreference_t pref;
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  uint64_t ws = g->ws_bytes;
  uint32_t al[4] = {(uint32_t)k->align[1], (uint32_t)k->align[0], (uint32_t)k->align[2],
                    (uint32_t)k->align[3]};  // cuBLAS A/B are our b/a
  cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasStatus_t s =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof ws);
  for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
    s = cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof al[i]);
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res,
                                       &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
    return lt_fail(s, "cublasLtMatmulAlgoGetHeuristic");
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || found < 1)
    return cuda_fail(ESMTB_ERR_UNSUPPORTED,
                     "gemm: cuBLASLt has no algorithm for dtype %d m=%d n=%d k=%d trans_a=%d "
                     "trans_b=%d lda=%d ldb=%d ldc=%d%s",
                     k->dtype, k->m, k->n, k->k, k->ta, k->tb, k->lda, k->ldb, k->ldc,
                     k->bias ? " with bias" : "");
  p->algo = res.algo;
  p->valid = 1;
  return 0;
}

// The cached plan for `k`, building it in the least recently used slot.
static esmtb_status plan_get(cuda_gemm_state *g, const plan_key *k, const void *bias, plan **out) {
  plan *victim = &g->plans[0];
  for (int i = 0; i < PLAN_SLOTS; i++) {
    plan *p = &g->plans[i];
    if (p->valid && memcmp(&p->key, k, sizeof *k) == 0) {
      p->last_use = ++g->clock;
      *out = p;
      return 0;
    }
    if (!p->valid || (victim->valid && p->last_use < victim->last_use)) victim = p;
  }
  plan_destroy(victim);
  esmtb_status st = plan_build(g, k, bias, victim);
  if (st) {
    plan_destroy(victim);
    return st;
  }
  victim->last_use = ++g->clock;
  *out = victim;
  return 0;
}

// The epilogue cuBLASLt does not do for us, in one pass over the GEMM's
// [m, n] output (row stride ld), reading each element once:
//   v = src (+ bias[col], rounded to T, stored to `pre`, when the bias was
//   not fused into cuBLASLt); c = gelu_erf(v) (or v), rounded to T.
// src, pre and c may be the same buffer (each thread reads its elements
// before writing them). Flattened over m * n / W chunks of W consecutive
// columns; W = vec16<T>::N (16-byte loads/stores) when n and ld are
// multiples of it and src, pre, c are 16-byte aligned, else 1. The bias,
// [n] and reused by every row (cached), is read element by element: it is
// the one operand that may be misaligned here.
template <typename T, int W, bool GELU>
__global__ void epilogue_kernel(const T *src, const T *bias, T *pre, T *c, int m, int n, int ld) {
  const size_t cpr = (size_t)(n / W), total = (size_t)m * cpr;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    const size_t r = i / cpr;
    const int col = (int)(i - r * cpr) * W;
    const size_t at = r * (size_t)ld + col;
    float v[W];
    ld_chunk<W>(src + at, v);
    if (bias) {
      for (int k = 0; k < W; k++) v[k] = ld_f(st_f<T>(v[k] + ld_f(bias[col + k])));  // round like a fused bias
      if (pre) st_chunk<W>(pre + at, v);
    }
    if (GELU)
      for (int k = 0; k < W; k++) v[k] = gelu_erf(v[k]);
    st_chunk<W>(c + at, v);
  }
}

template <typename T>
static void launch_epilogue(const T *src, const T *bias, T *pre, T *c, int gelu, int m, int n,
                            int ld, cudaStream_t st) {
  constexpr int P = vec16<T>::N;
  const int vec = n % P == 0 && ld % P == 0 && cuda_aligned16(src) && cuda_aligned16(c) &&
                  (!pre || cuda_aligned16(pre));
  const unsigned grid = cuda_grid_1d((size_t)m * (size_t)(vec ? n / P : n));
  if (vec && gelu)
    ESMT_LAUNCH(grid, 256, 0, st, epilogue_kernel<T, P, true>)(src, bias, pre, c, m, n, ld);
  else if (vec)
    ESMT_LAUNCH(grid, 256, 0, st, epilogue_kernel<T, P, false>)(src, bias, pre, c, m, n, ld);
  else if (gelu)
    ESMT_LAUNCH(grid, 256, 0, st, epilogue_kernel<T, 1, true>)(src, bias, pre, c, m, n, ld);
  else
    ESMT_LAUNCH(grid, 256, 0, st, epilogue_kernel<T, 1, false>)(src, bias, pre, c, m, n, ld);
}

// ABI 1.1's c_f32, read only when the caller's struct has the field.
static int c_f32_of(const esmtb_gemm_args *a) {
  return a->struct_size >= offsetof(esmtb_gemm_args, c_f32) + sizeof a->c_f32 && a->c_f32;
}

static esmtb_status check_args(const esmtb_gemm_args *a) {
  if (!a || !a->a || !a->b || !a->c) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: NULL argument (a, b or c)");
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "gemm: dtype %d is not supported (f32, f16, bf16)", (int)a->dtype);
  if (a->m <= 0 || a->n <= 0 || a->k <= 0)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: sizes m=%d n=%d k=%d must be positive", a->m, a->n, a->k);
  if (a->lda < (a->trans_a ? a->m : a->k) || a->ldb < (a->trans_b ? a->k : a->n) || a->ldc < a->n)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: leading dimensions lda=%d ldb=%d ldc=%d too small for m=%d n=%d "
                     "k=%d trans_a=%d trans_b=%d", a->lda, a->ldb, a->ldc, a->m, a->n, a->k,
                     a->trans_a, a->trans_b);
  if (a->bias && a->beta != 0.0f) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: a bias needs beta == 0");
  if (a->epilogue != ESMTB_EPI_NONE && a->epilogue != ESMTB_EPI_GELU)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: unknown epilogue %d", (int)a->epilogue);
  if (c_f32_of(a) && (a->bias || a->epilogue != ESMTB_EPI_NONE))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: c_f32 (an fp32 gradient output) takes no bias or epilogue");
  return 0;
}

esmtb_status cuda_gemm(esmtb_device *dev, const esmtb_gemm_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  esmtb_status st = check_args(a);
  if (st) return st;
  if (!dev) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gemm: device is NULL");
  const int gelu = a->epilogue == ESMTB_EPI_GELU;
  // The bias goes into cuBLASLt's epilogue when 16-byte aligned (an
  // offset into a parameter buffer may not be); otherwise our kernel adds
  // it. With GELU the GEMM result goes to `pre` when kept, else to c, and
  // is activated by our kernel (cuBLASLt's GELU is the tanh form).
  //
  // FFN-up (bias + GELU + pre, the core's only GELU GEMM besides the LM
  // head's) is thus: cuBLASLt writes pre = round_T(x W^T + b), its fp32
  // accumulators rounded once, then one elementwise pass reads pre once
  // and writes c = round_T(gelu_erf(pre)). The pre-activation must reach
  // memory anyway (gelu_backward reads it), so taking the bias out of
  // cuBLASLt and adding it in our kernel would cost an extra write of
  // [m, n] and a second rounding, not save a pass. An unaligned bias gets
  // the same single pass: bias, rounding, pre and GELU in our kernel.
  const int lt_bias = a->bias && align_of(a->bias) >= 16;
  const int own_bias = a->bias && !lt_bias;
  void *d = gelu && a->pre ? a->pre : a->c;
  plan_key k;
  memset(&k, 0, sizeof k);
  k.dtype = (int)a->dtype;
  k.ta = !!a->trans_a;
  k.tb = !!a->trans_b;
  k.m = a->m; k.n = a->n; k.k = a->k;
  k.lda = a->lda; k.ldb = a->ldb; k.ldc = a->ldc;
  k.bias = lt_bias;
  k.c_f32 = c_f32_of(a) && a->dtype != ESMTB_F32;
  k.align[0] = align_of(a->a);
  k.align[1] = align_of(a->b);
  k.align[2] = align_of(a->c);
  k.align[3] = align_of(d);
  k.bias_align = lt_bias ? align_of(a->bias) : 0;
  cudaStream_t stream = cuda_stream_of(s);

  pthread_mutex_lock(&dev->lock);
  cuda_gemm_state *g = NULL;
  plan *p = NULL;
  st = gemm_state(dev, &g);
  if (!st) st = plan_get(g, &k, lt_bias ? a->bias : NULL, &p);
  if (!st && lt_bias) {
    cublasStatus_t ls = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &a->bias, sizeof a->bias);
    if (ls != CUBLAS_STATUS_SUCCESS) st = lt_fail(ls, "set BIAS_POINTER");
  }
  if (!st) {
    cublasStatus_t ls = cublasLtMatmul(g->lt, p->op, &a->alpha, a->b, p->la, a->a, p->lb,
                                       &a->beta, a->c, p->lc, d, p->lc, &p->algo, g->ws,
                                       g->ws_bytes, stream);
    if (ls != CUBLAS_STATUS_SUCCESS) st = lt_fail(ls, "cublasLtMatmul");
  }
  pthread_mutex_unlock(&dev->lock);
  if (st || (!gelu && !own_bias)) return st;

  void *pre = gelu && a->pre ? a->pre : NULL;
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      launch_epilogue<T>((const T *)d, own_bias ? (const T *)a->bias : NULL,
                                         (T *)pre, (T *)a->c, gelu, a->m, a->n, a->ldc, stream));
  return cuda_check(cudaGetLastError(), "gemm: epilogue");
}
