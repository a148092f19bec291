// Elementwise activation ops: residual add, exact-erf GELU backward, and
// the bias gradient (a deterministic column sum, cuda_colsum.cu).
#include "cuda_kernels.cuh"

template <typename T>
__global__ void add_kernel(const T *a, const T *b, T *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    y[i] = st_f<T>(ld_f(a[i]) + ld_f(b[i]));
}

// dpre may alias dout: each element is read before it is written.
template <typename T>
__global__ void gelu_backward_kernel(const T *pre, const T *dout, T *dpre, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dpre[i] = st_f<T>(ld_f(dout[i]) * gelu_erf_grad(ld_f(pre[i])));
}

esmtb_status cuda_add(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || (a->n && (!a->a || !a->b || !a->y))) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "add: NULL argument");
  if (!cuda_dtype_ok(a->dtype)) return cuda_fail(ESMTB_ERR_UNSUPPORTED, "add: dtype %d is not supported", (int)a->dtype);
  if (!a->n) return 0;
  cudaStream_t st = cuda_stream_of(s);
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(cuda_grid_1d(a->n), 256, 0, st, add_kernel<T>)(
                          (const T *)a->a, (const T *)a->b, (T *)a->y, a->n));
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
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(cuda_grid_1d(a->n), 256, 0, st, gelu_backward_kernel<T>)(
                          (const T *)a->pre, (const T *)a->dout, (T *)a->dpre, a->n));
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
