/* SPDX-License-Identifier: MIT */
// Hopper (sm_90a) attention forward on warpgroup MMAs (wgmma): the
// forward of cuda_attention_mma.cuh at head dims 64 and 128, with each
// warpgroup (4 warps, 128 threads) owning 64 query rows and issuing
// m64n64k16 MMAs that read Q, K and V straight from shared memory through
// matrix descriptors, instead of every warp loading its fragments with
// ldmatrix. Same algorithm, masking and results as attn_fwd_mma (same
// online softmax and store: softmax_tile, store_fwd_rows). See the notes at
// the top of cuda_attention.cu and docs/attention-model.md.
#ifndef ESMTRAIN_CUDA_ATTENTION_WGMMA_CUH
#define ESMTRAIN_CUDA_ATTENTION_WGMMA_CUH

#include "cuda_attention_mma.cuh"

// wgmma exists in the sm_90a binary only (the "a" feature set: not in
// compute_90 PTX, so not on later GPUs through the JIT either); elsewhere
// the kernel below is a trap stub that the host never launches.
#if defined(ESMT_CUDA_EMULATE) || (defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL))
#define ESMT_HAVE_WGMMA 1
#else
#define ESMT_HAVE_WGMMA 0
#endif

namespace esmt_attn {

// ---- warpgroup MMA building blocks (PTX ISA, "Asynchronous Warpgroup
// Level Matrix Multiply-Accumulate Instructions") ----

// The shared-window address of p (what a descriptor and cp.async take).
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
#if defined(ESMT_CUDA_EMULATE)
  return ::cuemu::smem_addr(p);
#else
  return (uint32_t)__cvta_generic_to_shared(p);
#endif
}

// wgmma.fence: orders this thread's earlier accesses to the accumulator and
// A registers before the warpgroup's next mma_async (needed before the
// first one and after touching those registers).
__device__ __forceinline__ void wgmma_fence() {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::wgmma_fence();
#elif ESMT_HAVE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::wgmma_commit();
#elif ESMT_HAVE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Until at most N committed groups are in flight: only then do the
// accumulators hold the results, and may the operands' smem be rewritten.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::wgmma_wait(N);
#elif ESMT_HAVE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Generic-proxy writes (stores, cp.async) to shared memory become visible
// to the async proxy that wgmma reads through: each writer fences after its
// writes, then the block barrier orders them before the MMAs.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::fence_proxy_async();
#elif ESMT_HAVE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Matrix descriptor of a 16-bit operand in the 128-byte swizzle layout:
// rows of 64 elements (128 bytes), 8-row groups of 1024 bytes, the 16-byte
// chunks of row r stored at chunk index c ^ (r & 7); the group's base is
// 1024-byte aligned (base offset 0). SBO = 1024 is the step between 8-row
// groups: along M/N for a K-major operand, along K for an MN-major one.
// LBO is unused by K-major swizzled operands and by an MN-major one that
// is one 64-element group wide (both here); it is set to 1 as the PTX ISA
// says it is assumed.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

// Byte offset of element (r, c) (c < 64) in a swizzled [rows][64] tile.
__device__ __forceinline__ int sw128_off(int r, int c) {
  return r * 128 + ((((c >> 3) ^ r) & 7) << 4) + ((c & 7) << 1);
}

#if ESMT_HAVE_WGMMA && !defined(ESMT_CUDA_EMULATE)
#define ESMT_WGMMA_D32                                                                           \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24," \
  "%25,%26,%27,%28,%29,%30,%31}"
#define ESMT_WGMMA_D32_OPS(d)                                                                    \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),           \
      "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),   \
      "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),             \
      "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),             \
      "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#endif

// An accumulator block of 8 column groups (float[8][4], the softmax's and
// store's view) as the 32 registers one m64n64 MMA writes.
__device__ __forceinline__ float (&acc32(float (&x)[4]))[32] {
  return *reinterpret_cast<float(*)[32]>(&x[0]);
}

// After wgmma.wait: a new definition of each accumulator register that the
// compiler cannot move above the wait (the MMA's asm outputs alone would
// let it read them before the wait retires the MMA).
__device__ __forceinline__ void pin_acc(float (&d)[32]) {
#if ESMT_HAVE_WGMMA && !defined(ESMT_CUDA_EMULATE)
#pragma unroll
  for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

template <typename T> struct wgmma_type;
template <> struct wgmma_type<__half> { static constexpr int bf16 = 0; };
template <> struct wgmma_type<__nv_bfloat16> { static constexpr int bf16 = 1; };

// D[64 x 64] (+)= A[64 x 16] B[16 x 64], A and B K-major in shared memory
// (descriptors), f32 accumulators d (the mma.sync C layout per warp and
// 8-column block: d[4j + e]). scale_d = 0 overwrites D.
template <typename T>
__device__ __forceinline__ void wgmma_ss(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::wgmma_m64k16(d, 64, nullptr, da, db, scale_d, 0, 0, wgmma_type<T>::bf16);
#elif ESMT_HAVE_WGMMA
  if constexpr (wgmma_type<T>::bf16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " ESMT_WGMMA_D32
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : ESMT_WGMMA_D32_OPS(d)
        : "l"(da), "l"(db), "r"(scale_d));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " ESMT_WGMMA_D32
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : ESMT_WGMMA_D32_OPS(d)
        : "l"(da), "l"(db), "r"(scale_d));
#else
  (void)d; (void)da; (void)db; (void)scale_d;
#endif
}

// D[64 x 64] += A[64 x 16] B[16 x 64], A in registers (the mma.sync A
// fragment of the warp's 16 rows), B N-major in shared memory (V: rows are
// k, 64 contiguous columns).
template <typename T>
__device__ __forceinline__ void wgmma_rs_nmajor(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
#if defined(ESMT_CUDA_EMULATE)
  ::cuemu::wgmma_m64k16(d, 64, a, 0, db, 1, 0, 1, wgmma_type<T>::bf16);
#elif ESMT_HAVE_WGMMA
  if constexpr (wgmma_type<T>::bf16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " ESMT_WGMMA_D32
        ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
        : ESMT_WGMMA_D32_OPS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " ESMT_WGMMA_D32
        ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
        : ESMT_WGMMA_D32_OPS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
#else
  (void)d; (void)a; (void)db;
#endif
}

// ---- the forward ----

// Shared memory of the wgmma forward: Q (QR rows) and two (K, V) buffers of
// BK rows, each operand stored as HD / 64 column halves of [rows][64] in the
// 128-byte swizzle layout; 1024 bytes of slack to align the first tile.
template <int HD> struct wg_plan {
  static constexpr int NWG = 2;              // warpgroups a block
  static constexpr int THREADS = 128 * NWG;  // 256
  static constexpr int QR = 64 * NWG;        // query rows a block
  static constexpr int BK = 64;              // keys a tile
  static constexpr int HALVES = HD / 64;
  static constexpr int Q_BYTES = QR * HD * 2, T_BYTES = BK * HD * 2;
  static constexpr size_t bytes = 1024 + Q_BYTES + 2 * 2 * T_BYTES;
  // hd 64: 50 KB and <= 128 registers: 2 blocks (16 warps) a SM; hd 128:
  // 97 KB, one block (its 64 + 32 accumulators a thread)
  static constexpr int blocks = HD == 64 ? 2 : 1;
};

// Rows [0, nrows) of an operand tile from src (`stride` elements between
// rows) into the swizzled layout at s (shared address saddr, 1024-aligned):
// rows < nvalid by cp.async (16-byte pieces; two 8-byte pieces when !vec16),
// the others zeroed with plain stores.
template <typename T, int HD, int THREADS>
__device__ __forceinline__ void copy_tile_sw128(unsigned char *s, const T *src, size_t stride,
                                                int nrows, int nvalid, bool vec16) {
  constexpr int CH = HD / 8;  // 16-byte chunks a row
  for (int i = threadIdx.x; i < nrows * CH; i += THREADS) {
    const int r = i / CH, c = (i - r * CH) * 8;
    unsigned char *d = s + (c >> 6) * (nrows * 128) + sw128_off(r, c & 63);
    if (r < nvalid) {
      const T *x = src + (size_t)r * stride + c;
      if (vec16) {
        cp_async<16>(d, x);
      } else {
        cp_async<8>(d, x);
        cp_async<8>(d + 8, x + 4);
      }
    } else {
      *reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// grid (ceil(T / 128), H, B), 256 threads. Per key tile: the block's
// copies land (cp.async wait, fence.proxy.async, barrier); each warpgroup
// computes S = Q K^T for its 64 rows (HD / 16 wgmma, A and B from smem),
// waits, runs the online softmax in registers, then O += P V (4 wgmma, P
// from registers as the A operand, V N-major from smem) and waits before
// the buffer can be refilled. Rows past L are computed on zero queries and
// stored as zeros; no branch encloses an MMA (ptxas serialises wgmma in
// divergent code, and it cannot prove a per-warpgroup condition uniform).
template <typename T, int HD>
__global__ void __launch_bounds__(wg_plan<HD>::THREADS, wg_plan<HD>::blocks)
    attn_fwd_wgmma(attn_params p) {
#if ESMT_HAVE_WGMMA
  using pl = wg_plan<HD>;
  constexpr int QR = pl::QR, BK = pl::BK, H2 = pl::HALVES, NT = pl::THREADS;
  ESMT_DYNAMIC_SMEM(smem_raw);
  // The swizzle pattern repeats on 1024-byte boundaries of the shared
  // window: align the first tile to one (every tile is a multiple of 1 KB).
  const uint32_t raw = smem_u32(smem_raw);
  unsigned char *const s0 = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  unsigned char *const sQ = s0;
  auto sK = [&](int buf) { return s0 + pl::Q_BYTES + buf * 2 * pl::T_BYTES; };
  const int h = blockIdx.y, q0 = blockIdx.x * QR;
  const seq_view sq = seq_of(p, blockIdx.z, h);
  const int Tn = sq.rows, L = sq.L;
  if (q0 >= Tn) return;
  const size_t Dm = (size_t)p.H * HD, D3 = 3 * Dm;
  T *out = reinterpret_cast<T *>(p.out) + sq.tok0 * Dm + h * HD;
  float *lse = p.lse + sq.lse0;
  if (q0 >= L) {
    const int rows_here = min(QR, Tn - q0);
    zero_rows<T, NT>(out + (size_t)q0 * Dm, Dm, rows_here, HD);
    for (int r = threadIdx.x; r < rows_here; r += NT) lse[q0 + r] = 0.0f;
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int wg = warp >> 2;   // warpgroup: query rows 64 wg .. 64 wg + 63
  const int wr0 = warp * 16;  // this warp's first row in the tile
  const T *qr = reinterpret_cast<const T *>(p.qr) + sq.tok0 * Dm + h * HD;
  const T *kr = reinterpret_cast<const T *>(p.kr) + sq.tok0 * Dm + h * HD;
  const T *vg = reinterpret_cast<const T *>(p.qkv) + sq.tok0 * D3 + 2 * Dm + h * HD;
  const bool v16 = p.v16 != 0;
  auto load_kv = [&](int k0, int buf) {
    const int kv = min(BK, L - k0);
    copy_tile_sw128<T, HD, NT>(sK(buf), kr + (size_t)k0 * Dm, Dm, BK, kv, true);
    copy_tile_sw128<T, HD, NT>(sK(buf) + pl::T_BYTES, vg + (size_t)k0 * D3, D3, BK, kv, v16);
  };
  copy_tile_sw128<T, HD, NT>(sQ, qr + (size_t)q0 * Dm, Dm, QR, min(QR, L - q0), true);
  load_kv(0, 0);
  cp_async_commit();
  // This warpgroup's Q rows: half c2 of the 64-row block wg.
  const uint32_t q_addr = smem_u32(sQ) + wg * 64 * 128;
  float o[HD / 8][4], m[2], l[2];
#pragma unroll
  for (int n = 0; n < HD / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.0f;
  int buf = 0;
  for (int k0 = 0; k0 < L; k0 += BK) {
    const int kv = min(BK, L - k0);
    fetch_tile<true>(k0, BK, L, buf, load_kv);
    fence_proxy_async();  // this thread's landed copies and stores, to wgmma
    __syncthreads();      // everyone's copies of this tile (and Q) are visible
    const uint32_t k_addr = smem_u32(sK(buf)), v_addr = k_addr + pl::T_BYTES;
    float s[BK / 8][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      // k-step kk: column half kk / 4, 32 bytes into its rows per step
      const uint32_t off = (kk & 3) * 32;
      wgmma_ss<T>(acc32(s[0]), sw128_desc(q_addr + (kk >> 2) * (QR * 128) + off),
                  sw128_desc(k_addr + (kk >> 2) * (BK * 128) + off), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    pin_acc(acc32(s[0]));
    softmax_tile<BK, HD>(s, o, m, l, kv, t);
    // P as the A operand of all BK keys (P is 0 and V zero-filled past
    // kv), converted before the fence: registers written between MMAs
    // make ptxas insert a warpgroup.arrive before each
    uint32_t pa[BK / 16][4];
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) acc_to_a<T>(pa[kk], s[2 * kk], s[2 * kk + 1]);
    wgmma_fence();  // o was rescaled and P written: order them before the MMAs
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++)
#pragma unroll
      for (int c2 = 0; c2 < H2; c2++)
        wgmma_rs_nmajor<T>(acc32(o[8 * c2]), pa[kk],
                           sw128_desc(v_addr + c2 * (BK * 128) + kk * 16 * 128));
    wgmma_commit();
    wgmma_wait<0>();  // o holds the sums; V may be overwritten after the barrier
#pragma unroll
    for (int c2 = 0; c2 < H2; c2++) pin_acc(acc32(o[8 * c2]));
    retire_tile<true>(k0, BK, L, buf);
  }
  store_fwd_rows<T, HD>(out, Dm, lse, o, m, l, q0 + wr0 + g, Tn, L, HD, t);
#else
  (void)p;
  __trap();
#endif
}

}  // namespace esmt_attn

#endif
