#include "kernels/cpu/gemm_int4.h"

// Calls with int8 activations run one of five kernels by their row count, the layout and the CPU
// (Int4KernelFor below says which, and why):
// - the fused AVX2 kernel, which reads each output's packed row front to back, as the int8 path's
//   few-row kernel reads int8 ones (gemm_int8_dot.cc, FewRowsAvx2), but multiplies the nibbles as
//   they are: vpmaddubsw takes the unsigned nibble q + 8 (0 … 15) against the signed activation,
//   pairs summing to at most 2 · 15 · 127, and each group's integer dot product is corrected by
//   8 · Σ q_x, which the activation quantiser supplies. The result is Σ q·q_x exactly, taken with
//   the int8 path's FMAs in its group order: the same bits. No sign trick is needed, so a group
//   costs about as many instructions as an int8 one while reading half the bytes;
// - LinearInt4Vnni512 (gemm_int8_dot.cc), the same nibbles for 16 outputs at once;
// - LinearInt4Panels512 (gemm_panels512.cc), the panel layout's nibbles as they lie;
// - LinearAmxInt4 (gemm_int8_amx.cc, gemm_int4_amx.cc), the AMX tiles: the panel layout's groups
//   as the tile product's weight operand, each unpacked once for all rows; the rows layout's
//   output tiles unpacked to int8 once for all rows;
// - unpacked chunks (quant_chunks.h): chunks of outputs unpacked into int8 in cache, each run by
//   the int8 kernel of the call's activations mode. Calls with f32 activations always run these.
// With int8 activations the rows are quantised once per call, before any kernel, as LinearInt8Dot
// quantises them once per call.

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_int8_amx.h"
#include "kernels/cpu/int8_avx2.h"
#include "kernels/cpu/isa_targets.h"
#include "kernels/cpu/quant_chunks.h"

namespace dscale::cpu {
namespace {

constexpr int64_t kGroup = kInt8GroupSize;
constexpr int64_t kGroupBytes = kGroup / 2;
// Below this many weights a call runs on one thread (as the int8 kernels decide).
constexpr int64_t kParallelMinWeights = kQuantChunksParallelMinWeights;

// Calls of at most this many rows with int8 activations run the fused kernel where the CPU has
// AVX2; at 8 rows its accumulators spill and unpacking is ahead (docs/BENCHMARKS.md,
// "Measurements behind the kernels' constants").
constexpr int kFusedMaxRows = 7;
// How far ahead of its loads the fused kernel prefetches its stream (the int8 one-output kernel
// fetches 4 KiB ahead, the same number of weights).
constexpr int64_t kFusedPrefetchBytes = 2048;
// Outputs per unit of work the threads share in the fused kernel.
constexpr int64_t kFusedOutBlock = 16;

bool SupportsAvx512Vnni() { return HasInt8DotIsa(Int8DotIsa::kAvx512Vnni); }

// The kernel a call of `rows` rows with int8 activations runs on a matrix in `layout`, by
// `linear_bf16_bench --int4 1`'s columns (docs/BENCHMARKS.md, "4-bit weights on VNNI", "4-bit
// verification on AMX" and "The 4-bit panel layout"). Rows layout: where the CPU has
// AVX512-VNNI its register-transposing panels take 1-16 rows, in one pass over the weights. On
// AMX CPUs (measured on a Sapphire Rapids class Xeon) the fused kernel reads one row's weights
// 7-15% faster, the panels take 2-31 rows (1.2-4× ahead of the fused kernel and of unpacking at
// 2-16, 17-31 in two passes), and the AMX tiles 32 rows and more (level with two passes at 32,
// 1.2-1.3× ahead of more passes beyond, 5× ahead of unpacked chunks). Without AMX, the fused
// kernel takes up to kFusedMaxRows rows where the panels do not, and unpacked chunks the rest.
// Panel layout (only preferred where the CPU has AVX512-VNNI): its kernel takes every row count
// in passes of 16, but for 12 rows and more on AMX CPUs: it reads one row's weights 1.25× faster
// than the fused kernel (0.85 of the bandwidth) and 2-16 rows 1.2-1.4× faster than the
// register-transposing panels; the AMX tiles, which take the panels' groups as their weight
// operand (gemm_int4_amx.cc), are level with its passes at 1-8 rows, 7% ahead at 12, 1.2× at 16
// and 1.3-1.6× from 17 to 128, where its passes read the weights again every 16 rows.
constexpr int64_t kAmxInt4MinRows = 32;
constexpr int64_t kAmxInt4PanelsMinRows = 12;

Int4Kernel Int4KernelFor(int64_t rows, QuantLayout layout) {
  const bool amx = HasAmxInt8();
  if (layout == QuantLayout::kPanels) {
    if (amx && rows >= kAmxInt4PanelsMinRows) return Int4Kernel::kAmx;
    return SupportsAvx512Vnni() ? Int4Kernel::kPanels512 : Int4Kernel::kUnpacked;
  }
  if (amx && rows >= kAmxInt4MinRows) return Int4Kernel::kAmx;
  if (SupportsAvx512Vnni() && (amx ? rows > 1 : rows <= kInt4Vnni512MaxRows)) {
    return Int4Kernel::kVnni512;
  }
  if (rows <= kFusedMaxRows && HasAvx2Fma()) return Int4Kernel::kFused;
  return Int4Kernel::kUnpacked;
}

// Rows [r0, …) of quantised activations.
Int8ActivationRows RowsFrom(const Int8ActivationRows& xq, int64_t r0) {
  const int64_t at = r0 * xq.groups;
  return {.q = xq.q + at * kGroup, .scale = xq.scale + at, .sum = xq.sum + at, .groups = xq.groups};
}

// Rows [0, rows) in passes of at most `most`: pass(first row, rows of the pass).
template <typename Pass>
void InPasses(int64_t rows, int64_t most, Pass pass) {
  for (int64_t r0 = 0; r0 < rows; r0 += most) pass(r0, std::min(most, rows - r0));
}

// n ≤ 32 values of one group: bytes j < 16 hold values j (low nibble) and 16 + j (high).
void UnpackGroupPortable(const uint8_t* src, int64_t n, int8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = src[i % kGroupBytes];
    const int nibble = i < kGroupBytes ? byte & 0x0f : byte >> 4;
    dst[i] = static_cast<int8_t>(nibble - 8);
  }
}

DSCALE_AVX2 void UnpackRowAvx2(const uint8_t* src, int64_t in, int8_t* dst) {
  const int64_t full = in / kGroup;
  const __m128i low_nibbles = _mm_set1_epi8(0x0f);
  const __m256i offset = _mm256_set1_epi8(8);
  for (int64_t g = 0; g < full; ++g) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + g * kGroupBytes));
    const __m128i low = _mm_and_si128(bytes, low_nibbles);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles);
    const __m256i values = _mm256_sub_epi8(_mm256_set_m128i(high, low), offset);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + g * kGroup), values);
  }
  if (full * kGroup < in) {
    UnpackGroupPortable(src + full * kGroupBytes, in - full * kGroup, dst + full * kGroup);
  }
}

#define DSCALE_UNROLL _Pragma("GCC unroll 16")

// A group's 16 packed bytes as 32 unsigned values q + 8, in input order.
DSCALE_AVX2 inline __m256i Nibbles(const uint8_t* src) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  const __m128i low_nibbles = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles),
                          _mm_and_si128(bytes, low_nibbles));
}

// One group's 8 int32 lanes of Σ (q + 8) · q_x (the correction by 8 · Σ q_x comes after the sum).
DSCALE_AVX2 inline __m256i NibbleLanes(__m256i nibbles, const int8_t* x) {
  return _mm256_madd_epi16(
      _mm256_maddubs_epi16(nibbles, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))),
      _mm256_set1_epi16(1));
}

// acc[r] for rows [0, kRows) against one output: its packed row wo, scales so.
template <int kRows>
DSCALE_AVX2 void OneOutputInt4Avx2(const Int8ActivationRows& xq, const uint8_t* wo,
                                   const Int8Scale* so, float acc[kRows]) {
  const int64_t groups = xq.groups;
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  int64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    DSCALE_UNROLL
    for (int line = 0; line < 2; ++line) {  // 8 groups: 2 lines of 64 bytes
      _mm_prefetch(
          reinterpret_cast<const char*>(wo + g * kGroupBytes + line * 64 + kFusedPrefetchBytes),
          _MM_HINT_T0);
    }
    __m256i wv[8];
    DSCALE_UNROLL
    for (int j = 0; j < 8; ++j) wv[j] = Nibbles(wo + (g + j) * kGroupBytes);
    const __m256 dw = avx2::WidenScales8(so + g);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int8_t* xr = xq.q + (r * groups + g) * kGroup;
      __m256i d[8];
      DSCALE_UNROLL
      for (int j = 0; j < 8; ++j) d[j] = NibbleLanes(wv[j], xr + j * kGroup);
      const __m256i offsets = _mm256_slli_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.sum + r * groups + g)), 3);
      alignas(32) float dots[8], terms[8];
      _mm256_store_ps(dots, _mm256_cvtepi32_ps(_mm256_sub_epi32(avx2::SumLanesOf8(d), offsets)));
      _mm256_store_ps(terms, _mm256_mul_ps(dw, _mm256_loadu_ps(xq.scale + r * groups + g)));
      DSCALE_UNROLL
      for (int j = 0; j < 8; ++j) acc[r] = std::fma(terms[j], dots[j], acc[r]);
    }
  }
  for (; g < groups; ++g) {  // the last groups one at a time (a short one is padded with q = 0)
    const __m256i wv = Nibbles(wo + g * kGroupBytes);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int64_t at = r * groups + g;
      const int32_t dot = avx2::SumInt32Lanes(NibbleLanes(wv, xq.q + at * kGroup)) - 8 * xq.sum[at];
      acc[r] = std::fma(Int8ScaleValue(so[g]) * xq.scale[at], static_cast<float>(dot), acc[r]);
    }
  }
}

// Outputs [o_begin, o_end) of rows [0, kRows).
template <int kRows>
DSCALE_AVX2 void FusedOutputsAvx2(const Int8ActivationRows& xq, const uint8_t* w4,
                                  const Int8Scale* scales, int64_t in, int64_t o_begin,
                                  int64_t o_end, float* y, int64_t ldy, bool accumulate) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    float acc[kRows];
    OneOutputInt4Avx2<kRows>(xq, w4 + o * Int4RowBytes(in), scales + o * xq.groups, acc);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float* yo = y + r * ldy + o;
      *yo = accumulate ? *yo + acc[r] : acc[r];
    }
  }
}

#undef DSCALE_UNROLL

template <int kRows>
void FusedRows(const Int8ActivationRows& xq, const uint8_t* w4, const Int8Scale* scales, int64_t in,
               int64_t out, float* y, int64_t ldy, bool accumulate) {
  const int64_t blocks = (out + kFusedOutBlock - 1) / kFusedOutBlock;
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
  for (int64_t b = 0; b < blocks; ++b) {
    FusedOutputsAvx2<kRows>(xq, w4, scales, in, b * kFusedOutBlock,
                            std::min(out, (b + 1) * kFusedOutBlock), y, ldy, accumulate);
  }
}

void Fused(const Int8ActivationRows& xq, int64_t rows, const uint8_t* w4, const Int8Scale* scales,
           int64_t in, int64_t out, float* y, int64_t ldy, bool accumulate) {
  static_assert(kFusedMaxRows == 7);
  switch (rows) {
    case 1:
      return FusedRows<1>(xq, w4, scales, in, out, y, ldy, accumulate);
    case 2:
      return FusedRows<2>(xq, w4, scales, in, out, y, ldy, accumulate);
    case 3:
      return FusedRows<3>(xq, w4, scales, in, out, y, ldy, accumulate);
    case 4:
      return FusedRows<4>(xq, w4, scales, in, out, y, ldy, accumulate);
    case 5:
      return FusedRows<5>(xq, w4, scales, in, out, y, ldy, accumulate);
    case 6:
      return FusedRows<6>(xq, w4, scales, in, out, y, ldy, accumulate);
    default:
      return FusedRows<7>(xq, w4, scales, in, out, y, ldy, accumulate);
  }
}

void UnpackRow(const uint8_t* src, int64_t in, int8_t* dst, bool avx2) {
  if (avx2) return UnpackRowAvx2(src, in, dst);
  for (int64_t g = 0; g * kGroup < in; ++g) {
    UnpackGroupPortable(src + g * kGroupBytes, std::min(kGroup, in - g * kGroup), dst + g * kGroup);
  }
}

}  // namespace

void UnpackInt4Rows(const uint8_t* w4, int64_t rows, int64_t in, int8_t* dst, bool vector) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const bool avx2 = vector && HasAvx2Fma();
  for (int64_t r = 0; r < rows; ++r) UnpackRow(w4 + r * Int4RowBytes(in), in, dst + r * in, avx2);
}

void DequantizeInt4Rows(const uint8_t* w4, const Int8Scale* scales, int64_t rows, int64_t in,
                        float* dst) {
  std::vector<int8_t> q(static_cast<size_t>(in));
  for (int64_t r = 0; r < rows; ++r) {
    UnpackInt4Rows(w4 + r * Int4RowBytes(in), 1, in, q.data());
    DequantizeInt8Rows(q.data(), scales + r * Int8Groups(in), 1, in, dst + r * in);
  }
}

namespace {

void FusedPasses(const Int8ActivationRows& xq, int64_t rows, const uint8_t* w4,
                 const Int8Scale* scales, int64_t in, int64_t out, float* y, int64_t ldy,
                 bool accumulate) {
  InPasses(rows, kFusedMaxRows, [&](int64_t r0, int64_t n) {
    Fused(RowsFrom(xq, r0), n, w4, scales, in, out, y + r0 * ldy, ldy, accumulate);
  });
}

// The panels take whole panels of 16 outputs; the fused kernel (every AVX512-VNNI CPU has AVX2)
// the outputs after them.
void Vnni512Passes(const Int8ActivationRows& xq, int64_t rows, const uint8_t* w4,
                   const Int8Scale* scales, int64_t in, int64_t out, float* y, int64_t ldy,
                   bool accumulate) {
  int64_t done = 0;
  InPasses(rows, kInt4Vnni512MaxRows, [&](int64_t r0, int64_t n) {
    done =
        LinearInt4Vnni512(RowsFrom(xq, r0), n, w4, scales, in, out, y + r0 * ldy, ldy, accumulate);
  });
  if (done < out) {
    FusedPasses(xq, rows, w4 + done * Int4RowBytes(in), scales + done * Int8Groups(in), in,
                out - done, y + done, ldy, accumulate);
  }
}

void Panels512Passes(const Int8ActivationRows& xq, int64_t rows, const Int4Matrix& w, int64_t in,
                     int64_t out, float* y, int64_t ldy, bool accumulate) {
  InPasses(rows, kInt4Vnni512MaxRows, [&](int64_t r0, int64_t n) {
    LinearInt4Panels512(RowsFrom(xq, r0), n, w.values, w.scales, w.first, in, out, y + r0 * ldy,
                        ldy, accumulate);
  });
}

void Run(Int4Kernel kernel, const float* x, const Int4Matrix& w, float* y, int64_t rows, int64_t in,
         int64_t out, bool accumulate, int64_t ldy, Int8Activations activations) {
  const bool int8_dot = activations == Int8Activations::kInt8;
  // With int8 activations the rows are quantised once per call, before any kernel.
  const Int8ActivationRows xq =
      int8_dot ? QuantizeInt8ActivationRows(x, rows, in) : Int8ActivationRows{};
  switch (kernel) {
    case Int4Kernel::kAmx:
      return LinearAmxInt4(xq, rows, w, in, out, y, ldy, accumulate);
    case Int4Kernel::kPanels512:
      return Panels512Passes(xq, rows, w, in, out, y, ldy, accumulate);
    case Int4Kernel::kVnni512:
      return Vnni512Passes(xq, rows, w.values, w.scales, in, out, y, ldy, accumulate);
    case Int4Kernel::kFused:
      return FusedPasses(xq, rows, w.values, w.scales, in, out, y, ldy, accumulate);
    case Int4Kernel::kUnpacked:
      break;
  }
  UnpackedChunks(
      x, xq, rows,
      [&](int64_t o0, int64_t n, int8_t* dst, Int8Scale* dst_scales) {
        UnpackInt4Outputs(w, in, o0, n, dst, dst_scales);
      },
      in, out, y, ldy, accumulate, int8_dot);
}

}  // namespace

std::string_view Int4KernelName(Int4Kernel kernel) {
  switch (kernel) {
    case Int4Kernel::kFused:
      return "fused-avx2";
    case Int4Kernel::kVnni512:
      return "vnni512-panels";
    case Int4Kernel::kPanels512:
      return "vnni512-panel-layout";
    case Int4Kernel::kAmx:
      return "amx";
    case Int4Kernel::kUnpacked:
      break;
  }
  return "unpacked";
}

bool Int4KernelReads(Int4Kernel kernel, QuantLayout layout) {
  switch (kernel) {
    case Int4Kernel::kFused:
    case Int4Kernel::kVnni512:
      return layout == QuantLayout::kRows;
    case Int4Kernel::kPanels512:
      return layout == QuantLayout::kPanels;
    case Int4Kernel::kAmx:
    case Int4Kernel::kUnpacked:
      break;
  }
  return true;
}

std::vector<Int4Kernel> SupportedInt4Kernels() {
  std::vector<Int4Kernel> kernels = {Int4Kernel::kUnpacked};
  if (HasAvx2Fma()) kernels.push_back(Int4Kernel::kFused);
  if (SupportsAvx512Vnni()) {
    kernels.push_back(Int4Kernel::kVnni512);
    kernels.push_back(Int4Kernel::kPanels512);
  }
  if (HasAmxInt8()) kernels.push_back(Int4Kernel::kAmx);
  return kernels;
}

QuantLayout PreferredInt4Layout() {
  return SupportsAvx512Vnni() ? QuantLayout::kPanels : QuantLayout::kRows;
}

void LinearInt4(const float* x, const uint8_t* w4, const Int8Scale* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate, int64_t ldy,
                Int8Activations activations) {
  LinearInt4(x, Int4Matrix{.values = w4, .scales = scales}, y, rows, in, out, accumulate, ldy,
             activations);
}

void LinearInt4(const float* x, const Int4Matrix& w, float* y, int64_t rows, int64_t in,
                int64_t out, bool accumulate, int64_t ldy, Int8Activations activations) {
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  const Int4Kernel kernel =
      activations == Int8Activations::kInt8 ? Int4KernelFor(rows, w.layout) : Int4Kernel::kUnpacked;
  Run(kernel, x, w, y, rows, in, out, accumulate, ldy, activations);
}

void LinearInt4Via(Int4Kernel kernel, const float* x, const Int4Matrix& w, float* y, int64_t rows,
                   int64_t in, int64_t out, bool accumulate, int64_t ldy,
                   Int8Activations activations) {
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  const std::vector<Int4Kernel> supported = SupportedInt4Kernels();
  DSCALE_CHECK_MSG(std::find(supported.begin(), supported.end(), kernel) != supported.end(),
                   "this CPU cannot run the requested 4-bit kernel");
  DSCALE_CHECK_MSG(Int4KernelReads(kernel, w.layout),
                   "the requested 4-bit kernel does not read this layout");
  DSCALE_CHECK_MSG(kernel == Int4Kernel::kUnpacked || activations == Int8Activations::kInt8,
                   "only unpacked chunks take f32 activations");
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  Run(kernel, x, w, y, rows, in, out, accumulate, ldy, activations);
}

}  // namespace dscale::cpu
