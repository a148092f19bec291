/* SPDX-License-Identifier: MIT */
// Device helpers shared by the compute-op files (cuda_gemm.cu, cuda_norm.cu,
// ...): dtype load/store, dtype dispatch, exact-erf GELU, warp reductions,
// stream-ordered scratch memory, and the op entry points cuda_ops.cu puts
// into the ops table. Private to cuda_common.
#ifndef ESMTRAIN_CUDA_KERNELS_CUH
#define ESMTRAIN_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdint.h>

#include "cuda_device.h"
#include "cuda_launch.cuh"

// Activations are float, __half or __nv_bfloat16; all math is fp32.
static __device__ __forceinline__ float ld_f(float v) { return v; }
static __device__ __forceinline__ float ld_f(__half v) { return __half2float(v); }
static __device__ __forceinline__ float ld_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> static __device__ __forceinline__ T st_f(float v);
template <> __device__ __forceinline__ float st_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half st_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 st_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Exact GELU 0.5 x (1 + erf(x / sqrt 2)) and its derivative
// Phi(x) + x phi(x). (ESM-2 uses erf, not the tanh approximation.)
static __device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
static __device__ __forceinline__ float gelu_erf_grad(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  return cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
}

// 16-byte vector accesses (ld.global.v4 / st.global.v4 on a GPU).
// vec16<T>::N elements: 4 floats or 8 halves. A pointer cast to vec16 must
// be 16-byte aligned: the host checks that (cuda_aligned16,
// cuda_vec_split) before choosing a vector path, and every vector kernel
// has a scalar path or tail. Under the emulator the access is instrumented
// like any other (GCC emits one __tsan_read16/__tsan_write16, or splits the
// aggregate into per-element accesses, which the checkers see all the
// same); a GPU faults on a misaligned vector access and the host does not,
// so the emulated build traps on one here instead.
template <typename T>
struct alignas(16) vec16 {
  static constexpr int N = (int)(16 / sizeof(T));
  T e[16 / sizeof(T)];
};
static __device__ __forceinline__ void check_v16(const void *p) {
#ifdef ESMT_CUDA_EMULATE
  if ((uintptr_t)p & 15u) ::cuemu::trap("misaligned 16-byte vector access (misaligned address)");
#else
  (void)p;
#endif
}
template <typename T>
static __device__ __forceinline__ vec16<T> ld_v(const T *p) {
  check_v16(p);
  return *reinterpret_cast<const vec16<T> *>(p);
}
template <typename T>
static __device__ __forceinline__ void st_v(T *p, const vec16<T> &v) {
  check_v16(p);
  *reinterpret_cast<vec16<T> *>(p) = v;
}
// W consecutive elements to/from fp32: 16-byte accesses when W is a
// multiple of vec16<T>::N (p then 16-byte aligned), else W scalar ones.
// W is a template argument, so the branch is resolved at compile time.
template <int W, typename T>
static __device__ __forceinline__ void ld_chunk(const T *p, float *f) {
  constexpr int P = vec16<T>::N;
  if (W % P == 0) {
    for (int j = 0; j < W / P; j++) {
      const vec16<T> v = ld_v(p + j * P);
      for (int k = 0; k < P; k++) f[j * P + k] = ld_f(v.e[k]);
    }
  } else {
    for (int k = 0; k < W; k++) f[k] = ld_f(p[k]);
  }
}
template <int W, typename T>
static __device__ __forceinline__ void st_chunk(T *p, const float *f) {
  constexpr int P = vec16<T>::N;
  if (W % P == 0) {
    for (int j = 0; j < W / P; j++) {
      vec16<T> v;
      for (int k = 0; k < P; k++) v.e[k] = st_f<T>(f[j * P + k]);
      st_v(p + j * P, v);
    }
  } else {
    for (int k = 0; k < W; k++) p[k] = st_f<T>(f[k]);
  }
}

static inline int cuda_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// How a flat array of n elements of `elt` bytes splits for 16-byte access:
// `head` scalar elements up to the first 16-byte boundary, `nv` vectors of
// 16 / elt elements, then a scalar tail up to n. Every pointer given (NULL
// ones are skipped) must sit at the same offset modulo 16 for the vectors
// to be aligned in all of them; otherwise (or for elt-misaligned pointers)
// the whole range is scalar: head = n, nv = 0.
struct cuda_vsplit {
  size_t head, nv;
};
static inline cuda_vsplit cuda_vec_split(size_t n, size_t elt, const void *p0, const void *p1,
                                         const void *p2) {
  const void *ps[3] = {p0, p1, p2};
  const size_t per = 16 / elt;
  size_t mis = 16;  // common offset modulo 16, 16 = none seen yet
  cuda_vsplit r = {n, 0};
  for (int i = 0; i < 3; i++) {
    if (!ps[i]) continue;
    const size_t m = (size_t)((uintptr_t)ps[i] & 15u);
    if (m % elt || (mis != 16 && m != mis)) return r;
    mis = m;
  }
  if (mis == 16) return r;
  const size_t head = mis ? (16 - mis) / elt : 0;
  if (head >= n) return r;
  r.head = head;
  r.nv = (n - head) / per;
  return r;
}

static __device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Run the statements with T typedef'd to the C++ type of an activation
// dtype (nothing for other dtypes: callers check cuda_dtype_ok first).
#define CUDA_DISPATCH_DTYPE(dt, T, ...)              \
  switch (dt) {                                      \
    case ESMTB_F32: { typedef float T; __VA_ARGS__; break; }          \
    case ESMTB_F16: { typedef __half T; __VA_ARGS__; break; }         \
    case ESMTB_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; break; } \
    default: break;                                  \
  }

static inline int cuda_dtype_ok(esmtb_dtype dt) {
  return dt == ESMTB_F32 || dt == ESMTB_F16 || dt == ESMTB_BF16;
}
static inline size_t cuda_dtype_size(esmtb_dtype dt) { return dt == ESMTB_F32 ? 4 : 2; }

// Grid for a grid-stride loop over n elements with 256-thread blocks.
static inline unsigned cuda_grid_1d(size_t n) {
  size_t g = (n + 255) / 256;
  return (unsigned)(g < 65535 ? (g ? g : 1) : 65535);
}

// Grid for the vector kernels over a cuda_vec_split of n elements of `elt`
// bytes: a thread for each vector, and for each head or tail element.
static inline unsigned cuda_grid_vec(const cuda_vsplit &v, size_t n, size_t elt) {
  const size_t tail = n - v.head - v.nv * (16 / elt);
  size_t t = v.nv > v.head ? v.nv : v.head;
  return cuda_grid_1d(t > tail ? t : tail);
}

// Deterministic column sums over [rows, cols] (cuda_colsum.cu): one block
// per (64-row chunk, 32-column chunk) writes partial[chunk][col]; a second
// pass adds the chunks in order. With `mean`/`rstd` non-NULL it also sums
// dy * xhat (LayerNorm dw, xhat from x): out0 += sum dy*xhat, out1 += sum dy.
// Without them: out0 += sum dy (bias gradient; out1 unused).
CUDA_HIDDEN esmtb_status cuda_colsum(esmtb_dtype dt, int rows, int cols, const void *dy,
                                     const void *x, const float *mean, const float *rstd,
                                     float *out0, float *out1, cudaStream_t st, const char *op);

// The compute ops (one file each; see cuda_ops.cu for the table).
esmtb_status cuda_gemm(esmtb_device *, const esmtb_gemm_args *, esmtb_stream *);
esmtb_status cuda_embed_forward(esmtb_device *, const esmtb_embed_args *, esmtb_stream *);
esmtb_status cuda_embed_backward(esmtb_device *, const esmtb_embed_args *, esmtb_stream *);
esmtb_status cuda_layernorm_forward(esmtb_device *, const esmtb_layernorm_args *, esmtb_stream *);
esmtb_status cuda_layernorm_backward(esmtb_device *, const esmtb_layernorm_args *,
                                     esmtb_stream *);
esmtb_status cuda_add(esmtb_device *, const esmtb_add_args *, esmtb_stream *);
esmtb_status cuda_gelu_backward(esmtb_device *, const esmtb_gelu_backward_args *, esmtb_stream *);
esmtb_status cuda_bias_grad(esmtb_device *, const esmtb_bias_grad_args *, esmtb_stream *);
esmtb_status cuda_xent(esmtb_device *, const esmtb_xent_args *, esmtb_stream *);
esmtb_status cuda_adamw(esmtb_device *, const esmtb_adamw_args *, esmtb_stream *);
esmtb_status cuda_lion(esmtb_device *, const esmtb_lion_args *, esmtb_stream *);
esmtb_status cuda_dropout(esmtb_device *, const esmtb_dropout_args *, esmtb_stream *);

#endif
