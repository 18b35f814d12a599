#include "kernels/cpu/gemm_bf16.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"

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
// Bytes of one f32 weight panel of the many-row path: small enough to stay in cache while
// sgemm streams the activations through it.
constexpr int64_t kPanelBytes = int64_t{8} << 20;
// How far ahead of its loads a tile prefetches each weight row: memory-mapped checkpoint pages
// are 4 KiB, so the hardware prefetchers stop at every page boundary and the weight streams need
// the help to stay at memory bandwidth. A tile of one output is a thread's only stream and goes
// further ahead (2 KiB read 0.97-1.0 of the read bandwidth where 1 KiB read 0.92-0.95; Qwen3
// widths, 2 threads, AMD EPYC).
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
template <int kOuts>
__attribute__((always_inline)) inline void PrefetchLines(const uint16_t* wo, int64_t in,
                                                         int64_t k) {
  constexpr int64_t kBytes = kOuts == 1 ? kSingleStreamPrefetchBytes : kPrefetchBytes;
  constexpr int64_t kAhead = kBytes / static_cast<int64_t>(sizeof(uint16_t));
  const uint16_t* at = k + kAhead < in ? wo + k + kAhead : wo + kOuts * in + (k + kAhead - in);
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) {
    _mm_prefetch(reinterpret_cast<const char*>(at + g * in), _MM_HINT_T0);
  }
}

inline float Bf16Bits(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

inline void Put(float* y, float value, bool accumulate) { *y = accumulate ? *y + value : value; }

// Outputs [o_begin, o_end) for every row, in plain C++ (the compiler vectorises what it can).
void TiledPortable(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                   int64_t out, bool accumulate, int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint16_t* wo = w + o * in;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * in;
      float sum = 0.0f;
      for (int64_t k = 0; k < in; ++k) sum += Bf16Bits(wo[k]) * xr[k];
      Put(y + r * out + o, sum, accumulate);
    }
  }
}

// ---- AVX2 + FMA: 8 lanes, tiles of 3 outputs × up to 4 rows.

// Compiled for AVX2 + FMA whatever the build's baseline (sanitizer and debug builds target plain
// x86-64); called only where the CPU has them.
#define DSCALE_AVX2 __attribute__((target("avx2,fma")))

DSCALE_AVX2 inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

DSCALE_AVX2 inline float Sum8(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// kRows rows of x (row r at x + r·in) against kOuts weight rows from `wo`; y[r·out + g] gets
// output g of row r.
template <int kRows, int kOuts>
DSCALE_AVX2 void TileAvx2(const float* x, const uint16_t* wo, int64_t in, float* y, int64_t out,
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
    for (int g = 0; g < kOuts; ++g) wv[g] = LoadBf16x8(wo + g * in + k);
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
      for (int64_t k = vec_end; k < in; ++k) sum += Bf16Bits(wo[g * in + k]) * x[r * in + k];
      Put(y + r * out + g, sum, accumulate);
    }
  }
}

// `rows` rows from row r against the 3 outputs from o, in one tile of that height (1 … 4).
DSCALE_AVX2 void TileRowsAvx2(const float* x, const uint16_t* wo, float* y, int64_t in, int64_t out,
                              bool accumulate, int64_t r, int64_t o, int64_t rows) {
  const float* xr = x + r * in;
  float* yr = y + r * out + o;
  switch (rows) {
    case 4:
      return TileAvx2<4, kAvx2OutGroup>(xr, wo, in, yr, out, accumulate);
    case 3:
      return TileAvx2<3, kAvx2OutGroup>(xr, wo, in, yr, out, accumulate);
    case 2:
      return TileAvx2<2, kAvx2OutGroup>(xr, wo, in, yr, out, accumulate);
    default:
      return TileAvx2<1, kAvx2OutGroup>(xr, wo, in, yr, out, accumulate);
  }
}

// The rows go in the fewest tiles of at most 4, of heights differing by at most one.
DSCALE_AVX2 void TiledAvx2(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                           int64_t out, bool accumulate, int64_t o_begin, int64_t o_end) {
  const int64_t tiles = (rows + 3) / 4;
  int64_t o = o_begin;
  for (; o + kAvx2OutGroup <= o_end; o += kAvx2OutGroup) {
    const uint16_t* wo = w + o * in;
    for (int64_t t = 0, r = 0; t < tiles; ++t) {
      const int64_t height = rows / tiles + (t < rows % tiles ? 1 : 0);
      TileRowsAvx2(x, wo, y, in, out, accumulate, r, o, height);
      r += height;
    }
  }
  TiledPortable(x, w, y, rows, in, out, accumulate, o, o_end);
}

// ---- AVX-512: 16 lanes; tiles of 4 outputs × up to 6 rows (24 accumulators of the 32
// registers).

#define DSCALE_AVX512 __attribute__((target("avx512f,avx512bw")))
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

DSCALE_AVX512 inline __m512 LoadBf16x16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

template <int kRows, int kOuts>
DSCALE_AVX512 void TileAvx512(const float* x, const uint16_t* wo, int64_t in,
                              float sums[kRows][kOuts]) {
  __m512 acc[kRows][kOuts];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const auto step = [&](int64_t k) DSCALE_AVX512 {
    __m512 wv[kOuts];
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) wv[g] = LoadBf16x16(wo + g * in + k);
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
      for (int64_t k = vec_end; k < in; ++k) sum += Bf16Bits(wo[g * in + k]) * x[r * in + k];
      sums[r][g] = sum;
    }
  }
}

// Rows [r, r + kRows) against the kOutGroup outputs from o, kOuts outputs per pass (1 or
// kOutGroup). Every output is the same sum in the same order either way, so the choice never
// changes a result.
template <int kRows, int kOuts>
DSCALE_AVX512 void RowsAvx512(const float* x, const uint16_t* wo, float* y, int64_t in, int64_t out,
                              bool accumulate, int64_t r, int64_t o) {
  for (int g0 = 0; g0 < kOutGroup; g0 += kOuts) {
    float sums[kRows][kOuts];
    TileAvx512<kRows, kOuts>(x + r * in, wo + g0 * in, in, sums);
    for (int i = 0; i < kRows; ++i) {
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) Put(y + (r + i) * out + o + g0 + g, sums[i][g], accumulate);
    }
  }
}

// Input bytes up to which one or two rows take the outputs one at a time. Each thread then reads
// its weights as one sequential stream, which the hardware prefetchers follow better than four
// interleaved rows: Qwen3 widths, 2 threads, AMD EPYC, one row at in 1,024-4,096 read 1.1-1.2×
// as fast, two rows at 1,024 1.2× and at 2,048 the same. Past this the inputs no longer sit in
// L1 beside the stream and one output per pass re-reads them from L2 for every output (one row at
// 12,288: 0.87×; two rows at 4,096: 0.87×).
constexpr int64_t kSingleStreamInputBytes = 16 << 10;

// `rows` rows from row r in one tile of that height (1 … 6).
DSCALE_AVX512 void TileRowsAvx512(const float* x, const uint16_t* wo, float* y, int64_t in,
                                  int64_t out, bool accumulate, int64_t r, int64_t o,
                                  int64_t rows) {
  const bool single_stream =
      rows * in * static_cast<int64_t>(sizeof(float)) <= kSingleStreamInputBytes;
  switch (rows) {
    case 6:
      return RowsAvx512<6, kOutGroup>(x, wo, y, in, out, accumulate, r, o);
    case 5:
      return RowsAvx512<5, kOutGroup>(x, wo, y, in, out, accumulate, r, o);
    case 4:
      return RowsAvx512<4, kOutGroup>(x, wo, y, in, out, accumulate, r, o);
    case 3:
      return RowsAvx512<3, kOutGroup>(x, wo, y, in, out, accumulate, r, o);
    case 2:
      return single_stream ? RowsAvx512<2, 1>(x, wo, y, in, out, accumulate, r, o)
                           : RowsAvx512<2, kOutGroup>(x, wo, y, in, out, accumulate, r, o);
    default:
      return single_stream ? RowsAvx512<1, 1>(x, wo, y, in, out, accumulate, r, o)
                           : RowsAvx512<1, kOutGroup>(x, wo, y, in, out, accumulate, r, o);
  }
}

// The rows go in the fewest tiles of at most 6, of heights differing by at most one (8 rows:
// 4 + 4, not 6 + 2, whose 2-row tile would run at half the FMA rate).
DSCALE_AVX512 void TiledAvx512(const float* x, const uint16_t* w, float* y, int64_t rows,
                               int64_t in, int64_t out, bool accumulate, int64_t o_begin,
                               int64_t o_end) {
  const int64_t tiles = (rows + 5) / 6;
  int64_t o = o_begin;
  for (; o + kOutGroup <= o_end; o += kOutGroup) {
    const uint16_t* wo = w + o * in;
    for (int64_t t = 0, r = 0; t < tiles; ++t) {
      const int64_t height = rows / tiles + (t < rows % tiles ? 1 : 0);
      TileRowsAvx512(x, wo, y, in, out, accumulate, r, o, height);
      r += height;
    }
  }
  TiledPortable(x, w, y, rows, in, out, accumulate, o, o_end);
}

#pragma GCC diagnostic pop
#undef DSCALE_AVX512

using TiledFn = void (*)(const float*, const uint16_t*, float*, int64_t, int64_t, int64_t, bool,
                         int64_t, int64_t);

TiledFn TiledFor(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::kAvx512:
      return TiledAvx512;
    case Bf16Isa::kAvx2:
      return TiledAvx2;
    case Bf16Isa::kPortable:
      break;
  }
  return TiledPortable;
}

// Outputs per tile of each variant: the threads split the output columns in whole groups.
int64_t OutGroupFor(Bf16Isa isa) { return isa == Bf16Isa::kAvx2 ? kAvx2OutGroup : kOutGroup; }

// (The variants take y's row stride where they name it `out`.)
void RunTiled(Bf16Isa isa, const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
              int64_t out, bool accumulate, int64_t ldy) {
  const TiledFn fn = TiledFor(isa);
  const int64_t group = OutGroupFor(isa);
  const int64_t groups = (out + group - 1) / group;
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
  for (int64_t g = 0; g < groups; ++g) {
    fn(x, w, y, rows, in, ldy, accumulate, g * group, std::min(out, (g + 1) * group));
  }
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

#undef DSCALE_AVX2

}  // namespace

int64_t LinearBf16TiledRowLimit(Bf16Isa isa) {
  // Where the tiles stop beating f32 panels + OpenBLAS on the 2-vCPU EPYC of docs/BENCHMARKS.md
  // (Qwen3-1.7B layers, linear_bf16_bench, OpenBLAS's AVX2 and AVX-512 kernels): AVX-512 tiles
  // up to 128 rows, AVX2's 8-lane tiles up to 64. The portable loop loses even at one row.
  switch (isa) {
    case Bf16Isa::kAvx512:
      return 128;
    case Bf16Isa::kAvx2:
      return 64;
    case Bf16Isa::kPortable:
      break;
  }
  return 0;
}

void LinearBf16Tiled(Bf16Isa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                     int64_t in, int64_t out, bool accumulate) {
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0);
  CheckBf16IsaSupported(isa);
  RunTiled(isa, x, w, y, rows, in, out, accumulate, out);
}

void LinearBf16WidenSgemm(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                          int64_t out, bool accumulate) {
  DSCALE_CHECK(rows > 0 && in > 0 && out > 0);
  WidenAndSgemm(x, w, y, rows, in, out, accumulate, out);
}

void LinearBf16(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in, int64_t out,
                bool accumulate, int64_t ldy) {
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  if (rows == 0 || out == 0) return;
  if (in == 0) {
    if (accumulate) return;
    for (int64_t r = 0; r < rows; ++r) std::memset(y + r * ldy, 0, out * sizeof(float));
    return;
  }
  if (rows <= LinearBf16TiledRowLimit(BestBf16Isa())) {
    RunTiled(BestBf16Isa(), x, w, y, rows, in, out, accumulate, ldy);
  } else {
    WidenAndSgemm(x, w, y, rows, in, out, accumulate, ldy);
  }
}

}  // namespace dscale::cpu
