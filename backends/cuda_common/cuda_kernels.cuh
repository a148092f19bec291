// Device helpers shared by the compute-op files (cuda_gemm.cu, cuda_norm.cu,
// ...): dtype load/store, dtype dispatch, exact-erf GELU, warp reductions,
// stream-ordered scratch memory, and the op entry points cuda_ops.cu puts
// into the ops table. Private to cuda_common.
#ifndef ESMTRAIN_CUDA_KERNELS_CUH
#define ESMTRAIN_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

#endif
