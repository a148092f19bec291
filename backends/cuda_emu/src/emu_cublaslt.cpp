/* SPDX-License-Identifier: MIT */
// cuBLASLt on the host: D = alpha op(A) op(B) + beta C (+ bias), column-major
// as cuBLAS, computed by OpenBLAS's sgemm on float copies of the operands
// (fp32 accumulation; f16/bf16 inputs are exact in float; CUBLAS_COMPUTE_32F_
// FAST_TF32 rounds f32 inputs to TF32 first, as the tensor cores do) and
// rounded once to D's type. What the backends rely on is checked the way
// cuBLASLt checks it:
//   - only the type combinations of the cublasLtMatmul support table, and
//     the DEFAULT and BIAS epilogues, get an algorithm; anything else gets
//     CUBLAS_STATUS_NOT_SUPPORTED from the heuristic, never a silent result;
//   - the algorithm records the alignment it assumed for A, B, C, D (the
//     MIN_ALIGNMENT preferences, at most 16 bytes: the widest vector access)
//     and for the bias (the bias pointer set in the descriptor when the
//     heuristic ran; none set: 16 bytes). A matmul handed a less aligned
//     pointer fails like a misaligned vector load on a GPU: a report and a
//     sticky cudaErrorMisalignedAddress;
//   - an algorithm used for another problem than the one it was chosen for
//     is refused; the workspace must be as large as the algorithm asked for.
// The GEMM runs as a stream operation that declares every range it reads
// and writes (bounds and stream-order checks).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "cublasLt.h"
#include "cuemu_half.h"
#include "emu_internal.h"

struct cuemu_lt_handle {
  int device;
};
struct cuemu_lt_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  int32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t bias_type = -1;  // -1: the default for D's type
};
struct cuemu_lt_layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct cuemu_lt_pref {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};
};

namespace {
using namespace cuemu;

constexpr uint64_t kAlgoMagic = 0x63756c74656d7531ull;  // "cultemu1"
constexpr size_t kSplitKWorkspace = 1 << 20;

std::mutex g_mu;
std::set<const void *> g_live;  // handles, descriptors, layouts, preferences

template <typename T>
T *make() {
  T *p = new T;
  std::lock_guard<std::mutex> g(g_mu);
  g_live.insert(p);
  return p;
}
template <typename T>
bool live(const T *p) {
  std::lock_guard<std::mutex> g(g_mu);
  return p && g_live.count(p);
}
template <typename T>
cublasStatus_t destroy(T *p) {
  {
    std::lock_guard<std::mutex> g(g_mu);
    if (!p || !g_live.erase(p)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

size_t type_size(int t) { return t == CUDA_R_32F ? 4 : t == CUDA_R_64F ? 8 : 2; }
bool supported_type(int t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }
const char *type_name(int t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_64F: return "CUDA_R_64F";
    default: return "an unknown type";
  }
}

uint32_t align_of(const void *p) {
  uintptr_t v = (uintptr_t)p;
  uint32_t a = 256;
  while (a > 1 && v % a) a >>= 1;
  return a;
}

// The rows of the cublasLtMatmul type table the emulation implements: fp32
// scale; A and B of one type; f16/bf16 inputs with D of the same type or
// f32; f32 everything (also with FAST_TF32). C always has D's type.
bool supported_combo(const cuemu_lt_desc *d, int at, int bt, int ct, int dt) {
  if (d->scale != CUDA_R_32F || at != bt || ct != dt) return false;
  if (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32) return at == CUDA_R_32F && dt == CUDA_R_32F;
  if (d->compute != CUBLAS_COMPUTE_32F) return false;
  if (at == CUDA_R_32F) return dt == CUDA_R_32F;
  if (at == CUDA_R_16F || at == CUDA_R_16BF) return dt == at || dt == CUDA_R_32F;
  return false;
}

int bias_type_of(const cuemu_lt_desc *d, int dt) { return d->bias_type >= 0 ? d->bias_type : dt; }

struct problem {
  uint64_t m, n, k;
};
// Shapes: op(A) is m x k, op(B) k x n, C and D m x n; every ld >= rows.
cublasStatus_t shape_of(const cuemu_lt_desc *d, const cuemu_lt_layout *a, const cuemu_lt_layout *b,
                        const cuemu_lt_layout *c, const cuemu_lt_layout *dl, problem *p) {
  for (const cuemu_lt_layout *l : {a, b, c, dl})
    if (!l->rows || !l->cols || l->ld < (int64_t)l->rows) return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t m = d->transa ? a->cols : a->rows, ka = d->transa ? a->rows : a->cols;
  const uint64_t kb = d->transb ? b->cols : b->rows, n = d->transb ? b->rows : b->cols;
  if (ka != kb || dl->rows != m || dl->cols != n || c->rows != m || c->cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  *p = problem{m, n, ka};
  return CUBLAS_STATUS_SUCCESS;
}

// What an algorithm was chosen for, so that it is not used for another.
uint64_t signature(const cuemu_lt_desc *d, const cuemu_lt_layout *a, const cuemu_lt_layout *b,
                   const cuemu_lt_layout *dl, const problem &p) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (uint64_t v : {(uint64_t)d->compute, (uint64_t)d->transa, (uint64_t)d->transb,
                     (uint64_t)d->epilogue, (uint64_t)a->type, (uint64_t)b->type,
                     (uint64_t)dl->type, p.m, p.n, p.k})
    mix(v);
  return h;
}

float load(const void *p, int t, size_t i) {
  switch (t) {
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_16F: return cuemu_h2f(((const uint16_t *)p)[i]);
    default: return cuemu_bf2f(((const uint16_t *)p)[i]);
  }
}
void store(void *p, int t, size_t i, float v) {
  switch (t) {
    case CUDA_R_32F: ((float *)p)[i] = v; break;
    case CUDA_R_16F: ((uint16_t *)p)[i] = cuemu_f2h(v); break;
    default: ((uint16_t *)p)[i] = cuemu_f2bf(v); break;
  }
}
float tf32(float x) {  // round to 10 mantissa bits, to nearest
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, 4);
  return x;
}

// A stored matrix as floats with leading dimension = rows.
std::vector<float> to_float(const void *p, const cuemu_lt_layout &l, bool round_tf32) {
  std::vector<float> out(l.rows * l.cols);
  for (uint64_t j = 0; j < l.cols; j++)
    for (uint64_t i = 0; i < l.rows; i++) {
      const float v = load(p, l.type, j * (uint64_t)l.ld + i);
      out[j * l.rows + i] = round_tf32 ? tf32(v) : v;
    }
  return out;
}

size_t span_bytes(const cuemu_lt_layout &l) {
  return ((l.cols - 1) * (uint64_t)l.ld + l.rows) * type_size(l.type);
}
}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess || !device(d)) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = make<cuemu_lt_handle>();
  (*handle)->device = d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  return live(h) ? destroy(h) : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *cublasLtGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}
const char *cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = make<cuemu_lt_desc>();
  (*desc)->compute = compute;
  (*desc)->scale = scale;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return destroy(d); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  if (!live(d) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  auto get32 = [&](int32_t *out) {
    if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(out, buf, 4);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return get32(&d->transa);
    case CUBLASLT_MATMUL_DESC_TRANSB: return get32(&d->transb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return get32(&d->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return get32(&d->bias_type);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      if (size != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(&d->bias, buf, sizeof(void *));
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: {
      int32_t v;
      cublasStatus_t s = get32(&v);
      d->compute = (cublasComputeType_t)v;
      return s;
    }
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: {
      int32_t v;
      cublasStatus_t s = get32(&v);
      d->scale = (cudaDataType_t)v;
      return s;
    }
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not emulated: refused, not ignored
  }
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t size, size_t *written) {
  if (!live(d)) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t v;
  const void *src = &v;
  size_t n = 4;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: v = d->transa; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: v = d->transb; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: v = d->epilogue; break;
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: v = d->compute; break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: v = d->scale; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: src = &d->bias; n = sizeof(void *); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (written) *written = n;
  if (!buf) return size ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
  if (size < n) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(buf, src, n);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = make<cuemu_lt_layout>();
  **layout = cuemu_lt_layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return destroy(l); }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = make<cuemu_lt_pref>();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return destroy(p); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size) {
  if (!live(p) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      if (size != 8) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(&p->max_workspace, buf, 8);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, 4);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results,
                                              int *returned) {
  if (!live(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!live(d) || !live(a) || !live(b) || !live(c) || !live(dl) || !live(pref) || requested < 1 ||
      !results || !returned)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  for (const cuemu_lt_layout *l : {a, b, c, dl})
    if (!supported_type(l->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!supported_combo(d, a->type, b->type, c->type, dl->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((d->transa != CUBLAS_OP_N && d->transa != CUBLAS_OP_T) ||
      (d->transb != CUBLAS_OP_N && d->transb != CUBLAS_OP_T))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_BIAS)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->epilogue == CUBLASLT_EPILOGUE_BIAS) {
    const int bt = bias_type_of(d, dl->type);
    if (bt != dl->type && bt != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  problem p;
  cublasStatus_t s = shape_of(d, a, b, c, dl, &p);
  if (s) return s;
  memset(results, 0, sizeof *results);
  uint64_t *alg = results->algo.data;
  alg[0] = kAlgoMagic;
  alg[1] = signature(d, a, b, dl, p);
  const cuemu_lt_layout *ls[4] = {a, b, c, dl};
  for (int i = 0; i < 4; i++) {  // alignment assumed per operand
    uint32_t want = std::min<uint32_t>(pref->align[i], 16);
    if (want < type_size(ls[i]->type)) want = (uint32_t)type_size(ls[i]->type);
    alg[2] |= (uint64_t)want << (16 * i);
  }
  alg[3] = d->bias ? std::min<uint32_t>(align_of(d->bias), 16) : 16;
  alg[4] = p.k >= 4096 && pref->max_workspace >= kSplitKWorkspace ? kSplitKWorkspace : 0;
  results->workspaceSize = alg[4];
  results->state = CUBLAS_STATUS_SUCCESS;
  results->wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t la, const void *B,
                              cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                              cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ldl,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  if (!live(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!live(desc) || !live(la) || !live(lb) || !live(lc) || !live(ldl) || !alpha || !beta || !A ||
      !B || !D)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!algo || algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;
  // The GEMM runs on the stream's device: one of another device than the
  // current one is the missing cudaSetDevice a kernel launch reports too.
  if (!stream_on_current_device(stream, "cublasLtMatmul")) return CUBLAS_STATUS_EXECUTION_FAILED;
  const cuemu_lt_desc d = *desc;
  const cuemu_lt_layout a = *la, b = *lb, c = *lc, dl = *ldl;
  problem p;
  cublasStatus_t s = shape_of(&d, &a, &b, &c, &dl, &p);
  if (s) return s;
  if (!supported_combo(&d, a.type, b.type, c.type, dl.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (algo->data[1] != signature(&d, &a, &b, &dl, p)) {
    report(h->device, "cublasLt",
           "cublasLtMatmul: the algorithm was chosen for another problem (types, transposes, "
           "epilogue or m=%llu n=%llu k=%llu differ)",
           (unsigned long long)p.m, (unsigned long long)p.n, (unsigned long long)p.k);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const size_t need_ws = algo->data[4];
  if (workspace_bytes < need_ws || (need_ws && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *(const float *)alpha, be = *(const float *)beta;
  if (be != 0.0f && !C) return CUBLAS_STATUS_INVALID_VALUE;
  const bool bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS;
  if (bias && !d.bias) return CUBLAS_STATUS_INVALID_VALUE;

  // Alignment the algorithm assumed against what it is given.
  char misaligned[200] = "";
  const void *ptrs[4] = {A, B, C, D};
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4 && !*misaligned; i++) {
    const uint32_t want = (uint32_t)(algo->data[2] >> (16 * i)) & 0xffff;
    if (ptrs[i] && (i != 2 || be != 0.0f) && align_of(ptrs[i]) < want)
      snprintf(misaligned, sizeof misaligned, "%s at %p is %u-byte aligned, the algorithm assumed %u",
               names[i], ptrs[i], align_of(ptrs[i]), want);
  }
  if (bias && !*misaligned && align_of(d.bias) < algo->data[3])
    snprintf(misaligned, sizeof misaligned,
             "the bias at %p is %u-byte aligned, the algorithm assumed %u (the bias pointer "
             "when the heuristic ran)",
             d.bias, align_of(d.bias), (unsigned)algo->data[3]);
  const int bias_type = bias_type_of(&d, dl.type);
  const bool round_tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const int dev = h->device;
  std::string mis = misaligned;
  cudaError_t e = enqueue(stream, "cublasLtMatmul", [=](op_ctx &ctx) -> cudaError_t {
    if (!mis.empty()) {
      report(dev, "cublasLt", "cublasLtMatmul (m=%llu n=%llu k=%llu): %s", (unsigned long long)p.m,
             (unsigned long long)p.n, (unsigned long long)p.k, mis.c_str());
      return cudaErrorMisalignedAddress;
    }
    bool ok = access(ctx, A, span_bytes(a), false) && access(ctx, B, span_bytes(b), false);
    if (ok && be != 0.0f) ok = access(ctx, C, span_bytes(c), false);
    if (ok && bias) ok = access(ctx, d.bias, p.m * type_size(bias_type), false);
    if (ok && need_ws) ok = access(ctx, workspace, need_ws, true);
    if (ok) ok = access(ctx, D, span_bytes(dl), true);
    if (!ok) return cudaErrorIllegalAddress;
    if (!compute_enabled()) return cudaSuccess;
    const std::vector<float> fa = to_float(A, a, round_tf32), fb = to_float(B, b, round_tf32);
    std::vector<float> t(p.m * p.n);
    cblas_sgemm(CblasColMajor, d.transa ? CblasTrans : CblasNoTrans,
                d.transb ? CblasTrans : CblasNoTrans, (int)p.m, (int)p.n, (int)p.k, 1.0f, fa.data(),
                (int)a.rows, fb.data(), (int)b.rows, 0.0f, t.data(), (int)p.m);
    for (uint64_t j = 0; j < p.n; j++)
      for (uint64_t i = 0; i < p.m; i++) {
        float v = al * t[j * p.m + i];
        if (be != 0.0f) v += be * load(C, c.type, j * (uint64_t)c.ld + i);
        if (bias) v += load(d.bias, bias_type, i);
        store(D, dl.type, j * (uint64_t)dl.ld + i, v);
      }
    return cudaSuccess;
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
