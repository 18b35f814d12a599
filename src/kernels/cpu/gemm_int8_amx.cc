#include "kernels/cpu/gemm_int8_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cache_aligned.h"
#include "core/check.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu {
namespace {

// A weight tile is 16 outputs × one group of 32 inputs (int8), loaded straight from the weights'
// rows; an activation tile the group's 8 quads of inputs × up to 16 rows (4 int8 per 32-bit lane,
// as tdpbssd reads its second operand), packed once per call; a sum tile the 16 × up to 16 int32
// group dot products. Per group the sum tile goes to memory and AVX-512 folds it into the f32
// accumulators, one vector per output with the rows in its lanes, while the next group's tiles
// multiply into the other sum tile.
constexpr int64_t kTileOutputs = 16;
constexpr int64_t kTileRows = 16;
constexpr int64_t kGroup = kInt8GroupSize;
constexpr int64_t kQuads = kGroup / 4;
// Below this many weights a call runs on one thread (as the other int8 paths).
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;
// How far ahead along each of a tile's 16 weight rows to prefetch, once per 64-byte line (every
// second group): as for the VNNI panels (gemm_int8_dot.cc), the 16 strided rows are more streams
// than the hardware prefetchers keep fed from memory.
constexpr int64_t kPrefetchBytes = 256;

#define DSCALE_UNROLL _Pragma("GCC unroll 16")

// Sums in tmm0 and tmm5 (even and odd groups), weights in tmm1 and tmm2, activations in tmm3 and
// tmm4.
TileConfig ConfigFor(int64_t cols) {
  TileConfig config;
  const auto lane_bytes = static_cast<int>(cols * 4);
  config.Set(0, kTileOutputs, lane_bytes);
  config.Set(5, kTileOutputs, lane_bytes);
  for (int t = 1; t <= 2; ++t) config.Set(t, kTileOutputs, kGroup);
  for (int t = 3; t <= 4; ++t) config.Set(t, kQuads, lane_bytes);
  return config;
}

// One call's shape and operands, shared by its threads.
struct AmxInt8Call {
  const uint32_t* packed;  // [row tiles][groups][kQuads][cols] quads of int8
  const float* x_scales;   // [row tiles][groups][kTileRows] d_x, zero past the last row
  const int8_t* w;         // int8 weights, or null with 4-bit ones
  const Int8Scale* w_scales;  // the int8 weights' scales
  const Int4Matrix* w4;       // 4-bit weights with their scales, or null with int8 ones
  float* y;
  int64_t rows, in, out, ldy, groups;
  int64_t cols;         // activation rows per tile: min(rows, 16)
  int64_t full_groups;  // groups of a whole 32 inputs
  bool accumulate;
};

// A thread's scratch: an output tile past `out` (weights zero-padded, scales zero) or a tile of
// 4-bit weights unpacked, the short last group of a tile's rows zero-padded, the sums of a group on
// their way to the accumulators.
struct AmxInt8Scratch {
  std::vector<int8_t> partial;            // [16][in]
  std::vector<Int8Scale> partial_scales;  // [16][groups]
  std::vector<float> scales;              // [16][groups]: the output tile's scales as f32
  alignas(64) int8_t tail[kTileOutputs * kGroup];
  alignas(64) int32_t sums[kTileOutputs * kTileRows] = {};
  alignas(64) float acc[kTileOutputs * kTileRows];
};

// An output tile's 16 weight rows (`in` bytes apart) and their scales (`groups` apart), and the
// same scales as f32 (converted once a tile: each group's fold broadcasts them from memory).
struct TileWeights {
  const int8_t* rows;
  const Int8Scale* scales;
  const float* scales_f32 = nullptr;
};

TileWeights WeightsOfTile(const AmxInt8Call& call, int64_t tile, AmxInt8Scratch& scratch) {
  const int64_t first = tile * kTileOutputs;
  const int64_t n = std::min(kTileOutputs, call.out - first);
  if (n == kTileOutputs && call.w4 == nullptr) {
    return {call.w + first * call.in, call.w_scales + first * call.groups};
  }
  scratch.partial.resize(static_cast<size_t>(kTileOutputs * call.in));
  scratch.partial_scales.resize(static_cast<size_t>(kTileOutputs * call.groups));
  if (call.w4 != nullptr) {
    UnpackInt4Outputs(*call.w4, call.in, first, n, scratch.partial.data(),
                      scratch.partial_scales.data());
  } else {
    std::memcpy(scratch.partial.data(), call.w + first * call.in, static_cast<size_t>(n * call.in));
    std::memcpy(scratch.partial_scales.data(), call.w_scales + first * call.groups,
                static_cast<size_t>(n * call.groups) * sizeof(Int8Scale));
  }
  std::fill(scratch.partial.begin() + n * call.in, scratch.partial.end(), int8_t{0});
  std::fill(scratch.partial_scales.begin() + n * call.groups, scratch.partial_scales.end(),
            Int8Scale{0});
  return {scratch.partial.data(), scratch.partial_scales.data()};
}

void FillTail(const AmxInt8Call& call, const int8_t* rows, AmxInt8Scratch& scratch) {
  const int64_t k0 = call.full_groups * kGroup;
  std::memset(scratch.tail, 0, sizeof(scratch.tail));
  for (int64_t m = 0; m < kTileOutputs; ++m) {
    std::memcpy(scratch.tail + m * kGroup, rows + m * call.in + k0,
                static_cast<size_t>(call.in - k0));
  }
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// acc[m] += fl(d_w[m] · d_x) · sums[m] for the 16 outputs m of group g, lanes = rows.
DSCALE_AMX_INT8 inline void FoldGroup(const AmxInt8Call& call, const TileWeights& tw,
                                      const float* dx_g, int64_t g, AmxInt8Scratch& scratch,
                                      __m512 acc[kTileOutputs]) {
  const __m512 dx = _mm512_loadu_ps(dx_g);
  DSCALE_UNROLL
  for (int m = 0; m < kTileOutputs; ++m) {
    const __m512 p = _mm512_mul_ps(_mm512_set1_ps(tw.scales_f32[m * call.groups + g]), dx);
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(scratch.sums + m * kTileRows));
    acc[m] = _mm512_fmadd_ps(p, dot, acc[m]);
  }
}

template <int L>
[[gnu::always_inline]] inline void PrefetchRows(const int8_t* rows, int64_t in, int64_t g) {
  if (g % 2 != 0) return;
  DSCALE_UNROLL
  for (int m = 0; m < L; ++m) {
    _mm_prefetch(reinterpret_cast<const char*>(rows + m * in + g * kGroup + kPrefetchBytes),
                 _MM_HINT_T0);
  }
}

// Group g's weight tile: in place for a whole group, else the zero-padded tail.
inline const int8_t* GroupWeights(const AmxInt8Call& call, const int8_t* rows, int64_t g,
                                  const AmxInt8Scratch& scratch, int64_t* stride) {
  if (g < call.full_groups) {
    *stride = call.in;
    return rows + g * kGroup;
  }
  *stride = kGroup;
  return scratch.tail;
}

// Group g's products into sum tile C (zeroed first) through weight tile A and activation tile B,
// with `call`, `tw`, `b` (the activation tile's groups) and `scratch` in scope: a macro, since the
// tile intrinsics paste their register numbers into the instruction text.
#define DSCALE_ISSUE_GROUP(C, A, B, g)                                      \
  do {                                                                      \
    PrefetchRows<kTileOutputs>(tw.rows, call.in, (g));                      \
    int64_t a_stride = 0;                                                   \
    const int8_t* a = GroupWeights(call, tw.rows, (g), scratch, &a_stride); \
    _tile_zero(C);                                                          \
    _tile_loadd(A, a, a_stride);                                            \
    _tile_loadd(B, b + (g)*kQuads * call.cols, call.cols * 4);              \
    _tile_dpbssd(C, A, B);                                                  \
  } while (0)

// Output tile `tile` against activation tile `rt`: every group in order, the sums of group g
// folded while group g + 1 multiplies.
DSCALE_AMX_INT8 void MultiplyTile(const AmxInt8Call& call, const TileWeights& tw, int64_t rt,
                                  AmxInt8Scratch& scratch, __m512 acc[kTileOutputs]) {
  const uint32_t* b = call.packed + rt * call.groups * kQuads * call.cols;
  const float* dx = call.x_scales + rt * call.groups * kTileRows;
  DSCALE_ISSUE_GROUP(0, 1, 3, 0);
  for (int64_t g = 0; g < call.groups; g += 2) {
    // Group g sits in tmm0; group g + 1 goes into tmm5 while g is folded.
    if (g + 1 < call.groups) DSCALE_ISSUE_GROUP(5, 2, 4, g + 1);
    _tile_stored(0, scratch.sums, kTileRows * 4);
    FoldGroup(call, tw, dx + g * kTileRows, g, scratch, acc);
    if (g + 1 >= call.groups) break;
    // Group g + 2 into tmm0 while g + 1 is folded.
    if (g + 2 < call.groups) DSCALE_ISSUE_GROUP(0, 1, 3, g + 2);
    _tile_stored(5, scratch.sums, kTileRows * 4);
    FoldGroup(call, tw, dx + (g + 1) * kTileRows, g + 1, scratch, acc);
  }
}

#undef DSCALE_ISSUE_GROUP

// y's block of output tile `tile` and activation rows [row0, row0 + cols).
DSCALE_AMX_INT8 void StoreOutputs(const AmxInt8Call& call, int64_t tile, int64_t row0,
                                  const __m512 acc[kTileOutputs], AmxInt8Scratch& scratch) {
  DSCALE_UNROLL
  for (int m = 0; m < kTileOutputs; ++m) _mm512_store_ps(scratch.acc + m * kTileRows, acc[m]);
  const int64_t first_output = tile * kTileOutputs;
  StoreTileSums(scratch.acc, std::min(kTileOutputs, call.out - first_output),
                std::min(call.cols, call.rows - row0), call.y + row0 * call.ldy + first_output,
                call.ldy, call.accumulate);
}

DSCALE_AMX_INT8 void RunTile(const AmxInt8Call& call, int64_t tile, AmxInt8Scratch& scratch) {
  TileWeights tw = WeightsOfTile(call, tile, scratch);
  scratch.scales.resize(static_cast<size_t>(kTileOutputs * call.groups));
  // A scale is BF16 bits (gemm_int8.h); every AMX CPU has AVX-512.
  WidenBf16For(Bf16Isa::kAvx512)(tw.scales, kTileOutputs * call.groups, scratch.scales.data());
  tw.scales_f32 = scratch.scales.data();
  if (call.groups > call.full_groups) FillTail(call, tw.rows, scratch);
  const int64_t row_tiles = (call.rows + call.cols - 1) / call.cols;
  for (int64_t rt = 0; rt < row_tiles; ++rt) {
    __m512 acc[kTileOutputs];
    DSCALE_UNROLL
    for (int m = 0; m < kTileOutputs; ++m) acc[m] = _mm512_setzero_ps();
    MultiplyTile(call, tw, rt, scratch, acc);
    StoreOutputs(call, tile, rt * call.cols, acc, scratch);
  }
}

#pragma GCC diagnostic pop

// packed[rt][g][k][c] = the 4 int8 of row rt·cols + c at inputs 32g + 4k … 32g + 4k + 3 (zero past
// the last row); scales_t[rt][g][c] = that row's d_x of group g (zero past the last row and in
// lanes c ≥ cols).
void PackActivations(const int8_t* q, const float* x_scales, int64_t rows, int64_t groups,
                     int64_t cols, CacheAlignedVector<uint32_t>& packed,
                     std::vector<float>& scales_t) {
  const int64_t row_tiles = (rows + cols - 1) / cols;
  packed.assign(static_cast<size_t>(row_tiles * groups * kQuads * cols), 0);
  scales_t.assign(static_cast<size_t>(row_tiles * groups * kTileRows), 0.0f);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t rt = row / cols, c = row % cols;
    const int8_t* x = q + row * groups * kGroup;
    for (int64_t g = 0; g < groups; ++g) {
      uint32_t* dst = packed.data() + ((rt * groups + g) * kQuads) * cols + c;
      for (int64_t k = 0; k < kQuads; ++k) {
        std::memcpy(dst + k * cols, x + g * kGroup + 4 * k, sizeof(uint32_t));
      }
      scales_t[static_cast<size_t>((rt * groups + g) * kTileRows + c)] = x_scales[row * groups + g];
    }
  }
}

thread_local CacheAlignedVector<uint32_t> packed_activations;
thread_local std::vector<float> packed_scales;

}  // namespace

bool HasAmxInt8() {
  static const bool has = HasAmxInt8(CpuFeaturesInUse());
  return has;
}

bool HasAmxInt8(CpuIsaCap cap) { return HasAmxInt8(CpuFeaturesFor(cap)); }

bool HasAmxInt8(const CpuFeatures& features) { return features.amx_int8 && features.avx512f; }

namespace {

// LinearAmxInt8 (w set) and LinearAmxInt4 (w4 set).
void LinearAmx(const int8_t* q, const float* x_scales, int64_t rows, const int8_t* w,
               const Int8Scale* w_scales, const Int4Matrix* w4, int64_t in, int64_t out, float* y,
               int64_t ldy, bool accumulate) {
  DSCALE_CHECK_MSG(HasAmxInt8(), "this CPU cannot run the AMX int8 kernel");
  DSCALE_CHECK(rows > 0 && in > 0 && out > 0 && ldy >= out);
  const int64_t cols = std::min(rows, kTileRows);
  const int64_t groups = Int8Groups(in);
  PackActivations(q, x_scales, rows, groups, cols, packed_activations, packed_scales);
  const AmxInt8Call call{.packed = packed_activations.data(),
                         .x_scales = packed_scales.data(),
                         .w = w,
                         .w_scales = w_scales,
                         .w4 = w4,
                         .y = y,
                         .rows = rows,
                         .in = in,
                         .out = out,
                         .ldy = ldy,
                         .groups = groups,
                         .cols = cols,
                         .full_groups = in / kGroup,
                         .accumulate = accumulate};
  const TileConfig config = ConfigFor(cols);
  const int64_t tiles = (out + kTileOutputs - 1) / kTileOutputs;
  RunTilesInParallel(config, tiles, in * out >= kParallelMinWeights, [&call](int64_t t) {
    thread_local AmxInt8Scratch scratch;
    RunTile(call, t, scratch);
  });
}

}  // namespace

void LinearAmxInt8(const int8_t* q, const float* x_scales, int64_t rows, const int8_t* w,
                   const Int8Scale* w_scales, int64_t in, int64_t out, float* y, int64_t ldy,
                   bool accumulate) {
  LinearAmx(q, x_scales, rows, w, w_scales, nullptr, in, out, y, ldy, accumulate);
}

void LinearAmxInt4(const Int8ActivationRows& xq, int64_t rows, const Int4Matrix& w4, int64_t in,
                   int64_t out, float* y, int64_t ldy, bool accumulate) {
  if (w4.layout == QuantLayout::kPanels) {
    return LinearAmxInt4Panels(xq, rows, w4.values, w4.scales, w4.first, in, out, y, ldy,
                               accumulate);
  }
  LinearAmx(xq.q, xq.scale, rows, nullptr, nullptr, &w4, in, out, y, ldy, accumulate);
}

}  // namespace dscale::cpu
