/* SPDX-License-Identifier: MIT */
// Elementwise activation ops: residual add and exact-erf GELU backward
// (16-byte vectors with scalar head/tail), and the bias gradient (a deterministic column sum, cuda_colsum.cu).
#include "cuda_kernels.cuh"

// Flat elementwise kernels: 16-byte vectors over the aligned middle of the
// arrays (cuda_vec_split: `head` scalar elements first, `nv` vectors, then
// a scalar tail up to n), one grid-stride loop for each part. Each thread
// reads an element (or a vector) before it writes the same one, so the
// output may alias an input.
template <typename T>
__global__ void add_kernel(const T *a, const T *b, T *y, size_t n, size_t head, size_t nv) {
  constexpr int P = vec16<T>::N;
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t v = tid; v < nv; v += stride) {
    const size_t i = head + v * P;
    float fa[P], fb[P];
    ld_chunk<P>(a + i, fa);
    ld_chunk<P>(b + i, fb);
    for (int k = 0; k < P; k++) fa[k] += fb[k];
    st_chunk<P>(y + i, fa);
  }
  for (size_t i = tid; i < head; i += stride) y[i] = st_f<T>(ld_f(a[i]) + ld_f(b[i]));
  for (size_t i = head + nv * P + tid; i < n; i += stride) y[i] = st_f<T>(ld_f(a[i]) + ld_f(b[i]));
}

// dpre may alias dout (see above).
template <typename T>
__global__ void gelu_backward_kernel(const T *pre, const T *dout, T *dpre, size_t n, size_t head,
                                     size_t nv) {
  constexpr int P = vec16<T>::N;
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t v = tid; v < nv; v += stride) {
    const size_t i = head + v * P;
    float fp[P], fd[P];
    ld_chunk<P>(pre + i, fp);
    ld_chunk<P>(dout + i, fd);
    for (int k = 0; k < P; k++) fd[k] *= gelu_erf_grad(fp[k]);
    st_chunk<P>(dpre + i, fd);
  }
  for (size_t i = tid; i < head; i += stride)
    dpre[i] = st_f<T>(ld_f(dout[i]) * gelu_erf_grad(ld_f(pre[i])));
  for (size_t i = head + nv * P + tid; i < n; i += stride)
    dpre[i] = st_f<T>(ld_f(dout[i]) * gelu_erf_grad(ld_f(pre[i])));
}

esmtb_status cuda_add(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || (a->n && (!a->a || !a->b || !a->y))) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "add: NULL argument");
  if (!cuda_dtype_ok(a->dtype)) return cuda_fail(ESMTB_ERR_UNSUPPORTED, "add: dtype %d is not supported", (int)a->dtype);
  if (!a->n) return 0;
  cudaStream_t st = cuda_stream_of(s);
  const size_t es = cuda_dtype_size(a->dtype);
  const cuda_vsplit v = cuda_vec_split(a->n, es, a->a, a->b, a->y);
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(cuda_grid_vec(v, a->n, es), 256, 0, st, add_kernel<T>)(
                          (const T *)a->a, (const T *)a->b, (T *)a->y, a->n, v.head, v.nv));
  return cuda_check(cudaGetLastError(), "add");
}

esmtb_status cuda_gelu_backward(esmtb_device *dev, const esmtb_gelu_backward_args *a,
                                esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || (a->n && (!a->pre || !a->dout || !a->dpre)))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "gelu_backward: NULL argument");
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "gelu_backward: dtype %d is not supported", (int)a->dtype);
  if (!a->n) return 0;
  cudaStream_t st = cuda_stream_of(s);
  const size_t es = cuda_dtype_size(a->dtype);
  const cuda_vsplit v = cuda_vec_split(a->n, es, a->pre, a->dout, a->dpre);
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(cuda_grid_vec(v, a->n, es), 256, 0, st, gelu_backward_kernel<T>)(
                          (const T *)a->pre, (const T *)a->dout, (T *)a->dpre, a->n, v.head,
                          v.nv));
  return cuda_check(cudaGetLastError(), "gelu_backward");
}

esmtb_status cuda_bias_grad(esmtb_device *dev, const esmtb_bias_grad_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || !a->dy || !a->db) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "bias_grad: NULL argument");
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "bias_grad: dtype %d is not supported", (int)a->dtype);
  if (a->rows < 0 || a->cols <= 0)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "bias_grad: bad shape rows=%d cols=%d", a->rows, a->cols);
  return cuda_colsum(a->dtype, a->rows, a->cols, a->dy, NULL, NULL, NULL, a->db, NULL,
                     cuda_stream_of(s), "bias_grad");
}
