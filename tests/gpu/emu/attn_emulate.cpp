// Runs cuda_attention.cu's kernels (forward, rowsum, dK/dV, dQ; f16, bf16
// via the tensor-core kernels and f32 via the scalar ones) on the host under
// attn_emulate.h and checks them against a float64 reference, with NaN in
// padded rows. For machines without a GPU; slow, so shapes are small.
//   g++ -std=c++17 -O2 -DESMT_ATTN_EMULATE -I tests/gpu/emu \
//       tests/gpu/emu/attn_emulate.cpp -o /tmp/attn_emu && /tmp/attn_emu
#include <ucontext.h>

#include <cmath>
#include <functional>
#include <type_traits>
#include <vector>

#include "../../../backends/cuda_common/cuda_attention.cu"
using namespace esmt_attn;

#include <stdio.h>

// ---- the emulated block ----
namespace emu {
constexpr int kMaxThreads = 256;
constexpr size_t kStack = 256 * 1024;
ucontext_t sched;
ucontext_t ctx[kMaxThreads];
char *stacks[kMaxThreads];
int done[kMaxThreads];
int cur;
std::function<void()> body;
float fbuf[kMaxThreads];
uint32_t abuf[kMaxThreads][4], bbuf[kMaxThreads][2];
const void *pbuf[kMaxThreads];

void trampoline() {
  body();
  done[cur] = 1;
}

void launch(dim3 grid, int threads, std::function<void()> f) {
  body = f;
  blockDim = dim3(threads);
  gridDim = grid;
  for (int i = 0; i < threads; i++)
    if (!stacks[i]) stacks[i] = (char *)malloc(kStack);
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        blockIdx = dim3(x, y, z);
        for (int i = 0; i < threads; i++) {
          getcontext(&ctx[i]);
          ctx[i].uc_stack.ss_sp = stacks[i];
          ctx[i].uc_stack.ss_size = kStack;
          ctx[i].uc_link = &sched;
          makecontext(&ctx[i], trampoline, 0);
          done[i] = 0;
        }
        int alive = threads;
        while (alive > 0)
          for (int i = 0; i < threads; i++) {
            if (done[i]) continue;
            cur = i;
            threadIdx = dim3(i);
            swapcontext(&sched, &ctx[i]);
            if (done[i]) alive--;
          }
      }
}
}  // namespace emu

void emu_barrier(void) { swapcontext(&emu::ctx[emu::cur], &emu::sched); }

float emu_shfl_xor(float v, int mask) {
  const int tid = (int)threadIdx.x;
  emu::fbuf[tid] = v;
  emu_barrier();
  const float r = emu::fbuf[tid ^ mask];
  emu_barrier();
  return r;
}

static float half_of(uint32_t u, int hi, int bf) {
  const uint16_t h = (uint16_t)(hi ? u >> 16 : u & 0xffffu);
  return bf ? emu_bf2f(h) : emu_h2f(h);
}

// m16n8k16 row.col: a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8,
// 2t+8..); b0 (k 2t.., n g), b1 (k 2t+8.., n g); c0,c1 (g, 2t..), c2,c3 (g+8, 2t..).
void emu_mma16816(float c[4], const uint32_t a[4], const uint32_t b[2], int bf) {
  const int tid = (int)threadIdx.x, w0 = tid & ~31, lane = tid & 31, g = lane >> 2, t = lane & 3;
  memcpy(emu::abuf[tid], a, 16);
  memcpy(emu::bbuf[tid], b, 8);
  emu_barrier();
  for (int e = 0; e < 4; e++) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float acc = c[e];
    for (int k = 0; k < 16; k++) {
      const int kk = k & 7, khi = k >> 3;
      const float av = half_of(emu::abuf[w0 + (row & 7) * 4 + (kk >> 1)][(row >> 3) + 2 * khi],
                               kk & 1, bf);
      const float bv = half_of(emu::bbuf[w0 + col * 4 + (kk >> 1)][khi], kk & 1, bf);
      acc += av * bv;
    }
    c[e] = acc;
  }
  emu_barrier();
}

// ldmatrix.x2.trans: thread l gets, of matrix m (rows from threads 8m..8m+7),
// elements (row 2t, col g) and (row 2t+1, col g).
void emu_ldsm_x2_trans(uint32_t b[2], const void *p) {
  const int tid = (int)threadIdx.x, w0 = tid & ~31, lane = tid & 31, g = lane >> 2, t = lane & 3;
  emu::pbuf[tid] = p;
  emu_barrier();
  for (int m = 0; m < 2; m++) {
    const uint16_t *r0 = (const uint16_t *)emu::pbuf[w0 + m * 8 + 2 * t];
    const uint16_t *r1 = (const uint16_t *)emu::pbuf[w0 + m * 8 + 2 * t + 1];
    b[m] = (uint32_t)r0[g] | ((uint32_t)r1[g] << 16);
  }
  emu_barrier();
}

// ---- float64 reference ----
struct ref_out {
  std::vector<double> out, lse, dqkv;
};
// Sequences are segments (start, len) of the flattened B*T tokens; rotary
// positions count from each segment's start.
static ref_out reference(const std::vector<float> &qkv, const std::vector<float> &dout,
                         const std::vector<float> &cs, const std::vector<float> &sn,
                         const std::vector<int32_t> &seg_start, const std::vector<int32_t> &len,
                         int B, int T, int H, int hd, double scale) {
  const int D = H * hd, half = hd / 2;
  ref_out r;
  r.out.assign((size_t)B * T * D, 0.0);
  r.lse.assign((size_t)B * H * T, 0.0);
  r.dqkv.assign((size_t)B * T * 3 * D, 0.0);
  for (size_t sgi = 0; sgi < len.size(); sgi++)
    for (int h = 0; h < H; h++) {
      const int L = len[sgi], s0 = seg_start[sgi], b = s0 / T, t0 = s0 % T;
      std::vector<double> q(L * hd), k(L * hd), v(L * hd), P(L * L), dO(L * hd), O(L * hd);
      for (int t = 0; t < L; t++) {
        const float *row = &qkv[((size_t)s0 + t) * 3 * D];
        for (int i = 0; i < half; i++) {
          const double c = cs[t * half + i], s = sn[t * half + i];
          const double q0 = row[h * hd + i] * scale, q1 = row[h * hd + i + half] * scale;
          const double k0 = row[D + h * hd + i], k1 = row[D + h * hd + i + half];
          q[t * hd + i] = q0 * c - q1 * s;
          q[t * hd + i + half] = q1 * c + q0 * s;
          k[t * hd + i] = k0 * c - k1 * s;
          k[t * hd + i + half] = k1 * c + k0 * s;
        }
        for (int c = 0; c < hd; c++) {
          v[t * hd + c] = row[2 * D + h * hd + c];
          dO[t * hd + c] = dout[((size_t)s0 + t) * D + h * hd + c];
        }
      }
      for (int i = 0; i < L; i++) {
        double mx = -INFINITY, z = 0;
        for (int j = 0; j < L; j++) {
          double s = 0;
          for (int c = 0; c < hd; c++) s += q[i * hd + c] * k[j * hd + c];
          P[i * L + j] = s;
          mx = fmax(mx, s);
        }
        for (int j = 0; j < L; j++) z += (P[i * L + j] = exp(P[i * L + j] - mx));
        for (int j = 0; j < L; j++) P[i * L + j] /= z;
        r.lse[((size_t)b * H + h) * T + t0 + i] = mx + log(z);
        for (int c = 0; c < hd; c++) {
          double o = 0;
          for (int j = 0; j < L; j++) o += P[i * L + j] * v[j * hd + c];
          O[i * hd + c] = o;
          r.out[((size_t)s0 + i) * D + h * hd + c] = o;
        }
      }
      std::vector<double> dq(L * hd, 0.0), dk(L * hd, 0.0), dv(L * hd, 0.0);
      for (int i = 0; i < L; i++) {
        double Di = 0;
        for (int c = 0; c < hd; c++) Di += dO[i * hd + c] * O[i * hd + c];
        for (int j = 0; j < L; j++) {
          double dp = 0;
          for (int c = 0; c < hd; c++) dp += dO[i * hd + c] * v[j * hd + c];
          const double p = P[i * L + j], ds = p * (dp - Di);
          for (int c = 0; c < hd; c++) {
            dv[j * hd + c] += p * dO[i * hd + c];
            dq[i * hd + c] += ds * k[j * hd + c];
            dk[j * hd + c] += ds * q[i * hd + c];
          }
        }
      }
      for (int t = 0; t < L; t++) {
        double *row = &r.dqkv[((size_t)s0 + t) * 3 * D];
        for (int i = 0; i < half; i++) {
          const double c = cs[t * half + i], s = sn[t * half + i];
          const double a0 = dq[t * hd + i], a1 = dq[t * hd + i + half];
          row[h * hd + i] = (a0 * c + a1 * s) * scale;
          row[h * hd + i + half] = (a1 * c - a0 * s) * scale;
          const double b0 = dk[t * hd + i], b1 = dk[t * hd + i + half];
          row[D + h * hd + i] = b0 * c + b1 * s;
          row[D + h * hd + i + half] = b1 * c - b0 * s;
        }
        for (int c = 0; c < hd; c++) row[2 * D + h * hd + c] = dv[t * hd + c];
      }
    }
  return r;
}

// ---- running the kernels ----
// What cuda_attention.cu's host side does before the kernels of packed rows.
template <typename T> static void zero_padding(const attn_params &p, bool backward) {
  if (p.nseg == 0) return;
  const size_t tok = (size_t)p.B * p.T, w = (size_t)p.H * p.hd;
  if (backward) {
    memset(p.dqkv, 0, tok * 3 * w * sizeof(T));
  } else {
    memset(p.out, 0, tok * w * sizeof(T));
    memset(p.lse, 0, tok * p.H * sizeof(float));
  }
}
template <typename T, int HD, int HDR> void run_mma(attn_params p, float *D) {
  const dim3 grid = attn_grid(p, 64);
  zero_padding<T>(p, false);
  emu::launch(grid, NTHREADS, [&] { attn_fwd_mma<T, HD, HDR>(p); });
  const size_t rows = (size_t)p.B * p.H * p.T;
  emu::launch(dim3((unsigned)((rows * 32 + 255) / 256)), 256, [&] { attn_bwd_dot<T>(p, D); });
  p.D = D;
  zero_padding<T>(p, true);
  emu::launch(grid, NTHREADS, [&] { attn_bwd_dkdv_mma<T, HD, HDR>(p); });
  emu::launch(grid, NTHREADS, [&] { attn_bwd_dq_mma<T, HD, HDR>(p); });
}
template <int HD> void run_f32(attn_params p, float *D) {
  const dim3 grid = attn_grid(p, F32_ROWS);
  zero_padding<float>(p, false);
  emu::launch(grid, F32_ROWS, [&] { attn_fwd_f32<HD>(p); });
  const size_t rows = (size_t)p.B * p.H * p.T;
  emu::launch(dim3((unsigned)((rows * 32 + 255) / 256)), 256, [&] { attn_bwd_dot<float>(p, D); });
  p.D = D;
  zero_padding<float>(p, true);
  emu::launch(grid, F32_ROWS, [&] { attn_bwd_dkdv_f32<HD>(p); });
  emu::launch(grid, F32_ROWS, [&] { attn_bwd_dq_f32<HD>(p); });
}
template <typename T> void run_mma_hd(const attn_params &p, float *D) {
  switch (p.hd) {
    case 16: run_mma<T, 16, 16>(p, D); break;
    case 24: run_mma<T, 32, 24>(p, D); break;
    case 32: run_mma<T, 32, 32>(p, D); break;
    case 64: run_mma<T, 64, 64>(p, D); break;
    default: run_mma<T, 128, 128>(p, D); break;
  }
}
static void run_f32_hd(const attn_params &p, float *D) {
  switch (p.hd) {
    case 16: run_f32<16>(p, D); break;
    case 24: run_f32<24>(p, D); break;
    case 32: run_f32<32>(p, D); break;
    case 64: run_f32<64>(p, D); break;
    default: run_f32<128>(p, D); break;
  }
}

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static double urand() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

static int g_fail;

template <typename T> static float tof(T v) { return (float)v; }

// dt: 0 f32, 1 f16, 2 bf16
template <typename T>
// Right-padded rows (seg_start empty: len[b] per row) or packed rows
// (segments seg_start[i], len[i] of the flattened tokens).
static void run_case(int dt, int B, int Tn, int H, int hd, std::vector<int32_t> len,
                     std::vector<int32_t> seg_start = {}) {
  const bool packed = !seg_start.empty();
  std::vector<int32_t> row_len;  // per row in the right-padded layout
  if (!packed) {
    row_len = len;
    for (int b = 0; b < B; b++) seg_start.push_back(b * Tn);
  }
  std::vector<char> in_seg((size_t)B * Tn, 0);
  int max_len = 0;
  for (size_t i = 0; i < len.size(); i++) {
    for (int t = 0; t < len[i]; t++) in_seg[(size_t)seg_start[i] + t] = 1;
    max_len = len[i] > max_len ? len[i] : max_len;
  }
  const int D = H * hd, half = hd / 2;
  const size_t nq = (size_t)B * Tn * 3 * D, no = (size_t)B * Tn * D;
  std::vector<float> qkv(nq), dout(no), cs(Tn * half), sn(Tn * half);
  auto rnd = [&](float v) { return (float)T(v); };
  for (auto &x : qkv) x = rnd((float)(urand() * 1.5));
  for (auto &x : dout) x = rnd((float)urand());
  for (int t = 0; t < Tn; t++)
    for (int i = 0; i < half; i++) {
      const double ang = t * pow(10000.0, -2.0 * i / hd);
      cs[t * half + i] = (float)cos(ang);
      sn[t * half + i] = (float)sin(ang);
    }
  const double scale = 1.0 / sqrt((double)hd);
  ref_out r = reference(qkv, dout, cs, sn, seg_start, len, B, Tn, H, hd, (float)scale);
  std::vector<T> gq(nq), go(no, T(NAN)), gdo(no), gd(nq, T(NAN));
  for (size_t i = 0; i < nq; i++) gq[i] = T(qkv[i]);
  for (size_t i = 0; i < no; i++) gdo[i] = T(dout[i]);
  for (size_t tok = 0; tok < (size_t)B * Tn; tok++)
    if (!in_seg[tok]) {  // padding is poisoned: it must never be read
      for (int k = 0; k < 3 * D; k++) gq[tok * 3 * D + k] = T(NAN);
      for (int k = 0; k < D; k++) gdo[tok * D + k] = T(NAN);
    }
  std::vector<float> lse((size_t)B * H * Tn, NAN), Dbuf((size_t)B * H * Tn, NAN);
  attn_params p;
  p.qkv = gq.data(); p.out = go.data(); p.lse = lse.data(); p.dout = gdo.data();
  p.dqkv = gd.data(); p.D = nullptr; p.seq_len = packed ? nullptr : row_len.data(); p.cos = cs.data(); p.sin = sn.data();
  p.B = B; p.T = Tn; p.H = H; p.hd = hd; p.scale = (float)scale;
  p.nseg = packed ? (int)len.size() : 0; p.max_len = packed ? max_len : 0;
  p.seg_start = packed ? seg_start.data() : nullptr; p.seg_len = packed ? len.data() : nullptr;
  if constexpr (std::is_same<T, float>::value) run_f32_hd(p, Dbuf.data());
  else run_mma_hd<T>(p, Dbuf.data());
  double e_o = 0, n_o = 0, e_l = 0, e_g[3] = {0, 0, 0}, n_g[3] = {0, 0, 0};
  int bad = 0, pad = 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < Tn; t++) {
      const bool valid = in_seg[(size_t)b * Tn + t];
      for (int k = 0; k < D; k++) {
        const size_t i = ((size_t)b * Tn + t) * D + k;
        const double v = tof(go[i]);
        if (!std::isfinite(v)) bad++;
        if (!valid && v != 0.0) pad++;
        e_o += (v - r.out[i]) * (v - r.out[i]);
        n_o += r.out[i] * r.out[i];
      }
      for (int k = 0; k < 3 * D; k++) {
        const size_t i = ((size_t)b * Tn + t) * 3 * D + k;
        const double v = tof(gd[i]);
        if (!std::isfinite(v)) bad++;
        if (!valid && v != 0.0) pad++;
        e_g[k / D] += (v - r.dqkv[i]) * (v - r.dqkv[i]);
        n_g[k / D] += r.dqkv[i] * r.dqkv[i];
      }
      for (int h = 0; h < H; h++) {
        const size_t i = ((size_t)b * H + h) * Tn + t;
        if (!std::isfinite(lse[i])) bad++;
        e_l = fmax(e_l, fabs(lse[i] - r.lse[i]));
      }
    }
  const double ro = sqrt(e_o / n_o), rq = sqrt(e_g[0] / n_g[0]), rk = sqrt(e_g[1] / n_g[1]);
  const double rv = sqrt(e_g[2] / n_g[2]);
  const double tol = dt == 0 ? 1e-4 : 1e-2;
  const bool ok = ro <= tol && rq <= tol && rk <= tol && rv <= tol && e_l <= tol && !bad && !pad;
  if (!ok) g_fail++;
  printf("%-4s %s%s hd=%-3d B=%d T=%-3d H=%d: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e nonfinite=%d "
         "pad!=0=%d\n",
         ok ? "ok" : "FAIL", packed ? "packed " : "", dt == 0 ? "f32" : dt == 1 ? "f16" : "bf16", hd, B, Tn, H, ro, e_l, rq,
         rk, rv, bad, pad);
  fflush(stdout);
}

int main(int argc, char **argv) {
  const int hds[] = {16, 24, 32, 64, 128};
  const bool quick = argc > 1;
  for (int hi = 0; hi < 5; hi++) {
    const int hd = hds[hi];
    run_case<__half>(1, 3, 70, 1, hd, {70, 1, 33});
    run_case<__nv_bfloat16>(2, 3, 70, 1, hd, {70, 1, 33});
    run_case<float>(0, 3, 70, 1, hd, {70, 1, 33});
    // packed rows of 70: [40 | 1 | 20 | pad 9], [pad 3 | 67], [2 | 5 | pad 63]
    const std::vector<int32_t> plen = {40, 1, 20, 67, 2, 5}, pst = {0, 40, 41, 73, 140, 142};
    run_case<__nv_bfloat16>(2, 3, 70, 1, hd, plen, pst);
    run_case<__half>(1, 3, 70, 1, hd, plen, pst);
    run_case<float>(0, 3, 70, 1, hd, plen, pst);
    if (!quick) {
      run_case<__nv_bfloat16>(2, 2, 130, 2, hd, {130, 64});
      run_case<__half>(1, 2, 130, 1, hd, {129, 65});
      run_case<float>(0, 2, 130, 1, hd, {129, 65});
      // a segment longer than one 64-row tile next to short ones, 2 heads
      run_case<__nv_bfloat16>(2, 2, 130, 2, hd, {100, 30, 3, 127}, {0, 100, 130, 133});
    }
  }
  printf(g_fail ? "%d FAILED\n" : "all emulated cases passed\n", g_fail);
  return g_fail ? 1 : 0;
}
