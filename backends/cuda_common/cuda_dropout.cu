/* SPDX-License-Identifier: MIT */
// Inverted dropout with the Philox mask (esmtb_dropout_args,
// esmtrain/philox.h): one thread per group of four elements, whose one
// Philox call gives the four words, so the mask is cpu.so's bit for bit
// and nothing is stored or copied to the host. Each thread reads its
// elements before it writes them, so y may alias x.
#include "cuda_kernels.cuh"
#include "esmtrain/philox.h"

template <typename T>
__global__ void dropout_kernel(const T *x, T *y, size_t n, uint64_t seed, uint64_t stream,
                               uint32_t threshold, float scale, int accumulate) {
  const size_t groups = (n + 3) / 4;
  for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups;
       g += (size_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
    esmt_philox_words(seed, stream, g, w);
    for (int k = 0; k < 4; k++) {
      const size_t i = 4 * g + (size_t)k;
      if (i >= n) break;
      const float kept = w[k] >= threshold ? scale * ld_f(x[i]) : 0.0f;
      y[i] = st_f<T>(accumulate ? ld_f(y[i]) + kept : kept);
    }
  }
}

esmtb_status cuda_dropout(esmtb_device *dev, const esmtb_dropout_args *a, esmtb_stream *s) {
  cuda_use_device(dev);
  if (!a || (a->n && (!a->x || !a->y)))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "dropout: NULL argument");
  if (!cuda_dtype_ok(a->dtype))
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "dropout: dtype %d is not supported", (int)a->dtype);
  if (!a->n) return 0;
  cudaStream_t st = cuda_stream_of(s);
  CUDA_DISPATCH_DTYPE(a->dtype, T,
                      ESMT_LAUNCH(cuda_grid_1d((a->n + 3) / 4), 256, 0, st, dropout_kernel<T>)(
                          (const T *)a->x, (T *)a->y, a->n, a->seed, a->stream, a->threshold,
                          a->scale, a->accumulate));
  return cuda_check(cudaGetLastError(), "dropout");
}
