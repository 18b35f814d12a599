#include "kernels/cpu/gemm_bf16_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cache_aligned.h"
#include "core/check.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu {
namespace {

// One tile: 16 rows of 64 bytes. A weight tile is 16 outputs × 32 inputs (BF16), loaded straight
// from the weights' rows; an activation tile 16 input pairs × up to 16 rows (a pair of BF16 values
// per 32-bit lane, as tdpbf16ps reads its second operand), packed once per call; a sum tile 16
// outputs × up to 16 rows (f32).
constexpr int64_t kTileOutputs = 16;
constexpr int64_t kTileInputs = 32;
constexpr int64_t kTileRows = 16;
constexpr int64_t kTilePairs = kTileInputs / 2;
// Below this many weights a call runs on one thread (as the other BF16 paths).
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;
// Below this many activations a call packs them on one thread.
constexpr int64_t kParallelMinActivations = int64_t{1} << 16;

// The tiles of a call with `cols` activation rows per tile, in ldtilecfg's 64-byte layout: the
// sums of up to kGroupTiles activation tiles in tmm0-tmm3, the weights in tmm4 and tmm5 in turn,
// the activations in tmm6 and tmm7 in turn. With whole 16-row tiles every register is 16 rows of
// 64 bytes, so the wide groups (MultiplyWideTiles: five or six sums) reuse the same configuration.
//
// One output tile at a time: a thread streams 16 weight rows, fetched a few steps ahead
// (kPrefetchSteps, below), and the weights are read in place, in the checkpoint's layout (sharing
// activation tiles among more output tiles, and weights repacked into tile order, gained nothing
// streaming from memory: docs/BENCHMARKS.md, "Measurements behind the kernels' constants"). Each
// weight tile serves up to kGroupTiles activation tiles, each into a sum of its own, with the
// weight and activation loads double buffered (so a load need not wait for the product before
// it), and up to kMaxGroupTiles with fewer registers for the loads (MultiplyWideTiles): a call
// runs its activation tiles in the fewest passes over each weight tile (RunTile), since every pass
// after the first streams the tile's weights again from L2 at about the cost of its products.
constexpr int kGroupTiles = 4;
constexpr int kMaxGroupTiles = 6;
TileConfig ConfigFor(int64_t cols) {
  TileConfig config;
  const auto activation_bytes = static_cast<int>(cols * 4);
  for (int t = 0; t < kGroupTiles; ++t) config.Set(t, kTileOutputs, activation_bytes);
  for (int t = 4; t <= 5; ++t) config.Set(t, kTileOutputs, kTileInputs * 2);
  for (int t = 6; t <= 7; ++t) config.Set(t, kTilePairs, activation_bytes);
  return config;
}

// One call's shape and operands, shared by its threads.
struct AmxCall {
  const uint32_t* packed;  // [row tiles][steps][kTilePairs][cols] pairs of BF16 bits
  const uint16_t* w;
  float* y;
  int64_t rows, in, out, ldy;
  int64_t cols;        // activation rows per tile: min(rows, 16)
  int64_t full_steps;  // input steps of a whole 32 inputs
  int64_t steps;       // full_steps, plus one for a tail of in % 32
  bool accumulate;
};

// A thread's scratch: an output tile past `out` padded with zero rows, a tail step padded with
// zero inputs (exact zero products), the sums on their way to y.
struct AmxScratch {
  std::vector<uint16_t> partial;  // [16][in]
  alignas(64) uint16_t tail[kTileOutputs * kTileInputs];
  alignas(64) float sums[kTileOutputs * kTileRows];
};

// The 16 weight rows of output tile `tile` (`in` values apart): the weights themselves, or a
// zero-padded copy when the tile runs past `out`.
const uint16_t* RowsOfTile(const AmxCall& call, int64_t tile, AmxScratch& scratch) {
  const int64_t first = tile * kTileOutputs;
  if (first + kTileOutputs <= call.out) return call.w + first * call.in;
  scratch.partial.assign(static_cast<size_t>(kTileOutputs * call.in), 0);
  std::memcpy(scratch.partial.data(), call.w + first * call.in,
              static_cast<size_t>((call.out - first) * call.in) * sizeof(uint16_t));
  return scratch.partial.data();
}

// The last, partial input step of a tile's rows into scratch.tail.
void FillTail(const AmxCall& call, const uint16_t* rows, AmxScratch& scratch) {
  const int64_t k0 = call.full_steps * kTileInputs;
  std::memset(scratch.tail, 0, sizeof(scratch.tail));
  for (int64_t m = 0; m < kTileOutputs; ++m) {
    std::memcpy(scratch.tail + m * kTileInputs, rows + m * call.in + k0,
                static_cast<size_t>(call.in - k0) * sizeof(uint16_t));
  }
}

// Input steps ahead of the product whose weights MultiplyTile asks the cache for. A tile load
// names 16 rows `in` apart and the next load cannot start until the product before it has read
// its registers, so without help each step waits for memory; fetching the rows' lines a few steps
// early keeps them in flight (docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int64_t kPrefetchSteps = 4;

// Asks for the 16 weight rows' 64 bytes of input step `step` (a hint: no fault, no effect on y).
inline void PrefetchStep(const uint16_t* rows, int64_t in, int64_t step) {
  const uint16_t* at = rows + step * kTileInputs;
  for (int64_t m = 0; m < kTileOutputs; ++m) {
    _mm_prefetch(reinterpret_cast<const char*>(at + m * in), _MM_HINT_T0);
  }
}

// y's block of output tile `tile` and activation rows [row0, row0 + cols) from scratch.sums.
void StoreSums(const AmxCall& call, int64_t tile, int64_t row0, const AmxScratch& scratch) {
  const int64_t first_output = tile * kTileOutputs;
  StoreTileSums(scratch.sums, std::min(kTileOutputs, call.out - first_output),
                std::min(call.cols, call.rows - row0), call.y + row0 * call.ldy + first_output,
                call.ldy, call.accumulate);
}

// The G sum tiles tmm0 … tmm(G − 1) through scratch.sums into y (StoreSums), activation rows from
// row0 on, a tile's `cols` rows each.
#define DSCALE_AMX_STORE_SUM(T)                             \
  do {                                                      \
    if constexpr (G > (T)) {                                \
      _tile_stored(T, scratch.sums, kTileRows * 4);         \
      StoreSums(call, tile, row0 + (T)*call.cols, scratch); \
    }                                                       \
  } while (0)
template <int G>
DSCALE_AMX_BF16 void StoreSumTiles(const AmxCall& call, int64_t tile, int64_t row0,
                                   AmxScratch& scratch) {
  DSCALE_AMX_STORE_SUM(0);
  DSCALE_AMX_STORE_SUM(1);
  DSCALE_AMX_STORE_SUM(2);
  DSCALE_AMX_STORE_SUM(3);
  DSCALE_AMX_STORE_SUM(4);
  DSCALE_AMX_STORE_SUM(5);
}
#undef DSCALE_AMX_STORE_SUM

// One input step: the weight tile `w` into tmm W, then for each of the G activation tiles (`b`,
// `b_tile` apart) its step into tmm6 or tmm7 in turn and tdpbf16ps into its sum, tmm0 + i. The
// tile intrinsics take register numbers as literals (they are spelled into the instruction), so
// each weight register has its function.
#define DSCALE_AMX_GROUP_STEP(NAME, W)                                                     \
  template <int G>                                                                         \
  DSCALE_AMX_BF16 inline void NAME(const uint16_t* w, int64_t w_stride, const uint32_t* b, \
                                   int64_t b_tile, int64_t b_stride) {                     \
    _tile_loadd(W, w, w_stride);                                                           \
    _tile_loadd(6, b, b_stride);                                                           \
    _tile_dpbf16ps(0, W, 6);                                                               \
    if constexpr (G > 1) {                                                                 \
      _tile_loadd(7, b + b_tile, b_stride);                                                \
      _tile_dpbf16ps(1, W, 7);                                                             \
    }                                                                                      \
    if constexpr (G > 2) {                                                                 \
      _tile_loadd(6, b + 2 * b_tile, b_stride);                                            \
      _tile_dpbf16ps(2, W, 6);                                                             \
    }                                                                                      \
    if constexpr (G > 3) {                                                                 \
      _tile_loadd(7, b + 3 * b_tile, b_stride);                                            \
      _tile_dpbf16ps(3, W, 7);                                                             \
    }                                                                                      \
  }
DSCALE_AMX_GROUP_STEP(EvenStep, 4)
DSCALE_AMX_GROUP_STEP(OddStep, 5)
#undef DSCALE_AMX_GROUP_STEP

// The sum tiles of one output tile's weight rows and G activation tiles from `b` (each
// call.steps · kTilePairs · call.cols values), every input step in order, each sum on its own;
// then each sum through scratch.sums into y (StoreSums), activation rows from row0 on. Even
// steps load the weights into tmm4, odd ones into tmm5, so a step's load need not wait for the
// last step's products.
template <int G>
DSCALE_AMX_BF16 void MultiplyTiles(const AmxCall& call, const uint16_t* rows, const uint32_t* b,
                                   int64_t tile, int64_t row0, AmxScratch& scratch) {
  static_assert(G >= 1 && G <= kGroupTiles);
  const int64_t a_stride = call.in * 2;
  const int64_t b_stride = call.cols * 4;
  const int64_t b_step = kTilePairs * call.cols;
  const int64_t b_tile = call.steps * b_step;
  _tile_zero(0);
  if constexpr (G > 1) _tile_zero(1);
  if constexpr (G > 2) _tile_zero(2);
  if constexpr (G > 3) _tile_zero(3);
  int64_t s = 0;
  for (; s + 2 <= call.full_steps; s += 2) {
    if (s + kPrefetchSteps + 2 <= call.full_steps) {
      PrefetchStep(rows, call.in, s + kPrefetchSteps);
      PrefetchStep(rows, call.in, s + kPrefetchSteps + 1);
    }
    EvenStep<G>(rows + s * kTileInputs, a_stride, b + s * b_step, b_tile, b_stride);
    OddStep<G>(rows + (s + 1) * kTileInputs, a_stride, b + (s + 1) * b_step, b_tile, b_stride);
  }
  if (s < call.full_steps) {
    EvenStep<G>(rows + s * kTileInputs, a_stride, b + s * b_step, b_tile, b_stride);
    ++s;
  }
  if (s < call.steps) {
    OddStep<G>(scratch.tail, kTileInputs * 2, b + s * b_step, b_tile, b_stride);
  }
  StoreSumTiles<G>(call, tile, row0, scratch);
}

// A wide group's step, with `a`, `a_stride`, `bs`, `b_tile` and `b_stride` in scope: the weight
// tile into tmm A, then activation tiles 0-4 into tmm BE and BO in turn, each multiplied into its
// sum tmm0-tmm4 (the register numbers are literals, as for DSCALE_AMX_GROUP_STEP).
#define DSCALE_AMX_WIDE_STEP(A, BE, BO)         \
  do {                                          \
    _tile_loadd(A, a, a_stride);                \
    _tile_loadd(BE, bs, b_stride);              \
    _tile_dpbf16ps(0, A, BE);                   \
    _tile_loadd(BO, bs + b_tile, b_stride);     \
    _tile_dpbf16ps(1, A, BO);                   \
    _tile_loadd(BE, bs + 2 * b_tile, b_stride); \
    _tile_dpbf16ps(2, A, BE);                   \
    _tile_loadd(BO, bs + 3 * b_tile, b_stride); \
    _tile_dpbf16ps(3, A, BO);                   \
    _tile_loadd(BE, bs + 4 * b_tile, b_stride); \
    _tile_dpbf16ps(4, A, BE);                   \
  } while (0)

// Five or six activation tiles to a weight tile, for whole 16-row tiles (call.cols == 16): the
// sums in tmm0 … tmm(G − 1), so the weights have one register left (tmm5 for five, tmm6 for six)
// and the activations two in turn (tmm6, tmm7) or one (tmm7). A step's weight load then waits for
// the last step's products, and with six each activation load for the product before it; but a
// call of 65-96 rows runs in one pass over the weights instead of two, and each pass after the
// first streams a tile's weight rows again from L2 at about what its products cost
// (docs/BENCHMARKS.md, "AMX tiles: five and six activation tiles to a weight tile"). Every sum is
// the same steps in the same order as in MultiplyTiles.
template <int G>
DSCALE_AMX_BF16 void MultiplyWideTiles(const AmxCall& call, const uint16_t* rows, const uint32_t* b,
                                       int64_t tile, int64_t row0, AmxScratch& scratch) {
  static_assert(G == 5 || G == 6);
  DSCALE_CHECK(call.cols == kTileRows);
  const int64_t b_stride = call.cols * 4;
  const int64_t b_step = kTilePairs * call.cols;
  const int64_t b_tile = call.steps * b_step;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  if constexpr (G > 5) _tile_zero(5);
  for (int64_t s = 0; s < call.steps; ++s) {
    if (s + kPrefetchSteps < call.full_steps) PrefetchStep(rows, call.in, s + kPrefetchSteps);
    const bool whole = s < call.full_steps;
    const uint16_t* a = whole ? rows + s * kTileInputs : scratch.tail;
    const int64_t a_stride = whole ? call.in * 2 : kTileInputs * 2;
    const uint32_t* bs = b + s * b_step;
    if constexpr (G == 5) {
      DSCALE_AMX_WIDE_STEP(5, 6, 7);
    } else {
      DSCALE_AMX_WIDE_STEP(6, 7, 7);
      _tile_loadd(7, bs + 5 * b_tile, b_stride);
      _tile_dpbf16ps(5, 6, 7);
    }
  }
  StoreSumTiles<G>(call, tile, row0, scratch);
}

#undef DSCALE_AMX_WIDE_STEP

// Output tile `tile` for every activation tile, in the fewest passes of at most kMaxGroupTiles
// activation tiles, as even as possible (15 tiles: three passes of five): its weights (16 rows ×
// in) come from memory in the first pass and from cache in the others, each of which costs about
// a stream of them from L2 whatever its products (a 65th row cost a 64-row call a third more as
// a pass of its own).
void RunTile(const AmxCall& call, int64_t tile, AmxScratch& scratch) {
  const uint16_t* rows = RowsOfTile(call, tile, scratch);
  if (call.steps > call.full_steps) FillTail(call, rows, scratch);
  const int64_t row_tiles = (call.rows + call.cols - 1) / call.cols;
  const int64_t tile_size = call.steps * kTilePairs * call.cols;
  int64_t passes = (row_tiles + kMaxGroupTiles - 1) / kMaxGroupTiles;
  for (int64_t rt = 0; rt < row_tiles; --passes) {
    const int64_t group = (row_tiles - rt + passes - 1) / passes;
    const uint32_t* b = call.packed + rt * tile_size;
    const int64_t row0 = rt * call.cols;
    switch (group) {
      case 1:
        MultiplyTiles<1>(call, rows, b, tile, row0, scratch);
        break;
      case 2:
        MultiplyTiles<2>(call, rows, b, tile, row0, scratch);
        break;
      case 3:
        MultiplyTiles<3>(call, rows, b, tile, row0, scratch);
        break;
      case 4:
        MultiplyTiles<4>(call, rows, b, tile, row0, scratch);
        break;
      case 5:
        MultiplyWideTiles<5>(call, rows, b, tile, row0, scratch);
        break;
      default:
        MultiplyWideTiles<6>(call, rows, b, tile, row0, scratch);
        break;
    }
    rt += group;
  }
}

// A whole activation tile (16 rows of `in` BF16 values from x) into its packed tile `dst`:
// dst[j · 16 + c] = row c's pair j, each pair j's 16 rows gathered at once (AVX-512, which every
// AMX CPU has). Past the last pair `dst` is left as it was.
DSCALE_AVX512 void PackWholeTile(const uint16_t* x, int64_t in, uint32_t* dst) {
  const __m512i row_bytes =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(in * 2)));
  const auto* base = reinterpret_cast<const char*>(x);
  const int64_t pairs = in / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    _mm512_storeu_si512(
        dst + j * kTileRows,
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xFFFF, row_bytes, base + 4 * j, 1));
  }
  if (in % 2 != 0) {
    for (int64_t c = 0; c < kTileRows; ++c) dst[pairs * kTileRows + c] = x[c * in + in - 1];
  }
}

// Row tile `rt` of PackActivations: its pairs, zeros past `in` and past the last row.
void PackRowTile(const uint16_t* xb, int64_t rows, int64_t in, int64_t cols, int64_t tile_size,
                 int64_t rt, uint32_t* tile) {
  const int64_t first = rt * cols;
  const int64_t pairs = in / 2;
  if (cols == kTileRows && first + kTileRows <= rows) {
    PackWholeTile(xb + first * in, in, tile);
    const int64_t packed_pairs = pairs + in % 2;
    std::fill(tile + packed_pairs * kTileRows, tile + tile_size, uint32_t{0});
    return;
  }
  std::fill(tile, tile + tile_size, uint32_t{0});
  for (int64_t c = 0; c < std::min(cols, rows - first); ++c) {
    const uint16_t* x = xb + (first + c) * in;
    for (int64_t j = 0; j < pairs; ++j) {
      uint32_t pair;
      std::memcpy(&pair, x + 2 * j, sizeof(pair));
      tile[j * cols + c] = pair;
    }
    if (in % 2 != 0) tile[pairs * cols + c] = x[in - 1];
  }
}

// packed[rt][s][p][c] = the BF16 pair (xb[row][32s + 2p], xb[row][32s + 2p + 1]) of row
// rt·cols + c, zero past `in` and past the last row. The row tiles are packed on the threads where
// there are several and many activations (a prompt's, not a decode step's one tile), which on the
// calling thread alone waited for it
// (docs/BENCHMARKS.md, "A prompt's activations rounded and packed on the threads").
void PackActivations(const uint16_t* xb, int64_t rows, int64_t in, int64_t cols, int64_t steps,
                     CacheAlignedVector<uint32_t>& packed) {
  const int64_t row_tiles = (rows + cols - 1) / cols;
  const int64_t tile_size = steps * kTilePairs * cols;
  packed.resize(static_cast<size_t>(row_tiles * tile_size));
  uint32_t* tiles = packed.data();
#pragma omp parallel for schedule(static) if (row_tiles > 1 && rows * in >= kParallelMinActivations)
  for (int64_t rt = 0; rt < row_tiles; ++rt) {
    PackRowTile(xb, rows, in, cols, tile_size, rt, tiles + rt * tile_size);
  }
}

thread_local CacheAlignedVector<uint32_t> packed_activations;

// Calls panel(r0, n) for consecutive panels [r0, r0 + n) covering [0, rows), whose activations
// the kernel packs at `packed_bytes_per_row`: every output tile reads all of its call's packed
// activations, so past L2 they would stream from L3 once per 16 outputs (a
// 1,440-row prefill of the Qwen3-1.7B shape took 1.8 times as long in one call: docs/BENCHMARKS.md,
// "Panels of activation rows for the AMX tiles"). The fewest panels of at most kAmxPanelBytes,
// that limit a whole number of groups of `group_rows` (the kernel's: four double-buffered
// activation tiles, 64 rows; at least one group however wide the rows), balanced in whole 16-row
// tiles. Panels never change a result: each row is computed the same way in any.
constexpr int64_t kAmxPanelBytes = int64_t{512} << 10;
template <typename Panel>
void ForActivationPanels(int64_t rows, int64_t packed_bytes_per_row, int64_t group_rows,
                         const Panel& panel) {
  const int64_t limit =
      std::max(group_rows, kAmxPanelBytes / packed_bytes_per_row / group_rows * group_rows);
  const int64_t panels = (rows + limit - 1) / limit;
  const int64_t per_panel = ((rows + panels - 1) / panels + kTileRows - 1) / kTileRows * kTileRows;
  for (int64_t r0 = 0; r0 < rows; r0 += per_panel) panel(r0, std::min(per_panel, rows - r0));
}

// One panel of rows (ForActivationPanels): its activations packed once, the threads splitting
// the output tiles.
void RunPanel(const uint16_t* xb, const uint16_t* w, float* y, int64_t rows, int64_t in,
              int64_t out, bool accumulate, int64_t ldy) {
  AmxCall call{};
  call.cols = std::min(rows, kTileRows);
  call.full_steps = in / kTileInputs;
  call.steps = (in + kTileInputs - 1) / kTileInputs;
  if (rows == 1 && in % kTileInputs == 0) {
    // One row of whole steps is already in the packed layout: its pairs in order.
    call.packed = reinterpret_cast<const uint32_t*>(xb);
  } else {
    PackActivations(xb, rows, in, call.cols, call.steps, packed_activations);
    call.packed = packed_activations.data();
  }
  call.w = w;
  call.y = y;
  call.rows = rows;
  call.in = in;
  call.out = out;
  call.ldy = ldy;
  call.accumulate = accumulate;
  const TileConfig config = ConfigFor(call.cols);
  const int64_t tiles = (out + kTileOutputs - 1) / kTileOutputs;
  RunTilesInParallel(config, tiles, in * out >= kParallelMinWeights, [&call](int64_t t) {
    thread_local AmxScratch scratch;
    RunTile(call, t, scratch);
  });
}

}  // namespace

bool HasAmxBf16() {
  static const bool has = HasAmxBf16(CpuFeaturesInUse());
  return has;
}

bool HasAmxBf16(CpuIsaCap cap) { return HasAmxBf16(CpuFeaturesFor(cap)); }

bool HasAmxBf16(const CpuFeatures& features) { return features.amx_bf16; }

void LinearAmxBf16(const uint16_t* xb, const uint16_t* w, float* y, int64_t rows, int64_t in,
                   int64_t out, bool accumulate, int64_t ldy) {
  DSCALE_CHECK_MSG(HasAmxBf16(), "this CPU cannot run the AMX BF16 kernel");
  DSCALE_CHECK(rows > 0 && in > 0 && out > 0 && ldy >= out);
  ForActivationPanels(rows, in * 2, kTileRows * kGroupTiles, [&](int64_t r0, int64_t n) {
    RunPanel(xb + r0 * in, w, y + r0 * ldy, n, in, out, accumulate, ldy);
  });
}

}  // namespace dscale::cpu
