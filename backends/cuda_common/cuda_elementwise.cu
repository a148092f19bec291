/* SPDX-License-Identifier: MIT */
// Dtype-generic kernels both GPU backends use: scale, sum of squares
// (deterministic two-pass reduction), and dtype conversion; scale and
// conversion with 16-byte accesses where aligned. sumsq stays scalar: its
// summation order must not depend on the pointer's alignment.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.cuh"

// x *= f: 16-byte vectors over the aligned middle (cuda_vec_split), scalar head and tail.
__global__ void scale_kernel(float *x, size_t n, float f, size_t head, size_t nv) {
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t v = tid; v < nv; v += stride) {
    vec16<float> q = ld_v(x + head + 4 * v);
    for (int k = 0; k < 4; k++) q.e[k] *= f;
    st_v(x + head + 4 * v, q);
  }
  for (size_t i = tid; i < head; i += stride) x[i] *= f;
  for (size_t i = head + 4 * nv + tid; i < n; i += stride) x[i] *= f;
}

// Fixed grid and block sizes make the summation order independent of the
// launch, so the result is bitwise reproducible.
#define SUMSQ_BLOCKS 256
#define SUMSQ_THREADS 256

__global__ void sumsq_partial(const float *x, size_t n, float *partial) {
  __shared__ float sh[SUMSQ_THREADS];
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    acc += x[i] * x[i];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

__global__ void sumsq_final(const float *partial, float *out) {
  __shared__ float sh[SUMSQ_BLOCKS];
  sh[threadIdx.x] = partial[threadIdx.x];
  __syncthreads();
  for (int s = SUMSQ_BLOCKS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out += sh[0];
}

template <typename T> __device__ float to_f32(T v);
template <> __device__ float to_f32<float>(float v) { return v; }
template <> __device__ float to_f32<__half>(__half v) { return __half2float(v); }
template <> __device__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ T from_f32(float v);
template <> __device__ float from_f32<float>(float v) { return v; }
template <> __device__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// dst = src in another dtype. With `vec` (both pointers 16-byte aligned),
// chunks of W elements, W = 16 bytes of the narrower type (8 when a half
// type is involved: two 16-byte loads of floats, one 16-byte store of
// halves), then a scalar tail; else all scalar.
template <typename S, typename D>
__global__ void convert_kernel(const S *src, D *dst, size_t n, int vec) {
  constexpr int W = (int)(16 / (sizeof(S) < sizeof(D) ? sizeof(S) : sizeof(D)));
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t nv = vec ? n / W : 0;
  for (size_t v = tid; v < nv; v += stride) {
    float f[W];
    ld_chunk<W>(src + v * W, f);
    st_chunk<W>(dst + v * W, f);
  }
  for (size_t i = nv * W + tid; i < n; i += stride) dst[i] = from_f32<D>(to_f32<S>(src[i]));
}

static unsigned grid_for(size_t n) {
  size_t g = (n + 255) / 256;
  return (unsigned)(g < 65535 ? (g ? g : 1) : 65535);
}

esmtb_status cuda_scale(esmtb_device *dev, const esmtb_scale_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || (!a->x && a->n)) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "scale: NULL argument");
  if (!a->n) return 0;
  const cuda_vsplit v = cuda_vec_split(a->n, sizeof(float), a->x, NULL, NULL);
  ESMT_LAUNCH(cuda_grid_vec(v, a->n, sizeof(float)), 256, 0, cuda_stream_of(s), scale_kernel)(
      a->x, a->n, a->factor, v.head, v.nv);
  return cuda_check(cudaGetLastError(), "scale");
}

esmtb_status cuda_sumsq(esmtb_device *dev, const esmtb_sumsq_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->out || (!a->x && a->n)) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "sumsq: NULL argument");
  float *partial = NULL;
  cudaStream_t st = cuda_stream_of(s);
  esmtb_status rc = cuda_scratch((void **)&partial, SUMSQ_BLOCKS * sizeof(float), st, "sumsq");
  if (rc) return rc;
  ESMT_LAUNCH(SUMSQ_BLOCKS, SUMSQ_THREADS, 0, st, sumsq_partial)(a->x, a->n, partial);
  ESMT_LAUNCH(1, SUMSQ_BLOCKS, 0, st, sumsq_final)(partial, a->out);
  cudaFreeAsync(partial, st);
  return cuda_check(cudaGetLastError(), "sumsq");
}

template <typename S>
static void launch_convert_from(const S *src, void *dst, esmtb_dtype dt, size_t n, cudaStream_t st) {
  const int vec = cuda_aligned16(src) && cuda_aligned16(dst);
  // One thread per chunk of up to 8 elements (or per element when scalar).
  const unsigned g = grid_for(vec ? (n + 7) / 8 + 8 : n);
  switch (dt) {
    case ESMTB_F32: ESMT_LAUNCH(g, 256, 0, st, convert_kernel<S, float>)(src, (float *)dst, n, vec); break;
    case ESMTB_F16: ESMT_LAUNCH(g, 256, 0, st, convert_kernel<S, __half>)(src, (__half *)dst, n, vec); break;
    default: ESMT_LAUNCH(g, 256, 0, st, convert_kernel<S, __nv_bfloat16>)(src, (__nv_bfloat16 *)dst, n, vec); break;
  }
}

esmtb_status cuda_convert(esmtb_device *dev, const esmtb_convert_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || (a->n && (!a->src || !a->dst))) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "convert: NULL argument");
  int ok_src = a->src_dtype <= ESMTB_BF16, ok_dst = a->dst_dtype <= ESMTB_BF16;
  if (!ok_src || !ok_dst) return cuda_fail(ESMTB_ERR_UNSUPPORTED, "convert: only f32/f16/bf16 are supported");
  if (!a->n) return 0;
  cudaStream_t st = cuda_stream_of(s);
  switch (a->src_dtype) {
    case ESMTB_F32: launch_convert_from((const float *)a->src, a->dst, a->dst_dtype, a->n, st); break;
    case ESMTB_F16: launch_convert_from((const __half *)a->src, a->dst, a->dst_dtype, a->n, st); break;
    default: launch_convert_from((const __nv_bfloat16 *)a->src, a->dst, a->dst_dtype, a->n, st); break;
  }
  return cuda_check(cudaGetLastError(), "convert");
}
