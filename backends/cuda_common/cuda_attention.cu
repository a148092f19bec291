/* SPDX-License-Identifier: MIT */
// Flash-style multi-head self-attention core (forward and backward) for the
// GPU backends; semantics are esmtb_attention_args' (include/esmtrain/backend.h).
//
// Notation for one (row b, head h) with L = seq_len[b] valid tokens:
//   Qs = rot(scale * q), Kr = rot(k)  (split-half rotary, position = index)
//   S = Qs Kr^T, keys j >= L masked, P = softmax(S), O = P V,
//   lse = log sum_j exp(S_ij).
// Nothing T x T is ever stored: everything is tiled, with an online softmax
// in fp32 (base 2: Q tiles carry scale * log2(e), so exponentials are exp2).
//
// F16 / BF16 (tensor cores, fp32 accumulation), 128 threads = 4 warps:
//   Rotary once per pass: attn_rotate_qk writes Qs = rot(q) * scale * log2 e
//   and Kr = rot(k), computed in fp32 and rounded to the storage dtype (the
//   rounding the per-tile rotary had), into a stream-ordered scratch
//   ([tokens][H][hd] each, 2 * B*T*H*hd elements, freed after the pass), so
//   every tile load is a plain copy: Q and K from the scratch, V and dO
//   from qkv / dout. Rows past L are zero-filled in smem, so NaN garbage in
//   padded rows is never read. Smem rows are padded by 8 elements (HD + 8):
//   the 8 rows of each ldmatrix 8x8 matrix hit distinct banks. hd = 24 runs
//   as HD = 32 with zero columns 24..31.
//   Copies: on sm_80+ (ASYNC kernels) cp.async (16-byte cg copies; 8-byte
//   ca copies of V / dO when qkv / dout are only 8-byte aligned), and the
//   streamed tiles are double-buffered: tile i+1 is issued into the other
//   buffer and committed, then cp.async.wait_group 1 + __syncthreads make
//   tile i visible while i+1 is in flight; a barrier at the end of each
//   iteration (skipped after the last) retires the buffer before it is
//   refilled. On sm_75 (no cp.async) the same kernels copy through
//   registers into one buffer (two barriers per tile, as before).
//   Operands: A fragments (16x16) by ldmatrix.x4; B fragments two n-blocks
//   at a time by ldmatrix.x4 (k-contiguous operands) or ldmatrix.x4.trans
//   (n-contiguous operands: V in P.V, dO, Q, K in the backward updates) on
//   sm_80+; sm_75 loads them one n-block at a time (32-bit loads,
//   ldmatrix.x2.trans): fewer live registers, no spills at HD = 128.
//   MMAs are mma.sync m16n8k16 (f16 or bf16) on sm_80+; on sm_75 each is
//   issued as two m16n8k8 f16 MMAs (same register layout).
//
//   forward: grid (ceil(T/QR), H, B). A block owns QR query rows: 128 (32
//     per warp, two m16 row blocks, so every K and V fragment feeds two
//     MMAs) on sm_80+ at HD = 64, else 64 (16 per warp); plan<>::QR. It
//     loops over key tiles of BK (64; 32 at HD = 128 on sm_80+) up to L
//     only (fully masked tiles are skipped); S = Q K^T, online max/sum, P
//     (rounded to the dtype) . V.
//     Blocks wholly past L write zeros; rows past L in the last tile are
//     computed on zero queries and written as 0 (lse 0); a warp whose rows
//     all lie past L skips the math (it still joins loads and barriers).
//     smem: NB x (K, V) tiles of BK rows, HD+8 elements a row. sm_75: one
//     buffer and Q's own QR rows (51 KB at HD = 128). sm_80+: two buffers,
//     Q staged in the second and moved to registers before the loop fills
//     it (34 KB at HD = 128, 36 KB at 64: two 128-row blocks fit sm_86/89's
//     100 KB a SM).
//   forward on Hopper (compute capability 9.0, the sm_90a binary; hd 64
//     and 128; with ESMT_CUDA_ATTN_WGMMA=1 until a GPU has confirmed it,
//     else the above):
//     attn_fwd_wgmma, cuda_attention_wgmma.cuh. 256 threads = 2 warpgroups,
//     each owning 64 query rows (128 a block); Q, K and V tiles (64 keys)
//     are stored in the 128-byte swizzle layout that wgmma's matrix
//     descriptors read, K/V double-buffered by cp.async as above, made
//     visible to the async proxy by fence.proxy.async + barrier. Per tile:
//     S = Q K^T by HD/16 m64n64k16 wgmma (A and B from smem), wait, the
//     same online softmax, P converted in registers to the A operand, O +=
//     P V by 4 (8 at hd 128) m64n64k16 wgmma (B = V, N-major), wait. No
//     branch encloses an MMA (ptxas would serialise them), so a last tile's
//     masked keys and rows past L are computed on zeros. smem 49 KB (hd 64,
//     2 blocks a SM, 128 registers), 97 KB (hd 128, 1 block).
//   Every kernel carries a __launch_bounds__ minimum of blocks per SM per
//   head dim and architecture class (plan<>::*_blocks), chosen so that
//   none spills (tests/gpu/kernel_budget.txt has the figures).
//   backward (FlashAttention-2 style, deterministic, no atomics):
//     1. D = rowsum(dO * O) in fp32 (scratch [B*H*T], stream-ordered alloc;
//        hd/4 lanes per (token, head), 8-byte loads).
//     2. dK/dV kernel: a block owns 64 keys, loops over query tiles of BJ
//        (32 on sm_80+, 16 at HD = 128 on sm_75, else 64): S^T = K Q^T, P^T =
//        exp2(S^T - lse2) recomputed from the saved lse, dV += P^T dO,
//        dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q. On sm_80+ at
//        HD <= 64 it is built for 3 blocks per SM (__launch_bounds__(128,
//        3): <= 168 registers, 37 KB smem at HD = 64).
//     3. dQ kernel: a block owns 64 queries, loops over key tiles of BI (32
//        on sm_80+ and at HD = 128, else 64): S, P, dP = dO V^T, dS,
//        dQ += dS K. (128 queries, as the forward, measured 1% faster on the
//        H100 at 240 registers and 54 KB: 1 block/SM on sm_86/89; not kept.)
//     The block-resident operands' A fragments (K, V in 2; Q, dO in 3) are
//     held in registers for the whole loop at HD <= 64 on sm_75 and at
//     HD <= 32 on sm_80+ (at HD = 64 that keeps dK/dV within 168 registers,
//     3 blocks per SM, and dQ within 128, 4 blocks per SM).
//     The cost of determinism: S and dP are computed twice (7 tile GEMMs
//     instead of FA2's 5 with atomic dQ), ~1.4x the backward MMA work.
//   backward, non-deterministic (esmtb_attention_args.nondeterministic,
//     ABI 1.6; config backend.deterministic false): FA2's 5-GEMM schedule.
//     Step 2 runs as attn_bwd_dkdvq_mma: per query tile, after dK and dV,
//     dS^T (rounded to the dtype, keys past L zeroed) goes to a [64 keys]
//     [BJ + 8] smem tile, a barrier, and the 4 warps compute that tile's
//     dQ share dS K (A by ldmatrix.x4.trans from the [key][query] tile)
//     and add it with fp32 atomics (RED) into a zeroed [tokens][H][hd]
//     scratch; the order in which key blocks add differs run to run. Then
//     attn_bwd_dq_store applies scale and the inverse rotary through the
//     same staging tile and store as step 3 (zeros past L). dK and dV are
//     bitwise the deterministic kernel's.
//     Results go through an fp32 smem staging tile so that the inverse
//     rotary (which pairs columns c and c + hd/2) and the scales (dq *=
//     scale; dk *= ln 2 because Q carried log2 e) are applied before the
//     store; rows past L get zeros.
//     smem (sm_80+): dK/dV 37 KB at HD = 64, 69 KB at 128; dQ 36 KB at 64,
//     68 KB at 128. sm_75 (one buffer) stays <= 64 KB, its limit.
// F32: a simpler scalar path (no tensor cores), one thread per query row
//   (forward, dQ) or per key row (dK/dV), 32-row tiles of the other operand
//   in smem, same algorithm and the same masking rules.
//
// Files: this one checks arguments and runs the fp32 path and the rowsum;
// the 16-bit kernels and their launches compile in one translation unit
// per dtype (cuda_attention_f16.cu, cuda_attention_bf16.cu over
// cuda_attention_dispatch.cuh), in parallel.
// attention_probs (ABI 2.2, inference only) is the forward's rotary pass
// and a plain per-row softmax kernel (cuda_attention_probs.cuh).
//
// Host emulation: the ESMT_CUDA_EMULATE build (backends/cuda_emu) compiles
// these files as host code, with mma.sync/ldmatrix/cp.async/wgmma per the PTX
// semantics (a cp.async lands at its wait_group: touching the destination
// earlier is reported), and runs every kernel under race, bounds and
// stream-order checking.
//
// Argument checks: shapes, dtype, hd, alignment (qkv/out/dout/dqkv 8 bytes,
// the rotary tables 16). The values of seq_len (in [1, T]) or of the packed
// segments (ascending, disjoint, inside one row) live on the device: reading
// them back costs a stream sync per call, so that check runs only with
// ESMT_CUDA_ATTN_CHECK=1 (the tests set it). The core validates both on the
// host before uploading them, and the kernels clamp what they read to the
// buffers (seq_len to [0, T], a segment to its row), so an unchecked bad
// value gives wrong numbers, never an out-of-bounds access.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_attention.h"
#include "cuda_launch.cuh"
#include "cuda_device.h"

#include "cuda_attention_device.cuh"
#include "cuda_attention_f32.cuh"
#include "cuda_attention_dispatch.cuh"
#include "cuda_attention_probs.cuh"

// ---- host side ----
namespace {
using namespace esmt_attn;


template <int HD>
esmtb_status fwd_f32(const attn_params &p, cudaStream_t st) {
  const dim3 grid = attn_grid(p, F32_ROWS);
  ESMT_LAUNCH(grid, F32_ROWS, f32_fwd_bytes(HD), st, attn_fwd_f32<HD>)(p);
  return launch_err("attention_forward");
}

template <int HD>
esmtb_status bwd_f32(const attn_params &p, cudaStream_t st) {
  const dim3 grid = attn_grid(p, F32_ROWS);
  ESMT_LAUNCH(grid, F32_ROWS, f32_bwd_bytes(HD), st, attn_bwd_dkdv_f32<HD>)(p);
  ESMT_LAUNCH(grid, F32_ROWS, f32_fwd_bytes(HD), st, attn_bwd_dq_f32<HD>)(p);
  return launch_err("attention_backward");
}

esmtb_status dispatch_f32(const attn_params &p, int backward, cudaStream_t st) {
  switch (p.hd) {
    case 16: return backward ? bwd_f32<16>(p, st) : fwd_f32<16>(p, st);
    case 24: return backward ? bwd_f32<24>(p, st) : fwd_f32<24>(p, st);
    case 32: return backward ? bwd_f32<32>(p, st) : fwd_f32<32>(p, st);
    case 64: return backward ? bwd_f32<64>(p, st) : fwd_f32<64>(p, st);
    default: return backward ? bwd_f32<128>(p, st) : fwd_f32<128>(p, st);
  }
}

// Packed rows when the caller's struct has the field and uses it.
const esmtb_segments *segments_of(const esmtb_attention_args *a) {
  if (a->struct_size < offsetof(esmtb_attention_args, segs) + sizeof(esmtb_segments)) return NULL;
  return a->segs.nseg > 0 ? &a->segs : NULL;
}

// Reads the segment arrays back (a sync, like the seq_len check) and checks
// the layout backend.h promises: ascending, disjoint, each inside one row.
esmtb_status check_segments(const esmtb_attention_args *a, const esmtb_segments *sg,
                            const char *op, cudaStream_t st) {
  const size_t n = (size_t)sg->nseg;
  int32_t *h = (int32_t *)malloc(2 * n * sizeof(int32_t));
  if (!h) return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
  esmtb_status rc = cuda_check(cudaMemcpyAsync(h, sg->start, n * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, st), op);
  if (!rc) rc = cuda_check(cudaMemcpyAsync(h + n, sg->len, n * sizeof(int32_t),
                                           cudaMemcpyDeviceToHost, st), op);
  if (!rc) rc = cuda_check(cudaStreamSynchronize(st), op);
  long long end = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    const long long s0 = h[i], L = h[n + i];
    if (s0 < end || L < 1 || L > sg->max_len || s0 / a->T != (s0 + L - 1) / a->T ||
        s0 + L > (long long)a->B * a->T)
      rc = cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: segment %zu (start %lld, len %lld) is not ascending, disjoint, "
                        "inside one row of %d and at most max_len %d", op, i, s0, L, a->T,
                     sg->max_len);
    end = s0 + L;
  }
  free(h);
  return rc;
}

size_t esize(esmtb_dtype t) { return t == ESMTB_F32 ? 4 : 2; }

bool aligned8(const void *ptr) { return ((uintptr_t)ptr & 7u) == 0; }

enum { FORWARD = 0, BACKWARD = 1, PROBS = 2 };

// The probabilities' buffer when the caller's struct has the field (ABI 2.2).
float *probs_of(const esmtb_attention_args *a) {
  if (a->struct_size < offsetof(esmtb_attention_args, probs) + sizeof(float *)) return NULL;
  return a->probs;
}

esmtb_status check_args(esmtb_device *dev, const esmtb_attention_args *a, int mode,
                        cudaStream_t st, int *major_out, int *minor_out) {
  static const char *const names[] = {"attention_forward", "attention_backward",
                                      "attention_probs"};
  const char *op = names[mode];
  const int backward = mode == BACKWARD;
  if (!dev || !a) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
  const esmtb_segments *sg = segments_of(a);
  if (!a->qkv || (!sg && !a->seq_len) || !a->rope_cos || !a->rope_sin ||
      (mode == PROBS ? !probs_of(a) : !a->out || !a->lse))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: NULL argument", op);
  if (backward && (!a->dout || !a->dqkv)) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: NULL gradient", op);
  if (a->dtype != ESMTB_F32 && a->dtype != ESMTB_F16 && a->dtype != ESMTB_BF16)
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "%s: dtype %d unsupported (f32, f16, bf16)", op, (int)a->dtype);
  if (a->hd != 16 && a->hd != 24 && a->hd != 32 && a->hd != 64 && a->hd != 128)
    return cuda_fail(ESMTB_ERR_UNSUPPORTED, "%s: head dim %d unsupported (16, 24, 32, 64, 128)", op, a->hd);
  if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->B > 65535 || a->H > 65535 ||
      (long long)a->T * a->H * a->hd * 3 > INT32_MAX)
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: bad shape B=%d T=%d H=%d hd=%d", op, a->B, a->T, a->H, a->hd);
  if (!isfinite(a->scale)) return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: scale is not finite", op);
  if (!aligned8(a->qkv) || (mode != PROBS && !aligned8(a->out)) || (backward && (!aligned8(a->dout) ||
                                                              !aligned8(a->dqkv))))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: qkv/out/dout/dqkv must be 8-byte aligned", op);
  if (((uintptr_t)a->rope_cos & 15u) || ((uintptr_t)a->rope_sin & 15u))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: rope_cos/rope_sin must be 16-byte aligned", op);
  esmtb_status rc = cuda_check(cudaSetDevice(dev->ordinal), op);
  if (rc) return rc;
  {
    int major = 0;
    rc = cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                           dev->ordinal), op);
    if (rc) return rc;
    *major_out = major;
    rc = cuda_check(cudaDeviceGetAttribute(minor_out, cudaDevAttrComputeCapabilityMinor,
                                           dev->ordinal), op);
    if (rc) return rc;
    if (a->dtype == ESMTB_BF16 && major < 8) return cuda_fail(ESMTB_ERR_UNSUPPORTED, "%s: bf16 needs compute capability 8.0+", op);
  }
  if (sg && (sg->nseg > a->B * a->T || sg->max_len < 1 || sg->max_len > a->T || !sg->start ||
             !sg->len || sg->nseg > 65535))
    return cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: bad segments (nseg=%d max_len=%d, B*T=%d, at most 65535)", op,
                     sg->nseg, sg->max_len, a->B * a->T);
  const char *check = getenv("ESMT_CUDA_ATTN_CHECK");
  if (!(check && check[0] == '1')) return 0;
  if (sg) return check_segments(a, sg, op, st);
  int32_t small[64];
  int32_t *h = a->B <= 64 ? small : (int32_t *)malloc((size_t)a->B * sizeof(int32_t));
  if (!h) return cuda_fail(ESMTB_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
  rc = cuda_check(cudaMemcpyAsync(h, a->seq_len, (size_t)a->B * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, st), op);
  if (!rc) rc = cuda_check(cudaStreamSynchronize(st), op);
  for (int b = 0; !rc && b < a->B; b++)
    if (h[b] < 1 || h[b] > a->T)
      rc = cuda_fail(ESMTB_ERR_INVALID_ARGUMENT, "%s: seq_len[%d] = %d outside [1, %d]", op, b, h[b], a->T);
  if (h != small) free(h);
  return rc;
}

attn_params make_params(const esmtb_attention_args *a) {
  attn_params p;
  p.qkv = a->qkv;
  p.qr = p.kr = NULL;
  p.v16 = ((uintptr_t)a->qkv & 15u) == 0;
  p.o16 = a->dout && ((uintptr_t)a->dout & 15u) == 0;
  p.out = a->out;
  p.lse = a->lse;
  p.dout = a->dout;
  p.dqkv = a->dqkv;
  p.D = NULL;
  p.dq_acc = NULL;
  // ABI 1.6: the caller allows the non-deterministic backward (16-bit only:
  // the fp32 scalar path has one backward)
  p.nondeterministic = a->struct_size >= offsetof(esmtb_attention_args, nondeterministic) +
                                             sizeof a->nondeterministic &&
                       a->nondeterministic == 1;
  p.seq_len = a->seq_len;
  p.cos = a->rope_cos;
  p.sin = a->rope_sin;
  p.B = a->B;
  p.T = a->T;
  p.H = a->H;
  p.hd = a->hd;
  p.scale = a->scale;
  const esmtb_segments *sg = segments_of(a);
  p.nseg = sg ? sg->nseg : 0;
  p.max_len = sg ? sg->max_len : 0;
  p.seg_start = sg ? sg->start : NULL;
  p.seg_len = sg ? sg->len : NULL;
  return p;
}

}  // namespace

extern "C" esmtb_status cuda_attention_forward(esmtb_device *dev, const esmtb_attention_args *a,
                                               esmtb_stream *s) {
  cudaStream_t st = cuda_stream_of(s);
  int major = 0, minor = 0;
  esmtb_status rc = check_args(dev, a, FORWARD, st, &major, &minor);
  if (rc) return rc;
  const attn_params p = make_params(a);
  if (p.nseg > 0) {  // tokens outside every segment: out = 0, lse = 0
    const size_t tok = (size_t)a->B * a->T;
    rc = cuda_check(cudaMemsetAsync(a->out, 0, tok * a->H * a->hd * esize(a->dtype), st),
                    "attention_forward: zero padding");
    if (!rc) rc = cuda_check(cudaMemsetAsync(a->lse, 0, tok * a->H * sizeof(float), st),
                             "attention_forward: zero padding");
    if (rc) return rc;
  }
  switch (a->dtype) {
    case ESMTB_F16: return attn_mma_f16(p, 0, major, minor, st);
    case ESMTB_BF16: return attn_mma_bf16(p, 0, major, minor, st);
    default: return dispatch_f32(p, 0, st);
  }
}

extern "C" esmtb_status cuda_attention_backward(esmtb_device *dev, const esmtb_attention_args *a,
                                                esmtb_stream *s) {
  cudaStream_t st = cuda_stream_of(s);
  int major = 0, minor = 0;
  esmtb_status rc = check_args(dev, a, BACKWARD, st, &major, &minor);
  if (rc) return rc;
  attn_params p = make_params(a);
  const size_t rows = (size_t)a->B * a->H * a->T;
  float *D = NULL;
  rc = cuda_scratch((void **)&D, rows * sizeof(float), st, "attention_backward");
  if (rc) return rc;
  p.D = D;
  if (p.nseg > 0)  // tokens outside every segment: dqkv = 0
    rc = cuda_check(cudaMemsetAsync(a->dqkv, 0, (size_t)a->B * a->T * 3 * a->H * a->hd *
                                                    esize(a->dtype), st),
                    "attention_backward: zero padding");
  const size_t rows_per_warp = (size_t)(32 / dot_lanes(a->hd));
  const size_t threads = (rows + rows_per_warp - 1) / rows_per_warp * 32;
  const unsigned blocks = (unsigned)((threads + 255) / 256);
  if (!rc) {
    switch (a->dtype) {
      case ESMTB_F16:
        ESMT_LAUNCH(blocks, 256, 0, st, attn_bwd_dot<__half>)(p, D);
        rc = launch_err("attention_backward: rowsum");
        if (!rc) rc = attn_mma_f16(p, 1, major, minor, st);
        break;
      case ESMTB_BF16:
        ESMT_LAUNCH(blocks, 256, 0, st, attn_bwd_dot<__nv_bfloat16>)(p, D);
        rc = launch_err("attention_backward: rowsum");
        if (!rc) rc = attn_mma_bf16(p, 1, major, minor, st);
        break;
      default:
        ESMT_LAUNCH(blocks, 256, 0, st, attn_bwd_dot<float>)(p, D);
        rc = launch_err("attention_backward: rowsum");
        if (!rc) rc = dispatch_f32(p, 1, st);
        break;
    }
  }
  esmtb_status rc2 = cuda_check(cudaFreeAsync(D, st), "attention_backward: scratch");
  return rc ? rc : rc2;
}

namespace {

// The forward's rotary pass into scratch, then attn_probs (cuda_attention_probs.cuh).
template <typename T>
esmtb_status probs_of_dtype(attn_params p, float *probs, cudaStream_t st) {
  const char *op = "attention_probs";
  const size_t n = (size_t)p.B * p.T * p.H * p.hd;
  T *qk = NULL;
  esmtb_status rc = cuda_scratch((void **)&qk, 2 * n * sizeof(T), st, op);
  if (rc) return rc;
  p.qr = qk;
  p.kr = qk + n;
  ESMT_LAUNCH(attn_grid(p, 64), NTHREADS, 0, st, attn_rotate_qk<T>)(p);
  rc = launch_err("attention_probs: rotary");
  if (!rc) {
    const dim3 grid((unsigned)(p.nseg > 0 ? p.max_len : p.T), (unsigned)p.H,
                    (unsigned)(p.nseg > 0 ? p.nseg : p.B));
    ESMT_LAUNCH(grid, PROBS_THREADS, 0, st, attn_probs<T>)(p, probs);
    rc = launch_err(op);
  }
  esmtb_status rc2 = cuda_check(cudaFreeAsync(qk, st), "attention_probs: scratch");
  return rc ? rc : rc2;
}

}  // namespace

extern "C" esmtb_status cuda_attention_probs(esmtb_device *dev, const esmtb_attention_args *a,
                                             esmtb_stream *s) {
  cudaStream_t st = cuda_stream_of(s);
  int major = 0, minor = 0;
  esmtb_status rc = check_args(dev, a, PROBS, st, &major, &minor);
  if (rc) return rc;
  float *probs = probs_of(a);
  rc = cuda_check(cudaMemsetAsync(probs, 0, (size_t)a->B * a->H * a->T * a->T * sizeof(float),
                                  st), "attention_probs: zero");
  if (rc) return rc;
  const attn_params p = make_params(a);
  switch (a->dtype) {
    case ESMTB_F16: return probs_of_dtype<__half>(p, probs, st);
    case ESMTB_BF16: return probs_of_dtype<__nv_bfloat16>(p, probs, st);
    default: return probs_of_dtype<float>(p, probs, st);
  }
}

extern "C" void cuda_fill_attention_ops(esmtb_compute_ops *ops) {
  ops->attention_forward = cuda_attention_forward;
  ops->attention_backward = cuda_attention_backward;
  ops->attention_probs = cuda_attention_probs;
}
