/* Just enough of CUDA to run backends/cuda_common/cuda_attention.cu's
 * kernels on the host (compiled with -DESMT_ATTN_EMULATE): every CUDA
 * thread of a block is a ucontext coroutine; __syncthreads and every
 * warp-collective op (shuffle, mma.sync, ldmatrix) are barriers of the
 * block, run round-robin, which is valid because the kernels' control flow
 * around them is block-uniform. MMA and ldmatrix follow the register
 * layouts of the PTX ISA, independently of the kernel code. */
#ifndef ESMT_ATTN_EMULATE_H
#define ESMT_ATTN_EMULATE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() {}
  dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
inline int min(int a, int b) { return a < b ? a : b; }
template <typename T> inline T __ldg(const T *p) { return *p; }
inline void __trap() { abort(); }

inline uint16_t emu_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
inline float emu_bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline uint16_t emu_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  const int exp = (int)((x >> 23) & 0xffu);
  if (exp == 255) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    const uint32_t m = mant | 0x800000u;
    const int shift = 14 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}
inline float emu_h2f(uint16_t h) {
  const int e = (h >> 10) & 31;
  const uint32_t m = h & 0x3ffu;
  float f;
  if (e == 0) f = ldexpf((float)m, -24);
  else if (e == 31) f = m ? NAN : INFINITY;
  else f = ldexpf((float)(m | 0x400u), e - 25);
  return (h & 0x8000u) ? -f : f;
}

struct __half {
  uint16_t x;
  __half() = default;
  __half(float f) : x(emu_f2h(f)) {}
  operator float() const { return emu_h2f(x); }
};
struct __nv_bfloat16 {
  uint16_t x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : x(emu_f2bf(f)) {}
  operator float() const { return emu_bf2f(x); }
};
struct __half2 {
  __half x, y;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline float2 __half22float2(__half2 h) { return float2{(float)h.x, (float)h.y}; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{(float)h.x, (float)h.y}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}

/* Provided by the harness (attn_emulate.cpp). */
void emu_barrier(void);
float emu_shfl_xor(float v, int mask);
void emu_mma16816(float c[4], const uint32_t a[4], const uint32_t b[2], int bf16);
void emu_ldsm_x2_trans(uint32_t b[2], const void *p);

inline void __syncthreads() { emu_barrier(); }
inline float __shfl_xor_sync(unsigned, float v, int m) { return emu_shfl_xor(v, m); }

#endif
