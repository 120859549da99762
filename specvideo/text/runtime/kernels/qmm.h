// (qmm.h) Weight-only quantised matrix products for the CPU, in the layout of llama.cpp's k-quants:
// y (M, N) = x (M, K) @ W^T with W[n, k] = d[n, j] * sc[n, g] * u[n, k] - dmin[n, j] * mn[n, g]
// (u: unsigned codes of 4, 5, 6 or 8 bits; g: a group of G inputs; j: a super-block of S groups).
// Q4_K maps onto it exactly (G 32, S 8), Q6_K too (G 16, S 16), Q4_1, Q5_0 and Q8_0 with S 1; any
// dense weight can be rounded to it.
//
// The activations are rounded to int8 per super-block (as llama.cpp's Q8_K / Q8 blocks), so the
// product of a super-block is an integer sum of dot products: AVX-512 VNNI's vpdpbusd multiplies 64 code bytes
// by 64 activation bytes per instruction. Each 16-output tile's codes are unpacked once and used
// for every row of the call: a check of 4 rows reads and unpacks the weights once, not 4 times.
//
// Every row is computed by the same sequence of operations whatever the call's row count and
// whichever thread runs it: a row's output bits do not depend on its neighbours (the invariant
// verifier's contract; specvideo/text/runtime/invariant.py).
#pragma once
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace qmm {


constexpr int TILE = 16;  // outputs per tile: the 16 int32 lanes of a zmm register
constexpr int MR = 4;  // rows per micro-kernel call (3 accumulators a row stay in registers)
constexpr int PREFETCH = 1536;  // bytes ahead of the codes being read (a probe of 512-4096: all alike within noise)

// Rows x (M, K) float32 -> codes (M, K) int8, rounded per super-block of A = G * S inputs with one
// scale dx (llama.cpp's Q8_K for k-quants, Q8 blocks of 32 for the others), and each group's sum
// of codes (the term that the groups' minimums multiply).
inline void quantize_rows(const float* x, int64_t M, int64_t K, int64_t G, int64_t S, int8_t* xq, float* dx, int32_t* xs) {
  const int64_t A = G * S, groups = K / G, supers = K / A;
  at::parallel_for(0, M, 16, [&](int64_t m0, int64_t m1) {  // a decode call's few rows: no thread start
    for (int64_t m = m0; m < m1; ++m) {
      const float* row = x + m * K;
      int8_t* q = xq + m * K;
      for (int64_t b = 0; b < K; b += A) {
        float amax = 0.f;
        for (int64_t i = 0; i < A; ++i) amax = std::max(amax, std::fabs(row[b + i]));
        const float d = amax / 127.f;
        const float id = d > 0.f ? 1.f / d : 0.f;
        for (int64_t i = 0; i < A; ++i) q[b + i] = (int8_t)std::nearbyint(row[b + i] * id);
        dx[m * supers + b / A] = d;
      }
      for (int64_t g = 0; g < groups; ++g) {
        int32_t sum = 0;
        for (int64_t i = g * G; i < (g + 1) * G; ++i) sum += q[i];
        xs[m * groups + g] = sum;
      }
    }
  });
}

// 16 super-block scales as floats: float32 as they are, float16 (a GGUF file's own) converted.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }

// One tile (16 outputs) for R rows: codes (groups, zmm, 64) uint8, sub-scales (groups, C, 16) int8
// (C 2: sc, mn; C 1: mn = sc, as Q6_K's; C 0: sc = mn = 1, as blocks with one scale per 32 inputs),
// super-block scales (supers, 2, 16) SUP. Per super-block and row, in integers:
// isum = sum_g sc_g * (u_g . xq_g), msum = sum_g mn_g * sum(xq_g); then in floats
// y += dx * (d * isum - dmin * msum), super-block after super-block in a fixed order.
template <int BITS, int G, int C, typename SUP, int R>
inline void tile_rows(const uint8_t* codes, const int8_t* scales, const SUP* supers, int64_t groups, int64_t S,
                      const int8_t* xq, const float* dx, const int32_t* xs, int64_t K, int64_t groups_all,
                      int64_t supers_all, float* y, int64_t ldy) {
  constexpr int QUADS = G / 4;  // 4-input steps per group: one vpdpbusd each
  constexpr int ZMM = BITS == 4 ? QUADS / 2 : BITS == 5 ? QUADS / 2 + 1 : BITS == 6 ? 3 : QUADS;  // code registers a group
  static_assert(BITS != 5 || G == 32, "5-bit codes come in groups of 32");
  static_assert(BITS != 6 || G == 16, "6-bit codes come in groups of 16");
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t j = 0; j < groups / S; ++j) {
    __m512i isum[R], msum[R];
    for (int r = 0; r < R; ++r) isum[r] = msum[r] = _mm512_setzero_si512();
    for (int64_t g = j * S; g < (j + 1) * S; ++g) {
      __m512i w[QUADS];
      const uint8_t* cg = codes + g * ZMM * 64;
      for (int q = 0; q < ZMM; ++q) _mm_prefetch((const char*)(cg + PREFETCH + q * 64), _MM_HINT_T0);
      if constexpr (C > 0) _mm_prefetch((const char*)(scales + g * C * TILE + PREFETCH / 4), _MM_HINT_T0);
      if constexpr (BITS == 4) {
        for (int q = 0; q < ZMM; ++q) {
          const __m512i packed = _mm512_loadu_si512(cg + q * 64);
          w[q] = _mm512_and_si512(packed, low);
          w[q + ZMM] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
        }
      } else if constexpr (BITS == 5) {  // 4-bit low parts as above, then one register of high bits (bit q: quad q's)
        const __m512i high = _mm512_loadu_si512(cg + 4 * 64), sixteen = _mm512_set1_epi8(16);
        for (int q = 0; q < 4; ++q) {
          const __m512i packed = _mm512_loadu_si512(cg + q * 64);
          w[q] = _mm512_and_si512(packed, low);
          w[q + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
        }
        for (int q = 0; q < QUADS; ++q)
          w[q] = _mm512_mask_add_epi8(w[q], _mm512_test_epi8_mask(high, _mm512_set1_epi8((char)(1 << q))), w[q], sixteen);
      } else if constexpr (BITS == 6) {  // low nibbles of quads 0 | 2 and 1 | 3, then 2-bit high parts
        const __m512i l0 = _mm512_loadu_si512(cg), l1 = _mm512_loadu_si512(cg + 64), top = _mm512_loadu_si512(cg + 128);
        const __m512i two = _mm512_set1_epi8(0x30);
        w[0] = _mm512_or_si512(_mm512_and_si512(l0, low), _mm512_and_si512(_mm512_slli_epi16(top, 4), two));
        w[1] = _mm512_or_si512(_mm512_and_si512(l1, low), _mm512_and_si512(_mm512_slli_epi16(top, 2), two));
        w[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low), _mm512_and_si512(top, two));
        w[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low), _mm512_and_si512(_mm512_srli_epi16(top, 2), two));
      } else {
        for (int q = 0; q < ZMM; ++q) w[q] = _mm512_loadu_si512(cg + q * 64);
      }
      const int8_t* sg = scales + g * C * TILE;
      __m512i sc = _mm512_set1_epi32(1), mn = sc;
      if constexpr (C > 0) sc = mn = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)sg));
      if constexpr (C > 1) mn = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(sg + TILE)));
      for (int r = 0; r < R; ++r) {
        const int32_t* xr = (const int32_t*)(xq + r * K + g * G);
        __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
        for (int q = 0; q < QUADS; q += 2) {
          even = _mm512_dpbusd_epi32(even, w[q], _mm512_set1_epi32(xr[q]));
          odd = _mm512_dpbusd_epi32(odd, w[q + 1], _mm512_set1_epi32(xr[q + 1]));
        }
        const __m512i sum = _mm512_add_epi32(even, odd), x_sum = _mm512_set1_epi32(xs[r * groups_all + g]);
        isum[r] = _mm512_add_epi32(isum[r], C > 0 ? _mm512_mullo_epi32(sum, sc) : sum);
        msum[r] = _mm512_add_epi32(msum[r], C > 0 ? _mm512_mullo_epi32(mn, x_sum) : x_sum);
      }
    }
    const __m512 d = load16(supers + j * 2 * TILE), dmin = load16(supers + j * 2 * TILE + TILE);
    for (int r = 0; r < R; ++r) {
      const __m512 t = _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(msum[r])));
      acc[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(dx[r * supers_all + j]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * ldy, acc[r]);
}

template <int BITS, int G, int C, typename SUP>
inline void run(const uint8_t* codes, const int8_t* scales, const SUP* supers, int64_t N, int64_t K, int64_t S,
         const int8_t* xq, const float* dx, const int32_t* xs, int64_t M, float* y, int64_t ldy) {
  const int64_t groups = K / G, tiles = N / TILE, supers_all = groups / S;
  const int64_t code_tile = groups * (BITS == 4 ? G / 8 : BITS == 5 ? G / 8 + 1 : BITS == 6 ? 3 : G / 4) * 64;  // a tile's code bytes
  at::parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint8_t* ct = codes + t * code_tile;
      const int8_t* st = scales + t * groups * C * TILE;
      const SUP* dt = supers + t * supers_all * 2 * TILE;
      for (int64_t m = 0; m < M; m += MR) {
        const int64_t R = std::min<int64_t>(MR, M - m);
        const int8_t* xr = xq + m * K;
        float* yr = y + m * ldy + t * TILE;
        switch (R) {
#define ROWS(n) case n: tile_rows<BITS, G, C, SUP, n>(ct, st, dt, groups, S, xr, dx + m * supers_all, xs + m * groups, K, groups, supers_all, yr, ldy); break;
          ROWS(1) ROWS(2) ROWS(3) ROWS(4)
#undef ROWS
        }
      }
    }
  });
}


// One weight in the kernel's layout: codes (N / 16, groups, bytes) uint8, scales (N / 16, groups,
// C, 16) int8 (C 0, 1 or 2), supers (N / 16, groups / S, 2, 16) float32 or float16.
struct Part {
  torch::Tensor codes, scales, supers;
  int64_t bits, group, S;
  int64_t N() const { return codes.size(0) * TILE; }
  int64_t K() const { return codes.size(1) * group; }
  int64_t C() const { return scales.size(2); }
  bool half() const { return supers.scalar_type() == torch::kHalf; }
};

inline void check(const Part& p) {
  TORCH_CHECK(p.K() % (p.group * p.S) == 0, "K must be a multiple of the super-block (group * S)");
  TORCH_CHECK(p.scales.size(1) == p.K() / p.group, "codes and scales: K / group groups");
  TORCH_CHECK(p.supers.size(1) == p.K() / p.group / p.S, "supers: K / (group * S) super-blocks");
  TORCH_CHECK(p.half() || p.supers.scalar_type() == torch::kFloat32, "supers: float32 or float16");
  const bool ok = ((p.bits == 4 || p.bits == 5 || p.bits == 8) && p.group == 32 && p.C() != 1) ||
                  (p.bits == 6 && p.group == 16 && p.C() == 1);
  TORCH_CHECK(ok, "unsupported codes: bits ", p.bits, ", group ", p.group, ", ", p.C(),
              " sub-scales (4/32, 5/32 and 8/32 with 0 or 2, 6/16 with 1)");
}

// y[:, :N] (rows ldy apart) = x (M, K) @ W^T: the activations rounded per super-block, then the tiles.
inline void product(const Part& p, const float* x, int64_t M, float* y, int64_t ldy) {
  const int64_t K = p.K(), N = p.N(), A = p.group * p.S;
  std::vector<int8_t> xq(M * K);
  std::vector<float> dx(M * (K / A));
  std::vector<int32_t> xs(M * (K / p.group));
  quantize_rows(x, M, K, p.group, p.S, xq.data(), dx.data(), xs.data());
  const auto* c = p.codes.data_ptr<uint8_t>();
  const auto* s = p.scales.data_ptr<int8_t>();
  const auto* f = p.half() ? nullptr : p.supers.data_ptr<float>();
  const auto* h = p.half() ? (const uint16_t*)p.supers.data_ptr<at::Half>() : nullptr;
#define RUN(bits, group, C, d) run<bits, group, C>(c, s, d, N, K, p.S, xq.data(), dx.data(), xs.data(), M, y, ldy)
#define EITHER(bits, group, C) { if (h) RUN(bits, group, C, h); else RUN(bits, group, C, f); return; }
  if (p.bits == 4 && p.C() == 2) EITHER(4, 32, 2)
  if (p.bits == 4) EITHER(4, 32, 0)
  if (p.bits == 5 && p.C() == 2) EITHER(5, 32, 2)
  if (p.bits == 5) EITHER(5, 32, 0)
  if (p.bits == 6) EITHER(6, 16, 1)
  if (p.C() == 2) EITHER(8, 32, 2)
  EITHER(8, 32, 0)
#undef EITHER
#undef RUN
}

}  // namespace qmm
