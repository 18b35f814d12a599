// LinearAmxInt4Panels (gemm_int8_amx.h): 4-bit weights in the panel layout on AMX tiles, the
// weights as the tile product's second operand and the activation rows as its first.
//
// A panel's group is 16 outputs × 32 inputs in 256 bytes whose 64-byte steps hold, per output,
// four consecutive inputs' nibbles (gemm_int4.h): the order tdpbssd reads its second operand in,
// four int8 to a 32-bit lane. So each group's nibbles become one 8 × 64-byte weight tile (the low
// nibbles its rows 0-3, the high ones rows 4-7, each less the offset 8) with no shuffle, in the
// thread's scratch, and every tile of up to 16 activation rows multiplies it from there. The
// activations are packed once per call, each group's tile of 16 rows contiguous. A group's 16 × 16
// exact int32 sums come out with one row's 16 outputs in a 64-byte line, so the f32 fold is three
// vector instructions a row — fl(d_w · d_x) from the group's 16 output scales and the row's
// broadcast scale, the sums converted, one FMA — in group order: the terms of every other int8
// variant in their order, so the bits of LinearInt8 on the unpacked matrix.
//
// Each tile product covers one group (K = 32: the scales change every group), and costs about
// as much as one of K = 64; its store and the fold cost as much again. Four sums tiles in turn
// keep four groups in flight, each group's sums folded one group after their store.

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cache_aligned.h"
#include "core/check.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/gemm_int8_amx.h"
#include "kernels/cpu/isa_targets.h"
#include "kernels/cpu/row_blocks.h"

namespace dscale::cpu {
namespace {

constexpr int64_t kLanes = kQuantPanelOutputs;     // outputs per panel: the sum tile's columns
constexpr int64_t kTileRows = 16;                  // activation rows per tile
constexpr int64_t kGroup = kInt8GroupSize;         // inputs per group: the tile product's depth
constexpr int64_t kSteps = kGroup / 4;             // the weight tile's rows (4 inputs each)
constexpr int64_t kWeightTileBytes = kSteps * 64;  // one group's weight tile
// Below this many weights a call runs on one thread (as the other int8 paths).
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;
// How far ahead of the unpacking the panel's stream is prefetched (as the VNNI panel kernel).
constexpr int64_t kPrefetchBytes = 2048;
// A panel's groups are unpacked and multiplied by every row tile in chunks of this many: 8 KiB
// of weight tiles, which stay in L1 while the row tiles' activations stream past them (a whole
// panel's tiles, 32-96 KiB, did not: 1-16 rows ran 1.1-1.6× slower).
constexpr int64_t kChunkGroups = 16;
// Row tiles are taken in blocks of this many, each block's chunks unpacked again: a chunk's
// activations for the block (32 KiB) then stay in L1 beside its weights.
constexpr int64_t kBlockRowTiles = 4;
// A call of more than 16 rows whose last row tile would hold at most this many rows takes those
// rows with AVX512-VNNI instead (Int4PanelGroups512, on each chunk's panel bytes while they are in
// L1): a tile product and its store cost nearly as much for one row as for 16. Measured on the
// 1.7B layer's shape: 17 rows 1.12-1.15× faster, 18 rows 1.06×, 19 level, 20 and more slower.
constexpr int64_t kVnniTailMaxRows = 2;

#define DSCALE_UNROLL _Pragma("GCC unroll 16")

// Sums in tmm0-3, activations in tmm4 and tmm5, weights in tmm6 and tmm7; `tile_rows`
// activation rows per tile.
TileConfig ConfigFor(int64_t tile_rows) {
  TileConfig config;
  const auto m = static_cast<int>(tile_rows);
  for (int t = 0; t <= 3; ++t) config.Set(t, m, kLanes * 4);
  for (int t = 4; t <= 5; ++t) config.Set(t, m, kGroup);
  for (int t = 6; t <= 7; ++t) config.Set(t, kSteps, 64);
  return config;
}

// One call's operands, shared by its threads.
struct PanelCall {
  // The activations packed by chunk of groups, row tile and group: [chunks][row_tiles][groups
  // of the chunk][tile_rows][32], each group's tile contiguous (rows past the last zero), a chunk's
  // tiles together.
  const int8_t* packed;
  // The rows' activation scales in the same order: [chunks][row_tiles][groups of the chunk][16]
  // (zero past the last row).
  const float* packed_scales;
  const uint8_t* panels;
  const Int8Scale* panel_scales;
  float* y;
  int64_t rows, tile_rows, row_tiles, groups, first, out, ldy;
  bool accumulate;
  // The last rows [row_tiles · 16, row_tiles · 16 + vnni_rows) through AVX512-VNNI, from the
  // quantised rows as they lie.
  const Int8ActivationRows* xq;
  int64_t vnni_rows;
};

// A thread's scratch: the weight tiles of a chunk of the current panel's groups, each row tile's
// f32 accumulators between chunks, and a group's sums on their way to them.
struct PanelScratch {
  alignas(64) int8_t weights[kChunkGroups * kWeightTileBytes];
  CacheAlignedVector<float> acc;  // [row tiles + 1][kTileRows][kLanes]; the last: VNNI rows'
  alignas(64) int32_t sums[4][kTileRows * kLanes];  // one per sums tile
};

DSCALE_AVX512 void UnpackPanel(const uint8_t* panel, int64_t groups, int8_t* tiles) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i offset = _mm512_set1_epi8(8);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* src = panel + g * kInt4PanelGroupBytes;
    int8_t* dst = tiles + g * kWeightTileBytes;
    DSCALE_UNROLL
    for (int s = 0; s < 4; ++s) {
      _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchBytes + 64 * s), _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(src + 64 * s);
      const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, low), offset);
      const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), offset);
      _mm512_store_si512(dst + 64 * s, lo);
      _mm512_store_si512(dst + 64 * (4 + s), hi);
    }
  }
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The panel's 16 output scales of group g as f32.
DSCALE_AMX_INT8 inline __m512 OutputScales(const Int8Scale* scales, int64_t g) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + g * kLanes));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// acc[r] = fma(fl(d_w · d_x[r]), sums[r], acc[r]) for the tile's rows r < kRows: one group.
template <int kRows>
DSCALE_AMX_INT8 inline void FoldGroup(const int32_t* sums, __m512 dw, const float* dx,
                                      __m512 acc[kRows]) {
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const __m512 p = _mm512_mul_ps(dw, _mm512_set1_ps(dx[r]));
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(sums + r * kLanes));
    acc[r] = _mm512_fmadd_ps(p, dot, acc[r]);
  }
}

// FoldGroup for group g of a chunk, its sums stored in sums[g % 4].
template <int kRows>
DSCALE_AMX_INT8 inline void FoldStored(const PanelScratch& scratch, const Int8Scale* scales,
                                       const float* dx, int64_t g, __m512 acc[kRows]) {
  FoldGroup<kRows>(scratch.sums[g % 4], OutputScales(scales, g), dx + g * kTileRows, acc);
}

// Group g's product into sum tile C (zeroed first) from activation tile A and weight tile B,
// with `a` (the row tile's packed groups, `a_bytes` apart) and `weights` in scope: a macro, since
// the tile intrinsics paste their register numbers into the instruction text.
#define DSCALE_ISSUE_GROUP(C, A, B, g)                  \
  do {                                                  \
    _tile_zero(C);                                      \
    _tile_loadd(A, a + (g)*a_bytes, kGroup);            \
    _tile_loadd(B, weights + (g)*kWeightTileBytes, 64); \
    _tile_dpbssd(C, A, B);                              \
  } while (0)

// Group g's sums from tile C to sums[g % 4] and group g − 1's folded, with group g + 3 issued
// first (sums tiles tmm0-3 in turn, activations in tmm4/5 and weights in tmm6/7 by parity): four
// groups in flight, so that a tile product's latency and its store's hide behind the folds.
#define DSCALE_STEP(C, C3, A, B, g)                                  \
  do {                                                               \
    if ((g) + 3 < groups) DSCALE_ISSUE_GROUP(C3, A, B, (g) + 3);     \
    _tile_stored(C, scratch.sums[C], kLanes * 4);                    \
    if ((g) > 0) FoldStored<kRows>(scratch, scales, dx, (g)-1, acc); \
  } while (0)

// One row tile (kRows real rows of its packed activations `a` and scales `dx`) against a chunk of
// the panel's groups, unpacked: every group in order.
template <int kRows>
DSCALE_AMX_INT8 void MultiplyRowTile(const int8_t* a, int64_t a_bytes, const float* dx,
                                     const Int8Scale* scales, int64_t groups, PanelScratch& scratch,
                                     __m512 acc[kRows]) {
  const int8_t* weights = scratch.weights;
  DSCALE_ISSUE_GROUP(0, 4, 6, 0);
  if (groups > 1) DSCALE_ISSUE_GROUP(1, 5, 7, 1);
  if (groups > 2) DSCALE_ISSUE_GROUP(2, 4, 6, 2);
  int64_t g = 0;
  for (; g + 4 <= groups; g += 4) {
    DSCALE_STEP(0, 3, 5, 7, g);
    DSCALE_STEP(1, 0, 4, 6, g + 1);
    DSCALE_STEP(2, 1, 5, 7, g + 2);
    DSCALE_STEP(3, 2, 4, 6, g + 3);
  }
  if (g < groups) DSCALE_STEP(0, 3, 5, 7, g);
  if (g + 1 < groups) DSCALE_STEP(1, 0, 4, 6, g + 1);
  if (g + 2 < groups) DSCALE_STEP(2, 1, 5, 7, g + 2);
  FoldStored<kRows>(scratch, scales, dx, groups - 1, acc);
}

#undef DSCALE_STEP
#undef DSCALE_ISSUE_GROUP

// y's lanes [l0, l1) of `rows` rows from acc[rows][16] (y already offset to the panel's lane 0).
DSCALE_AVX512 void StoreAccumulated(const float* acc, int64_t rows, int l0, int l1, float* y,
                                    int64_t ldy, bool accumulate) {
  const auto mask = static_cast<__mmask16>(((1u << l1) - 1u) & ~((1u << l0) - 1u));
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * ldy;
    __m512 v = _mm512_load_ps(acc + r * kLanes);
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yr), v);
    _mm512_mask_storeu_ps(yr, mask, v);
  }
}

// Where a row tile's chunk of groups starts and whether it is the panel's first or last.
struct Chunk {
  int64_t g0, groups;
  bool first, last;
};

// Row tile `rt` of panel `b` against a chunk: its accumulators from zero or from the chunk
// before, and into y after the last.
template <int kRows>
DSCALE_AMX_INT8 void RowTile(const PanelCall& call, int64_t b, int64_t rt, const Chunk& chunk,
                             PanelScratch& scratch, int l0, int l1) {
  float* saved = scratch.acc.data() + rt * kTileRows * kLanes;
  __m512 acc[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    acc[r] = chunk.first ? _mm512_setzero_ps() : _mm512_load_ps(saved + r * kLanes);
  }
  const int64_t a_bytes = call.tile_rows * kGroup;
  MultiplyRowTile<kRows>(
      call.packed + (chunk.g0 * call.row_tiles + rt * chunk.groups) * a_bytes, a_bytes,
      call.packed_scales + (chunk.g0 * call.row_tiles + rt * chunk.groups) * kTileRows,
      call.panel_scales + b * QuantPanelScales(call.groups * kGroup) + chunk.g0 * kLanes,
      chunk.groups, scratch, acc);
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm512_store_ps(saved + r * kLanes, acc[r]);
  if (!chunk.last) return;
  StoreAccumulated(saved, kRows, l0, l1,
                   call.y + rt * kTileRows * call.ldy + b * kLanes - call.first, call.ldy,
                   call.accumulate);
}

#pragma GCC diagnostic pop

// The VNNI rows of panel b against a chunk: on from the chunk before, into y after the last.
void VnniRows(const PanelCall& call, int64_t b, const uint8_t* panel, const Chunk& chunk,
              PanelScratch& scratch, int l0, int l1) {
  const int64_t r0 = call.row_tiles * kTileRows;
  float* acc = scratch.acc.data() + r0 * kLanes;
  Int4PanelGroups512(*call.xq, r0, call.vnni_rows, panel,
                     call.panel_scales + b * QuantPanelScales(call.groups * kGroup), chunk.g0,
                     chunk.groups, acc, chunk.first);
  if (!chunk.last) return;
  StoreAccumulated(acc, call.vnni_rows, l0, l1, call.y + r0 * call.ldy + b * kLanes - call.first,
                   call.ldy, call.accumulate);
}

void RunPanel(const PanelCall& call, int64_t b, PanelScratch& scratch) {
  const int64_t in = call.groups * kGroup;
  const uint8_t* panel = call.panels + b * Int4PanelBytes(in);
  scratch.acc.resize(static_cast<size_t>((call.row_tiles + 1) * kTileRows * kLanes));
  // Lane l is output b·16 + l − first; the first and last panels may hold others' lanes.
  const int64_t o0 = b * kLanes - call.first;
  const int l0 = static_cast<int>(std::max<int64_t>(0, -o0));
  const int l1 = static_cast<int>(std::min<int64_t>(kLanes, call.out - o0));
  for (int64_t rt0 = 0; rt0 < call.row_tiles; rt0 += kBlockRowTiles) {
    const int64_t rt1 = std::min(call.row_tiles, rt0 + kBlockRowTiles);
    for (int64_t g0 = 0; g0 < call.groups; g0 += kChunkGroups) {
      const Chunk chunk{.g0 = g0,
                        .groups = std::min(kChunkGroups, call.groups - g0),
                        .first = g0 == 0,
                        .last = g0 + kChunkGroups >= call.groups};
      UnpackPanel(panel + g0 * kInt4PanelGroupBytes, chunk.groups, scratch.weights);
      if (rt0 == 0 && call.vnni_rows > 0) VnniRows(call, b, panel, chunk, scratch, l0, l1);
      for (int64_t rt = rt0; rt < rt1; ++rt) {
        const int rows = static_cast<int>(std::min(kTileRows, call.rows - rt * kTileRows));
        WithRows<kTileRows>(
            rows, [&]<int kRows>() { RowTile<kRows>(call, b, rt, chunk, scratch, l0, l1); });
      }
    }
  }
}

// call.packed and call.packed_scales from the quantised rows.
void PackActivations(const Int8ActivationRows& xq, int64_t rows, int64_t tile_rows,
                     CacheAlignedVector<int8_t>& packed, CacheAlignedVector<float>& scales) {
  const int64_t groups = xq.groups, row_tiles = (rows + kTileRows - 1) / kTileRows;
  packed.assign(static_cast<size_t>(row_tiles * groups * tile_rows * kGroup), 0);
  scales.assign(static_cast<size_t>(row_tiles * groups * kTileRows), 0.0f);
  for (int64_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
    const int64_t n = std::min(kChunkGroups, groups - g0);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t rt = row / kTileRows, r = row % kTileRows;
      for (int64_t g = g0; g < g0 + n; ++g) {
        const int64_t tile = g0 * row_tiles + rt * n + (g - g0);
        std::memcpy(packed.data() + (tile * tile_rows + r) * kGroup,
                    xq.q + (row * groups + g) * kGroup, kGroup);
        scales[static_cast<size_t>(tile * kTileRows + r)] = xq.scale[row * groups + g];
      }
    }
  }
}

thread_local CacheAlignedVector<int8_t> packed_activations;
thread_local CacheAlignedVector<float> packed_scales;

}  // namespace

void LinearAmxInt4Panels(const Int8ActivationRows& xq, int64_t rows, const uint8_t* panels,
                         const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                         float* y, int64_t ldy, bool accumulate) {
  DSCALE_CHECK_MSG(HasAmxInt8(), "this CPU cannot run the AMX int8 kernel");
  DSCALE_CHECK(rows > 0 && in > 0 && out > 0 && ldy >= out && xq.groups == Int8Groups(in) &&
               first >= 0 && first < kLanes);
  const int64_t groups = xq.groups;
  // Calls of fewer than 16 rows take tiles of their rows; more take 16 a tile, the last padded,
  // or VNNI's where it would hold few.
  const int64_t last = rows % kTileRows;
  const bool vnni = HasInt8DotIsa(Int8DotIsa::kAvx512Vnni);  // every AMX CPU so far
  const int64_t vnni_rows = vnni && rows > kTileRows && last <= kVnniTailMaxRows ? last : 0;
  const int64_t tile_rows_total = rows - vnni_rows;
  const int64_t tile_rows = std::min(tile_rows_total, kTileRows);
  PackActivations(xq, tile_rows_total, tile_rows, packed_activations, packed_scales);
  const PanelCall call{.packed = packed_activations.data(),
                       .packed_scales = packed_scales.data(),
                       .panels = panels,
                       .panel_scales = panel_scales,
                       .y = y,
                       .rows = tile_rows_total,
                       .tile_rows = tile_rows,
                       .row_tiles = (tile_rows_total + kTileRows - 1) / kTileRows,
                       .groups = groups,
                       .first = first,
                       .out = out,
                       .ldy = ldy,
                       .accumulate = accumulate,
                       .xq = &xq,
                       .vnni_rows = vnni_rows};
  RunTilesInParallel(ConfigFor(tile_rows), QuantPanels(first, out), in * out >= kParallelMinWeights,
                     [&call](int64_t b) {
                       thread_local PanelScratch scratch;
                       RunPanel(call, b, scratch);
                     });
}

}  // namespace dscale::cpu
