#include "kernels/cpu/gemm_bf16.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cache_aligned.h"
#include "core/check.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16_amx.h"
#include "kernels/cpu/isa_targets.h"
#include "kernels/cpu/row_blocks.h"

namespace dscale::cpu {
namespace {

// Weight rows (outputs) that share one pass over the inputs: their BF16 values are widened once
// per x row tile and stay in registers. AVX-512 tiles take 4 outputs (× up to 6 rows: 24 of the
// 32 registers accumulate); AVX2 tiles 3 (× up to 4 rows: 12 accumulators, 3 weights and one
// input of the 16 registers, which runs near the FMA rate where 2 outputs × 6 rows, loading
// each input vector for every 2 FMAs, ran at half of it).
constexpr int64_t kOutGroup = 4;
constexpr int64_t kAvx2OutGroup = 3;
// Below this many weights a call runs on one thread: a fork/join would cost more than the work.
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;
// Output groups a thread takes at a time from the tiled calls' shared queue.
constexpr int64_t kGroupsPerChunk = 16;
// Bytes of one f32 weight panel of widen-and-sgemm (benchmarks only): small enough to stay in
// cache while sgemm streams the activations through it.
constexpr int64_t kPanelBytes = int64_t{8} << 20;
// How far ahead of its loads a tile prefetches each weight row: memory-mapped checkpoint pages
// are 4 KiB, so the hardware prefetchers stop at every page boundary and the weight streams need
// the help to stay at memory bandwidth. A tile of one output is a thread's only stream and goes
// further ahead (docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int64_t kPrefetchBytes = 1024;
constexpr int64_t kSingleStreamPrefetchBytes = 2048;

// The register tiles' loops over their fixed rows and outputs must be unrolled completely, or
// GCC at -O2 keeps the accumulator arrays in memory and every FMA becomes a load and a store.
#define DSCALE_UNROLL _Pragma("GCC unroll 16")

// BF16 weights per 64-byte cache line: the tiles issue one prefetch per weight row and line.
constexpr int64_t kLineWeights = 32;

// Prefetches the line kPrefetchBytes (one output: kSingleStreamPrefetchBytes) ahead of weight k
// in each of the kOuts rows from `wo`; near a row's end, the line as far into the same row of the
// next group of kOuts outputs (the rows that follow in memory), so short rows (in = 1024 at
// Qwen3-0.6B) start their tile in cache.
// Prefetches past the weights' end are harmless hints.
// always_inline: GCC 12 treats an out-of-line function of prefetches alone as const and drops
// its calls.
// kLineWeights f32 weights span two lines, both fetched.
// The BF16 dot-product tiles prefetch ahead only in a group's first tile: the later tiles of its
// rows (7 rows and more) find the weights in cache, and these prefetches in them cost 8-30% of a
// 16-row call on the 2-vCPU Zen 5 (docs/BENCHMARKS.md, "AMD Zen 5: the limits, and the kernels
// against them"). Every tile of four outputs also fetches the next group (DotPrefetch).
template <int kOuts, typename W>
__attribute__((always_inline)) inline void PrefetchLines(const W* wo, int64_t in, int64_t k) {
  constexpr int64_t kBytes = kOuts == 1 ? kSingleStreamPrefetchBytes : kPrefetchBytes;
  constexpr int64_t kAhead = kBytes / static_cast<int64_t>(sizeof(W));
  constexpr int64_t kLineBytes = 64;
  const W* at = k + kAhead < in ? wo + k + kAhead : wo + kOuts * in + (k + kAhead - in);
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) {
    const char* line = reinterpret_cast<const char*>(at + g * in);
    DSCALE_UNROLL
    for (int64_t b = 0; b < kLineWeights * static_cast<int64_t>(sizeof(W)); b += kLineBytes) {
      _mm_prefetch(line + b, _MM_HINT_T0);
    }
  }
}

inline float Bf16Bits(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

// A weight's value: BF16 bits widened (exact), or an f32 weight as it is.
inline float WeightValue(uint16_t bits) { return Bf16Bits(bits); }
inline float WeightValue(float value) { return value; }

inline void Put(float* y, float value, bool accumulate) { *y = accumulate ? *y + value : value; }

// Partial sums of the portable dot product: partial j adds the terms k ≡ j (mod 8) in order of k,
// then a fixed tree adds the partials. Eight independent chains, which the compiler keeps in
// vector registers, where one running sum would wait out an add's latency at every term (every
// row count now runs the tiles, prefill's too).
constexpr int kPortablePartials = 8;

template <typename W>
inline float PortableDot(const W* wo, const float* xr, int64_t in) {
  float p[kPortablePartials] = {};
  int64_t k = 0;
  for (; k + kPortablePartials <= in; k += kPortablePartials) {
    for (int j = 0; j < kPortablePartials; ++j) p[j] += WeightValue(wo[k + j]) * xr[k + j];
  }
  for (int j = 0; k + j < in; ++j) p[j] += WeightValue(wo[k + j]) * xr[k + j];
  return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

// Outputs [o_begin, o_end) for every row, in plain C++: each output one PortableDot, the same
// sum whatever rows share the call.
template <typename W>
void TiledPortable(const float* x, const W* w, float* y, int64_t rows, int64_t in, int64_t out,
                   bool accumulate, int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    for (int64_t r = 0; r < rows; ++r) {
      Put(y + r * out + o, PortableDot(w + o * in, x + r * in, in), accumulate);
    }
  }
}

// Input bytes up to which one or two rows take the outputs one at a time. Each thread then reads
// its weights as one sequential stream, which the hardware prefetchers follow better than four
// interleaved rows. Past this the inputs no longer sit in L1 beside the stream and one output per
// pass re-reads them from L2 for every output. The AVX2 tiles take the same rule (the runs:
// docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int64_t kSingleStreamInputBytes = 16 << 10;

// ---- AVX2 + FMA: 8 lanes, tiles of 3 outputs × up to 4 rows.

// Compiled for AVX2 + FMA whatever the build's baseline (isa_targets.h); called only where the
// CPU has them.
DSCALE_AVX2 inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
DSCALE_AVX2 inline __m256 LoadWeights8(const uint16_t* p) { return LoadBf16x8(p); }
DSCALE_AVX2 inline __m256 LoadWeights8(const float* p) { return _mm256_loadu_ps(p); }

DSCALE_AVX2 inline float Sum8(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// kRows rows of x (row r at x + r·in) against kOuts weight rows from `wo`; y[r·out + g] gets
// output g of row r.
template <int kRows, int kOuts, typename W>
DSCALE_AVX2 void TileAvx2(const float* x, const W* wo, int64_t in, float* y, int64_t out,
                          bool accumulate) {
  __m256 acc[kRows][kOuts];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  const auto step = [&](int64_t k) DSCALE_AVX2 {
    __m256 wv[kOuts];
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) wv[g] = LoadWeights8(wo + g * in + k);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * in + k);
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm256_fmadd_ps(wv[g], xv, acc[r][g]);
    }
  };
  int64_t k = 0;
  for (; k + kLineWeights <= in; k += kLineWeights) {
    PrefetchLines<kOuts>(wo, in, k);
    DSCALE_UNROLL
    for (int64_t j = 0; j < kLineWeights; j += 8) step(k + j);
  }
  for (; k + 8 <= in; k += 8) step(k);
  const int64_t vec_end = k;
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) {
      float sum = Sum8(acc[r][g]);
      for (int64_t k = vec_end; k < in; ++k) sum += WeightValue(wo[g * in + k]) * x[r * in + k];
      Put(y + r * out + g, sum, accumulate);
    }
  }
}

// `rows` rows from row r against the 3 outputs from o, in one tile of that height (1 … 4), kOuts
// outputs per pass (1 or kAvx2OutGroup; every output is the same sum in the same order either way).
template <int kOuts, typename W>
DSCALE_AVX2 void TileRowsAvx2(const float* x, const W* wo, float* y, int64_t in, int64_t out,
                              bool accumulate, int64_t r, int64_t o, int64_t rows) {
  const float* xr = x + r * in;
  for (int g0 = 0; g0 < kAvx2OutGroup; g0 += kOuts) {
    const W* wg = wo + g0 * in;
    float* yr = y + r * out + o + g0;
    switch (rows) {
      case 4:
        TileAvx2<4, kOuts>(xr, wg, in, yr, out, accumulate);
        break;
      case 3:
        TileAvx2<3, kOuts>(xr, wg, in, yr, out, accumulate);
        break;
      case 2:
        TileAvx2<2, kOuts>(xr, wg, in, yr, out, accumulate);
        break;
      default:
        TileAvx2<1, kOuts>(xr, wg, in, yr, out, accumulate);
        break;
    }
  }
}

// The rows go in the fewest tiles of at most 4, of heights differing by at most one; one or two
// rows whose inputs fit in kSingleStreamInputBytes take the outputs one at a time.
template <typename W>
DSCALE_AVX2 void TiledAvx2(const float* x, const W* w, float* y, int64_t rows, int64_t in,
                           int64_t out, bool accumulate, int64_t o_begin, int64_t o_end) {
  const int64_t tiles = (rows + 3) / 4;
  const bool single_stream =
      rows <= 2 && rows * in * static_cast<int64_t>(sizeof(float)) <= kSingleStreamInputBytes;
  int64_t o = o_begin;
  for (; o + kAvx2OutGroup <= o_end; o += kAvx2OutGroup) {
    const W* wo = w + o * in;
    for (int64_t t = 0, r = 0; t < tiles; ++t) {
      const int64_t height = rows / tiles + (t < rows % tiles ? 1 : 0);
      if (single_stream) {
        TileRowsAvx2<1>(x, wo, y, in, out, accumulate, r, o, height);
      } else {
        TileRowsAvx2<kAvx2OutGroup>(x, wo, y, in, out, accumulate, r, o, height);
      }
      r += height;
    }
  }
  TiledPortable(x, w, y, rows, in, out, accumulate, o, o_end);
}

// BF16 rounding as RoundBf16x16, 8 values at a time, widened back to f32.
DSCALE_AVX2 void RoundWideAvx2(const float* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    // The magnitudes are below 2^31, so the signed comparison is the unsigned one.
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    const __m256i value = _mm256_blendv_epi8(rounded, quiet, nan);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(value, 16)));
  }
  for (; i < n; ++i) dst[i] = Bf16Bits(F32ToBf16(src[i]));
}

// ---- AVX-512: 16 lanes; tiles of 4 outputs × up to 6 rows (24 accumulators of the 32
// registers).

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

DSCALE_AVX512 inline __m512 LoadBf16x16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
DSCALE_AVX512 inline __m512 LoadWeights16(const uint16_t* p) { return LoadBf16x16(p); }
DSCALE_AVX512 inline __m512 LoadWeights16(const float* p) { return _mm512_loadu_ps(p); }

// The sums of the lanes of four vectors, each added in _mm512_reduce_add_ps's order (lanes i and
// i + 8, then i + 4, then i + 2, then i + 1: floating-point addition commutes, so each sum is the
// same bits as that reduction's), the four done together in 13 instructions where four
// reductions take about 32: with 24 sums a tile and 64 steps of 24 dot products at 2,048 inputs,
// the separate reductions cost a fifth of a tile's time on a CPU that issues two dot products a
// cycle.
DSCALE_AVX512 inline void ReduceAdd4(__m512 a, __m512 b, __m512 c, __m512 d, float sums[4]) {
  // [a0..7 + a8..15 | b0..7 + b8..15], and the same of c, d.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  // 128-bit lane q: vector q's lanes i + (i + 4) of the above.
  const __m512 quads = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 pairs =
      _mm512_add_ps(quads, _mm512_permute_ps(quads, _MM_SHUFFLE(1, 0, 3, 2)));  // i + (i + 2)
  const __m512 ones =
      _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(2, 3, 0, 1)));  // i + (i + 1)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, ones);
  sums[0] = lanes[0];
  sums[1] = lanes[4];
  sums[2] = lanes[8];
  sums[3] = lanes[12];
}

// The sums of a tile's accumulators, acc[r][g] into sums[r][g], each in _mm512_reduce_add_ps's
// order.
template <int kRows, int kOuts>
DSCALE_AVX512 inline void ReduceTile(const __m512 (&acc)[kRows][kOuts], float sums[kRows][kOuts]) {
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    if constexpr (kOuts == 4) {
      ReduceAdd4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], sums[r]);
    } else {
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) sums[r][g] = _mm512_reduce_add_ps(acc[r][g]);
    }
  }
}

template <int kRows, int kOuts, typename W>
DSCALE_AVX512 void TileAvx512(const float* x, const W* wo, int64_t in, float sums[kRows][kOuts]) {
  __m512 acc[kRows][kOuts];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const auto step = [&](int64_t k) DSCALE_AVX512 {
    __m512 wv[kOuts];
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) wv[g] = LoadWeights16(wo + g * in + k);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m512 xv = _mm512_loadu_ps(x + r * in + k);
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm512_fmadd_ps(wv[g], xv, acc[r][g]);
    }
  };
  int64_t k = 0;
  for (; k + kLineWeights <= in; k += kLineWeights) {
    PrefetchLines<kOuts>(wo, in, k);
    DSCALE_UNROLL
    for (int64_t j = 0; j < kLineWeights; j += 16) step(k + j);
  }
  for (; k + 16 <= in; k += 16) step(k);
  const int64_t vec_end = k;
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) {
      float sum = _mm512_reduce_add_ps(acc[r][g]);
      for (int64_t k = vec_end; k < in; ++k) sum += WeightValue(wo[g * in + k]) * x[r * in + k];
      sums[r][g] = sum;
    }
  }
}

// Rows [r, r + kRows) against the kOutGroup outputs from o, kOuts outputs per pass (1 or
// kOutGroup). Every output is the same sum in the same order either way, so the choice never
// changes a result.
template <int kRows, int kOuts, typename W>
DSCALE_AVX512 void RowsAvx512(const float* x, const W* wo, float* y, int64_t in, int64_t out,
                              bool accumulate, int64_t r, int64_t o) {
  for (int g0 = 0; g0 < kOutGroup; g0 += kOuts) {
    float sums[kRows][kOuts];
    TileAvx512<kRows, kOuts, W>(x + r * in, wo + g0 * in, in, sums);
    for (int i = 0; i < kRows; ++i) {
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) Put(y + (r + i) * out + o + g0 + g, sums[i][g], accumulate);
    }
  }
}

// Which of a group's row tiles runs: tile `tile` of `tiles`, in order, and the weights of the
// group the same thread runs next (TiledGroups sets them). The BF16 dot-product tiles prefetch by
// it (TileDot).
struct TilePass {
  int64_t tile = 0, tiles = 1;
  const void* next_group = nullptr;
};

// The tile of `rows` rows (1 … 6) from row r: Rows::Run<kRows, kOuts> (the f32 tiles or the BF16
// dot-product tiles, inputs of type T), four outputs per pass, or one per pass for one or two rows
// whose inputs fit in kSingleStreamInputBytes.
template <typename Rows, typename T, typename W>
__attribute__((always_inline)) inline void TileRows(const T* x, const W* wo, float* y, int64_t in,
                                                    int64_t out, bool accumulate, int64_t r,
                                                    int64_t o, int64_t rows, TilePass pass) {
  const bool single_stream = rows * in * static_cast<int64_t>(sizeof(T)) <= kSingleStreamInputBytes;
  switch (rows) {
    case 6:
      return Rows::template Run<6, kOutGroup>(x, wo, y, in, out, accumulate, r, o, pass);
    case 5:
      return Rows::template Run<5, kOutGroup>(x, wo, y, in, out, accumulate, r, o, pass);
    case 4:
      return Rows::template Run<4, kOutGroup>(x, wo, y, in, out, accumulate, r, o, pass);
    case 3:
      return Rows::template Run<3, kOutGroup>(x, wo, y, in, out, accumulate, r, o, pass);
    case 2:
      return single_stream
                 ? Rows::template Run<2, 1>(x, wo, y, in, out, accumulate, r, o, pass)
                 : Rows::template Run<2, kOutGroup>(x, wo, y, in, out, accumulate, r, o, pass);
    default:
      return single_stream
                 ? Rows::template Run<1, 1>(x, wo, y, in, out, accumulate, r, o, pass)
                 : Rows::template Run<1, kOutGroup>(x, wo, y, in, out, accumulate, r, o, pass);
  }
}

// The AVX-512 tiles' partition of `rows` rows: the fewest tiles of at most 6, of heights differing
// by at most one (8 rows: 4 + 4, not 6 + 2, whose 2-row tile would run at half the FMA rate),
// the taller first.
inline int64_t TileCount(int64_t rows) { return (rows + 5) / 6; }
inline int64_t TileHeight(int64_t rows, int64_t tiles, int64_t t) {
  return rows / tiles + (t < rows % tiles ? 1 : 0);
}

// Every whole group of kOutGroup outputs in [o_begin, o_end), for all rows, in the tiles of
// TileCount and TileHeight, each told which of the group's tiles it is and, for the last group,
// the weights of the group the thread runs after the range (`after`; nullptr: the next in
// memory). Returns the first output left over.
template <typename Rows, typename T, typename W>
__attribute__((always_inline)) inline int64_t TiledGroups(const T* x, const W* w, float* y,
                                                          int64_t rows, int64_t in, int64_t out,
                                                          bool accumulate, int64_t o_begin,
                                                          int64_t o_end, const W* after = nullptr) {
  const int64_t tiles = TileCount(rows);
  int64_t o = o_begin;
  for (; o + kOutGroup <= o_end; o += kOutGroup) {
    const W* wo = w + o * in;
    const W* next_group =
        o + 2 * kOutGroup <= o_end || after == nullptr ? wo + kOutGroup * in : after;
    for (int64_t t = 0, r = 0; t < tiles; ++t) {
      const int64_t height = TileHeight(rows, tiles, t);
      TileRows<Rows>(x, wo, y, in, out, accumulate, r, o, height, TilePass{t, tiles, next_group});
      r += height;
    }
  }
  return o;
}

struct Avx512Rows {
  template <int kRows, int kOuts, typename W>
  DSCALE_AVX512 static void Run(const float* x, const W* wo, float* y, int64_t in, int64_t out,
                                bool accumulate, int64_t r, int64_t o, TilePass /*pass*/) {
    // The f32 tiles prefetch in every tile, as tuned on the CPUs that run them by default.
    RowsAvx512<kRows, kOuts, W>(x, wo, y, in, out, accumulate, r, o);
  }
};

template <typename W>
DSCALE_AVX512 void TiledAvx512(const float* x, const W* w, float* y, int64_t rows, int64_t in,
                               int64_t out, bool accumulate, int64_t o_begin, int64_t o_end) {
  const int64_t o = TiledGroups<Avx512Rows>(x, w, y, rows, in, out, accumulate, o_begin, o_end);
  TiledPortable(x, w, y, rows, in, out, accumulate, o, o_end);
}

// ---- AVX512-BF16: vdpbf16ps multiplies 32 BF16 pairs into 16 f32 lanes per instruction, so a
// step covers one 64-byte line of each weight row; tiles as for AVX-512 (4 outputs × up to 6
// rows, one output per pass for one or two rows of short inputs), the activations already
// rounded to BF16 bits and packed by PackRoundedTiles: each tile's rows step by step, the kRows
// lines of a step one after another (zeros past the inputs' end, to a whole step), so that a tile
// reads its activations as one sequential stream beside its 4 weight rows. Read row by row, a
// verify's 16 rows were 6 more streams, which the prefetchers did not keep in L1 once the rows
// outgrew it: a tile copy, one core, 18 rows, ran at 0.5-0.55 of the core's dot-product rate at
// 2,048 inputs and 0.43 at 6,144, against 0.6-0.7 packed (docs/BENCHMARKS.md, "AMD Zen 5: the
// limits, and the kernels against them").

// Inputs a packed step holds: the inputs rounded up to a whole step.
inline int64_t PackedInputs(int64_t in) {
  return (in + kLineWeights - 1) / kLineWeights * kLineWeights;
}

DSCALE_AVX512BF16 inline __m512bh LoadBh(const uint16_t* p) {
  return __builtin_bit_cast(__m512bh, _mm512_loadu_si512(p));
}

// The first `count` (< 32) values from p, zeros after: the zeros add exact zeros to the sums.
DSCALE_AVX512BF16 inline __m512bh LoadBhHead(const uint16_t* p, int64_t count) {
  const auto mask = static_cast<__mmask32>((uint32_t{1} << count) - 1);
  return __builtin_bit_cast(__m512bh, _mm512_maskz_loadu_epi16(mask, p));
}

// What a dot-product tile prefetches as it steps along its inputs. A tile of one output a pass
// (one or two rows of short inputs: decode rows) streams its row from memory and fetches the line
// kSingleStreamPrefetchBytes ahead into L1 (`ahead`). A group of four outputs is fetched into L2
// by the group before it: each of its tiles (6 rows at most a tile) fetches a share of the next
// group's lines at the inputs it is at, tile t of T the lines of all four rows at steps
// s ≡ t (mod T), so the memory streams the next group while the tiles multiply, evenly over
// their steps; the first tile also fetches its own lines kPrefetchBytes ahead from L2 into L1.
// Without these fetches a verify's rows took the weights' time at the read bandwidth plus the
// later tiles' products; with the later tiles alone fetching (the first tile's steps leaving the
// memory idle) 8 rows took 6-12% longer than with every tile fetching; and a group's only tile
// (3-6 rows), its four rows fetched from memory into L1 alone, read 24-27 GB/s where fetching the
// next group as well reads 28-31 (docs/BENCHMARKS.md, "AMD Zen 4: the limits, the kernels
// against them, and llama.cpp"). The fetches go to L2 because L1 holds the group's weights and
// a tile's activations.
struct DotPrefetch {
  bool ahead = false;
  const uint16_t* next_group = nullptr;
  int64_t phase = 0, period = 1;
};

// The prefetches of tile `pass` of a group of kOutGroup outputs.
inline DotPrefetch GroupTilePrefetch(TilePass pass) {
  return {.ahead = pass.tile == 0,
          .next_group = static_cast<const uint16_t*>(pass.next_group),
          .phase = pass.tile,
          .period = pass.tiles};
}

// x: the tile's packed activations (row r's inputs [k, k + 32) at x + k·kRows + 32·r).
// kFetchNext: whether the tile fetches next-group lines (a template argument, so that the loop of
// a one-output tile, a decode row's, has no test for them).
template <int kRows, int kOuts, bool kFetchNext>
DSCALE_AVX512BF16 void TileDot(const uint16_t* x, const uint16_t* wo, int64_t in,
                               float sums[kRows][kOuts], DotPrefetch prefetch) {
  __m512 acc[kRows][kOuts];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  int64_t steps_to_fetch = prefetch.phase;  // before this tile's next fetch of the next group
  int64_t k = 0;
  for (; k + kLineWeights <= in; k += kLineWeights) {
    if (prefetch.ahead) PrefetchLines<kOuts>(wo, in, k);
    if constexpr (kFetchNext) {
      if (steps_to_fetch == 0) {
        DSCALE_UNROLL
        for (int g = 0; g < kOutGroup; ++g) {
          _mm_prefetch(reinterpret_cast<const char*>(prefetch.next_group + g * in + k),
                       _MM_HINT_T1);
        }
        steps_to_fetch = prefetch.period;
      }
      --steps_to_fetch;
    }
    __m512bh wv[kOuts];
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) wv[g] = LoadBh(wo + g * in + k);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m512bh xv = LoadBh(x + k * kRows + r * kLineWeights);
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], xv, wv[g]);
    }
  }
  if (k < in) {
    const int64_t count = in - k;
    __m512bh wv[kOuts];
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) wv[g] = LoadBhHead(wo + g * in + k, count);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m512bh xv = LoadBh(x + k * kRows + r * kLineWeights);  // zeros past the end
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], xv, wv[g]);
    }
  }
  ReduceTile<kRows, kOuts>(acc, sums);
}

// As RowsAvx512: every output is the same sum in the same order whatever kOuts.
// x: the call's packed activations, the tile from row r.
template <int kRows, int kOuts>
DSCALE_AVX512BF16 void RowsDot(const uint16_t* x, const uint16_t* wo, float* y, int64_t in,
                               int64_t out, bool accumulate, int64_t r, int64_t o, TilePass pass) {
  for (int g0 = 0; g0 < kOutGroup; g0 += kOuts) {
    float sums[kRows][kOuts];
    const uint16_t* xt = x + r * PackedInputs(in);
    if constexpr (kOuts == 1) {  // (1-2 rows: a group's only tile)
      TileDot<kRows, kOuts, false>(xt, wo + g0 * in, in, sums, {.ahead = true});
    } else {
      TileDot<kRows, kOuts, true>(xt, wo + g0 * in, in, sums, GroupTilePrefetch(pass));
    }
    for (int i = 0; i < kRows; ++i) {
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) Put(y + (r + i) * out + o + g0 + g, sums[i][g], accumulate);
    }
  }
}

struct DotRows {
  template <int kRows, int kOuts>
  DSCALE_AVX512BF16 static void Run(const uint16_t* x, const uint16_t* wo, float* y, int64_t in,
                                    int64_t out, bool accumulate, int64_t r, int64_t o,
                                    TilePass pass) {
    RowsDot<kRows, kOuts>(x, wo, y, in, out, accumulate, r, o, pass);
  }
};

// run.template operator()<kRows>() for kRows = height, 1 … kMax.
template <int kMax = 6, typename Run>
__attribute__((always_inline)) inline void WithTileHeight(int64_t height, Run run) {
  if constexpr (kMax > 1) {
    if (height < kMax) return WithTileHeight<kMax - 1>(height, run);
  }
  run.template operator()<kMax>();
}

// Output o alone for the tile of `height` rows from row r (the same sums as in a group).
template <int kRows>
DSCALE_AVX512BF16 void OneOutputDot(const uint16_t* x, const uint16_t* w, float* y, int64_t in,
                                    int64_t out, bool accumulate, int64_t r, int64_t o) {
  float sums[kRows][1];
  TileDot<kRows, 1, false>(x + r * PackedInputs(in), w + o * in, in, sums, {.ahead = r == 0});
  for (int i = 0; i < kRows; ++i) Put(y + (r + i) * out + o, sums[i][0], accumulate);
}

// The outputs left over from whole groups, one at a time, in the same tiles (so the same sums).
// after: as TiledGroups'.
DSCALE_AVX512BF16 void TiledDot(const uint16_t* x, const uint16_t* w, float* y, int64_t rows,
                                int64_t in, int64_t out, bool accumulate, int64_t o_begin,
                                int64_t o_end, const uint16_t* after) {
  int64_t o = TiledGroups<DotRows>(x, w, y, rows, in, out, accumulate, o_begin, o_end, after);
  const int64_t tiles = TileCount(rows);
  for (; o < o_end; ++o) {
    for (int64_t t = 0, r = 0; t < tiles; ++t) {
      const int64_t height = TileHeight(rows, tiles, t);
      WithTileHeight(height, [&]<int kRows>() DSCALE_AVX512BF16 {
        OneOutputDot<kRows>(x, w, y, in, out, accumulate, r, o);
      });
      r += height;
    }
  }
}

// BF16 rounding to nearest even, as F32ToBf16 (core/dtype.h) does it, 16 values at a time: the
// bits of each BF16 value in the low half of a 32-bit lane.
DSCALE_AVX512 inline __m512i RoundBf16x16(const float* p) {
  const __m512i bits = _mm512_castps_si512(_mm512_loadu_ps(p));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

DSCALE_AVX512 void RoundBitsAvx512(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtepi32_epi16(RoundBf16x16(src + i)));
  }
  for (; i < n; ++i) dst[i] = F32ToBf16(src[i]);
}

// `rows` rows of `in` activations at x, rounded to BF16 and packed for TileDot: tile by tile
// (TileCount, TileHeight), each step's kRows lines of 32 in a row, zeros past the inputs' end.
// dst holds rows · PackedInputs(in) values.
DSCALE_AVX512 void PackRoundedTiles(const float* x, int64_t rows, int64_t in, uint16_t* dst) {
  const int64_t packed = PackedInputs(in), tiles = TileCount(rows);
  for (int64_t t = 0, r = 0; t < tiles; ++t) {
    const int64_t height = TileHeight(rows, tiles, t);
    uint16_t* tile = dst + r * packed;
    for (int64_t i = 0; i < height; ++i) {
      const float* src = x + (r + i) * in;
      for (int64_t k = 0; k < packed; k += kLineWeights) {
        uint16_t* line = tile + k * height + i * kLineWeights;
        if (k + kLineWeights <= in) {
          for (int64_t h = 0; h < kLineWeights; h += 16) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(line + h),
                                _mm512_cvtepi32_epi16(RoundBf16x16(src + k + h)));
          }
        } else {
          for (int64_t j = 0; j < kLineWeights; ++j) {
            line[j] = k + j < in ? F32ToBf16(src[k + j]) : uint16_t{0};
          }
        }
      }
    }
    r += height;
  }
}

DSCALE_AVX512 void RoundWideAvx512(const float* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(RoundBf16x16(src + i), 16)));
  }
  for (; i < n; ++i) dst[i] = Bf16Bits(F32ToBf16(src[i]));
}

#pragma GCC diagnostic pop

template <typename W>
using TiledFn = void (*)(const float*, const W*, float*, int64_t, int64_t, int64_t, bool, int64_t,
                         int64_t);

template <typename W>
TiledFn<W> TiledFor(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::kAvx512:
      return TiledAvx512<W>;
    case Bf16Isa::kAvx2:
      return TiledAvx2<W>;
    case Bf16Isa::kPortable:
      break;
  }
  return TiledPortable<W>;
}

// Outputs per tile of each variant: the threads split the output columns in whole groups.
int64_t OutGroupFor(Bf16Isa isa) { return isa == Bf16Isa::kAvx2 ? kAvx2OutGroup : kOutGroup; }

// (The variants take y's row stride where they name it `out`.)
template <typename W>
void RunTiled(Bf16Isa isa, const float* x, const W* w, float* y, int64_t rows, int64_t in,
              int64_t out, bool accumulate, int64_t ldy) {
  const TiledFn<W> fn = TiledFor<W>(isa);
  const int64_t group = OutGroupFor(isa);
  const int64_t groups = (out + group - 1) / group;
  ForRowBlocks(rows, [&](int64_t r0, int64_t n) {
    const float* xb = x + r0 * in;
    float* yb = y + r0 * ldy;
    // Chunks of groups taken as the threads come free rather than halves fixed in advance: on a
    // shared 2-vCPU guest one thread is often held up, and a static split makes the other wait
    // at the join (docs/BENCHMARKS.md, "An AVX2-only CPU"). Which thread computes an output never
    // changes its bits.
#pragma omp parallel for schedule(dynamic, kGroupsPerChunk) if (in * out >= kParallelMinWeights)
    for (int64_t g = 0; g < groups; ++g) {
      fn(xb, w, yb, n, in, ldy, accumulate, g * group, std::min(out, (g + 1) * group));
    }
  });
}

// dst[0, count) = the BF16 values at src, widened to f32 (on the threads, in blocks).
void WidenBf16(const uint16_t* src, int64_t count, float* dst) {
  constexpr int64_t kBlock = 4096;
  const WidenBf16Fn widen = WidenBf16For(BestBf16Isa());
  const int64_t blocks = (count + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (count >= kParallelMinWeights)
  for (int64_t b = 0; b < blocks; ++b) {
    widen(src + b * kBlock, std::min(kBlock, count - b * kBlock), dst + b * kBlock);
  }
}

void WidenAndSgemm(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                   int64_t out, bool accumulate, int64_t ldy) {
  DSCALE_CHECK(rows <= std::numeric_limits<blasint>::max() &&
               in <= std::numeric_limits<blasint>::max() &&
               ldy <= std::numeric_limits<blasint>::max());
  // Whole groups of 16 outputs per panel, at least 64 however wide the input (narrower panels
  // leave sgemm too little to block).
  const int64_t panel_outputs =
      std::max<int64_t>(64, kPanelBytes / (in * static_cast<int64_t>(sizeof(float))) / 16 * 16);
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(std::min(out, panel_outputs) * in));
  for (int64_t o0 = 0; o0 < out; o0 += panel_outputs) {
    const int64_t n = std::min(panel_outputs, out - o0);
    WidenBf16(w + o0 * in, n * in, panel.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
                static_cast<blasint>(n), static_cast<blasint>(in), 1.0f, x,
                static_cast<blasint>(in), panel.data(), static_cast<blasint>(in),
                accumulate ? 1.0f : 0.0f, y + o0, static_cast<blasint>(ldy));
  }
}

void RoundWidePortable(const float* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16Bits(F32ToBf16(src[i]));
}

// dst[0, n) = src[0, n) rounded to BF16 and widened back to f32 (exact), with `isa`'s vectors.
void RoundWide(Bf16Isa isa, const float* src, int64_t n, float* dst) {
  switch (isa) {
    case Bf16Isa::kAvx512:
      return RoundWideAvx512(src, n, dst);
    case Bf16Isa::kAvx2:
      return RoundWideAvx2(src, n, dst);
    case Bf16Isa::kPortable:
      break;
  }
  RoundWidePortable(src, n, dst);
}

// The f32 tiles a Bf16DotIsa other than kAvx512Bf16 runs on the widened rounded activations.
Bf16Isa FmaIsaOf(Bf16DotIsa isa) {
  switch (isa) {
    case Bf16DotIsa::kAvx512:
    case Bf16DotIsa::kAvx512Bf16:
    case Bf16DotIsa::kAmx:
      return Bf16Isa::kAvx512;
    case Bf16DotIsa::kAvx2:
      return Bf16Isa::kAvx2;
    case Bf16DotIsa::kPortable:
      break;
  }
  return Bf16Isa::kPortable;
}

const std::vector<Bf16DotIsa>& DotIsas() {
  static const std::vector<Bf16DotIsa> isas = SupportedBf16DotIsas(CpuFeaturesInUse());
  return isas;
}

// fn(begin, end, following) for each chunk [begin, end) of [0, items), `chunk` items each, once,
// on the threads where `parallel`; `following` is the first item of the chunk the same thread
// runs next, or -1. A thread claims its next chunk as it starts one, so that the work can fetch
// ahead into it; OpenMP's dynamic schedule hands a thread its next chunk only once it asks, and
// the first group of every chunk of 16 then started with nothing fetched: the dot-product calls
// ran 2-4% longer at 4-16 rows (docs/BENCHMARKS.md, "AMD Zen 4: the limits, the kernels against
// them, and llama.cpp"). Chunks are still taken as threads come free; a held-up thread delays at
// most the chunk it holds in reserve besides the one it runs.
template <typename Fn>
void ForChunksClaimedAhead(int64_t items, int64_t chunk, bool parallel, Fn fn) {
  const int64_t chunks = (items + chunk - 1) / chunk;
  std::atomic<int64_t> claimed{0};
#pragma omp parallel if (parallel)
  {
    int64_t c = claimed.fetch_add(1, std::memory_order_relaxed);
    while (c < chunks) {
      const int64_t following = claimed.fetch_add(1, std::memory_order_relaxed);
      fn(c * chunk, std::min(items, (c + 1) * chunk), following < chunks ? following * chunk : -1);
      c = following;
    }
  }
}

// Activation rows rounded once per call, read by every thread of the call (the calling thread's
// buffers: a call's tiles never outlive it).
thread_local CacheAlignedVector<uint16_t> rounded_bits;
thread_local CacheAlignedVector<float> rounded_wide;

// RoundBitsAvx512 in blocks on the threads where there are many values (a prompt's rows), which
// on the calling thread alone waited for it (docs/BENCHMARKS.md, "A prompt's activations rounded
// and packed on the threads").
void RoundBitsOnThreads(const float* src, int64_t n, uint16_t* dst) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMinWeights)
  for (int64_t b = 0; b < blocks; ++b) {
    RoundBitsAvx512(src + b * kBlock, std::min(kBlock, n - b * kBlock), dst + b * kBlock);
  }
}

// LinearBf16 with BF16-rounded activations: AMX's tiles or `isa`'s register tiles, for any row
// count.
void RunRounded(Bf16DotIsa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate, int64_t ldy) {
  const int64_t n = rows * in;
  if (isa == Bf16DotIsa::kAmx) {
    rounded_bits.resize(static_cast<size_t>(n));
    RoundBitsOnThreads(x, n, rounded_bits.data());
    LinearAmxBf16(rounded_bits.data(), w, y, rows, in, out, accumulate, ldy);
    return;
  }
  if (isa == Bf16DotIsa::kAvx512Bf16) {
    const int64_t groups = (out + kOutGroup - 1) / kOutGroup;
    ForRowBlocks(rows, [&](int64_t r0, int64_t block_rows) {
      rounded_bits.resize(static_cast<size_t>(block_rows * PackedInputs(in)));
      PackRoundedTiles(x + r0 * in, block_rows, in, rounded_bits.data());
      const uint16_t* xb = rounded_bits.data();
      float* yb = y + r0 * ldy;
      ForChunksClaimedAhead(groups, kGroupsPerChunk, in * out >= kParallelMinWeights,
                            [&](int64_t g_begin, int64_t g_end, int64_t following) {
                              for (int64_t g = g_begin; g < g_end; ++g) {
                                const uint16_t* after = g + 1 < g_end || following < 0
                                                            ? nullptr
                                                            : w + following * kOutGroup * in;
                                TiledDot(xb, w, yb, block_rows, in, ldy, accumulate, g * kOutGroup,
                                         std::min(out, (g + 1) * kOutGroup), after);
                              }
                            });
    });
    return;
  }
  const Bf16Isa fma_isa = FmaIsaOf(isa);
  rounded_wide.resize(static_cast<size_t>(n));
  RoundWide(fma_isa, x, n, rounded_wide.data());
  RunTiled(fma_isa, rounded_wide.data(), w, y, rows, in, out, accumulate, ldy);
}

}  // namespace

std::string_view Bf16ActivationsName(Bf16Activations activations) {
  return activations == Bf16Activations::kBf16 ? "bf16" : "f32";
}

std::optional<Bf16Activations> Bf16ActivationsFromName(std::string_view name) {
  if (name == "bf16") return Bf16Activations::kBf16;
  if (name == "f32") return Bf16Activations::kF32;
  return std::nullopt;
}

Bf16Activations PreferredBf16Activations() {
  const bool bf16_tiles_pay =
      SupportedBf16DotIsas().back() == Bf16DotIsa::kAmx || HasFullRateAvx512Bf16();
  return bf16_tiles_pay ? Bf16Activations::kBf16 : Bf16Activations::kF32;
}

std::string_view Bf16DotIsaName(Bf16DotIsa isa) {
  switch (isa) {
    case Bf16DotIsa::kAmx:
      return "amx";
    case Bf16DotIsa::kAvx512Bf16:
      return "avx512bf16";
    case Bf16DotIsa::kAvx512:
      return "avx512";
    case Bf16DotIsa::kAvx2:
      return "avx2";
    case Bf16DotIsa::kPortable:
      break;
  }
  return "portable";
}

std::vector<Bf16DotIsa> SupportedBf16DotIsas() { return DotIsas(); }

std::vector<Bf16DotIsa> SupportedBf16DotIsas(CpuIsaCap cap) {
  return SupportedBf16DotIsas(CpuFeaturesFor(cap));
}

std::vector<Bf16DotIsa> SupportedBf16DotIsas(const CpuFeatures& features) {
  std::vector<Bf16DotIsa> found;
  for (const Bf16Isa isa : SupportedBf16Isas(features)) {
    found.push_back(isa == Bf16Isa::kAvx512 ? Bf16DotIsa::kAvx512
                    : isa == Bf16Isa::kAvx2 ? Bf16DotIsa::kAvx2
                                            : Bf16DotIsa::kPortable);
  }
  if (HasAvx512Bf16(features)) found.push_back(Bf16DotIsa::kAvx512Bf16);
  if (HasAvx512Bf16(features) && HasAmxBf16(features)) found.push_back(Bf16DotIsa::kAmx);
  return found;
}

void RoundToBf16(const float* src, int64_t n, uint16_t* dst) {
  if (BestBf16Isa() == Bf16Isa::kAvx512) return RoundBitsAvx512(src, n, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToBf16(src[i]);
}

void LinearBf16DotTiled(Bf16DotIsa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                        int64_t in, int64_t out, bool accumulate) {
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0);
  const std::vector<Bf16DotIsa>& supported = DotIsas();
  DSCALE_CHECK_MSG(std::find(supported.begin(), supported.end(), isa) != supported.end(),
                   "this CPU cannot run the requested BF16 kernel variant");
  if (rows == 0 || out == 0) return;
  RunRounded(isa, x, w, y, rows, in, out, accumulate, out);
}

void LinearBf16Tiled(Bf16Isa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                     int64_t in, int64_t out, bool accumulate) {
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0);
  CheckBf16IsaSupported(isa);
  RunTiled(isa, x, w, y, rows, in, out, accumulate, out);
}

void LinearF32Tiled(Bf16Isa isa, const float* x, const float* w, float* y, int64_t rows, int64_t in,
                    int64_t out, bool accumulate, int64_t ldy) {
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  CheckBf16IsaSupported(isa);
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  RunTiled(isa, x, w, y, rows, in, out, accumulate, ldy);
}

void LinearBf16WidenSgemm(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                          int64_t out, bool accumulate) {
  DSCALE_CHECK(rows > 0 && in > 0 && out > 0);
  WidenAndSgemm(x, w, y, rows, in, out, accumulate, out);
}

void LinearBf16(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in, int64_t out,
                bool accumulate, int64_t ldy, Bf16Activations activations) {
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  if (activations == Bf16Activations::kBf16) {
    RunRounded(DotIsas().back(), x, w, y, rows, in, out, accumulate, ldy);
  } else {
    RunTiled(BestBf16Isa(), x, w, y, rows, in, out, accumulate, ldy);
  }
}

}  // namespace dscale::cpu
