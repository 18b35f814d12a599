#pragma once
// The CPU attention kernel's tiles (module-private), compiled once per vector width: attention.cc
// includes this file with the build's vectors (simd.h: 8 lanes under the Release flags, 4 in
// sanitizer and debug builds) and attention_avx512.cc with 16-lane AVX-512 vectors. The
// including file names its copy's namespace with DSCALE_ATTENTION_VARIANT. Each lane's arithmetic
// is the same in every width (a score summed over head_dim in order, the softmax and the value
// pass per lane), so the copies give the same bits.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/simd.h"

#ifndef DSCALE_ATTENTION_VARIANT
#error "define DSCALE_ATTENTION_VARIANT (the namespace of this copy of the tiles) first"
#endif

// How a work item is laid out. An item is one query tile of one span for a run of kv heads: for
// each kv head, the tile's rows for every query head that reads it (the GQA group), so each key
// and value row is fetched once for the whole group. The run's K and V rows of one position are
// contiguous in the cache, so an item reads whole runs rather than one head's rows at a stride
// of kv_heads·head_dim (a stride the prefetchers follow poorly: one head at a time, decode
// attention read its K/V at a third of the memory bandwidth). Per kv head, the query rows are
// "slots", stacked head after head with no gaps and handled in blocks of kRowBlock (a block may
// hold rows of two heads):
//   slot t = g·live + r        g: head within the group, r: row within the tile, live: the
//                              tile's rows; slots past group·live (to whole blocks) are padding
//   qt      [blocks, head_dim, kRowBlock]   scaled queries, transposed (slots in vector lanes)
//   scores  [blocks, kKeyChunk, kRowBlock]  one chunk's scores, then its probabilities
//   acc     [slots, head_dim]               unnormalised Σ p·v per slot
//   keys, values [kKeyChunk, run, head_dim]  the chunk's rows of every kv head of the run
// Scoring broadcasts one key element against a vector of slots, so it needs no horizontal
// sums, and the online-softmax bookkeeping (running max, sum, rescale factor) runs across
// slots in vector lanes; the value pass runs along head_dim. Blocks are contiguous so the
// scoring loop walks memory sequentially whatever the tile height.

namespace dscale::cpu::DSCALE_ATTENTION_VARIANT {
namespace {

using simd::Floats;
using simd::kLanes;

// Positions per chunk of the online softmax: the chunk's key and value rows (2 · 32 · head_dim
// floats, 32 KiB at head_dim 128) are copied once and stay in L1/L2 for every slot.
constexpr int kKeyChunk = 32;
// Slots scored together: 16 are two AVX vectors, and with kKeysPerStep keys per step that is
// eight independent accumulator chains, enough to keep the FMA units busy.
constexpr int kRowBlock = 16;
constexpr int kRowVectors = kRowBlock / kLanes;
// (16-lane vectors hold a whole row block: they score 8 keys per step for the same 8 chains.)
constexpr int kKeysPerStep = kRowVectors == 1 ? 8 : 4;
static_assert(kKeyChunk % kKeysPerStep == 0 && kRowBlock % kLanes == 0);
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Span-local query rows [row_begin, row_end) of one span for kv heads [kv_begin, kv_end) and
// their groups of query heads. row_end − row_begin ≤ kTileRows; only a span's last tile may be
// shorter.
struct WorkItem {
  int32_t span = 0;
  int32_t kv_begin = 0;
  int32_t kv_end = 0;
  int32_t row_begin = 0;
  int32_t row_end = 0;

  int32_t run() const { return kv_end - kv_begin; }
  int32_t live() const { return row_end - row_begin; }
  // Slots holding a query row of the group's `group` heads, and the padded count.
  int32_t slots(int32_t group) const { return group * live(); }
  int32_t padded_slots(int32_t group) const {
    return (slots(group) + kRowBlock - 1) / kRowBlock * kRowBlock;
  }
  // Tile row of slot t; padding slots take the last live row (see VisibleEnd).
  int32_t row_of(int32_t t, int32_t group) const {
    return t < slots(group) ? t % live() : live() - 1;
  }
};

// One kv head's share of a tile's buffers (layouts above).
struct HeadScratch {
  float* qt;
  float* scores;
  float* acc;
  float* row_max;  // running maximum score per slot
  float* row_sum;  // running Σ e^(score − row_max) per slot
  float* rescale;  // e^(old max − new max) for the current chunk, per slot
};

// Per-thread buffers, allocated once per call and reused across work items: `capacity` slots for
// each of up to `run` kv heads, and one chunk of K/V rows for the run.
class TileScratch {
 public:
  TileScratch(int32_t capacity, int32_t head_dim, int32_t run)
      : capacity_(capacity),
        head_dim_(head_dim),
        per_slot_(static_cast<size_t>(run) * capacity * (2 * head_dim + kKeyChunk + 3)),
        keys_(static_cast<size_t>(kKeyChunk) * run * head_dim),
        values_(keys_.size()) {}

  HeadScratch head(int32_t j) {
    const int64_t cap = capacity_;
    float* base = per_slot_.data() + j * cap * (2 * head_dim_ + kKeyChunk + 3);
    HeadScratch h;
    h.qt = base;
    h.acc = h.qt + cap * head_dim_;
    h.scores = h.acc + cap * head_dim_;
    h.row_max = h.scores + cap * kKeyChunk;
    h.row_sum = h.row_max + cap;
    h.rescale = h.row_sum + cap;
    return h;
  }
  float* keys() { return keys_.data(); }
  float* values() { return values_.data(); }

 private:
  int64_t capacity_;
  int64_t head_dim_;
  std::vector<float> per_slot_;
  std::vector<float> keys_;    // [kKeyChunk, run, head_dim], f32 (BF16 rows widened)
  std::vector<float> values_;  // [kKeyChunk, run, head_dim]
};

// One chunk of positions for a run of kv heads: where their key and value rows live in the cache
// (page-table lookups done once per chunk). `padded` rounds `size` up to whole scoring steps.
struct KeyChunk {
  int32_t begin = 0;  // first position
  int32_t size = 0;   // positions in the chunk, ≤ kKeyChunk
  int32_t padded = 0;
  // Element offset of each position's K (and V) row of the run's first kv head in the layer; the
  // run's other heads follow it.
  int64_t offset[kKeyChunk] = {};
};

// Slots of one item, over all the kv heads of its run, beyond which a run is split: keeps the
// per-thread buffers small (a verification tile of 16 rows for 8 kv heads with 2 query heads
// each is 256; a 128-row prefill tile goes one kv head at a time).
constexpr int32_t kMaxRunSlots = 256;

// kv heads per item: the whole row of a position where the items still keep every thread busy
// and the buffers small, else the largest divisor of kv_heads that does.
int32_t KvRunLength(const AttentionParams& p, int32_t tile_rows, int64_t tiles) {
  const int32_t group = p.heads / p.kv_heads;
  const int64_t threads = omp_get_max_threads();
  for (int32_t run = p.kv_heads; run > 1; --run) {
    if (p.kv_heads % run != 0) continue;
    const bool busy = tiles * (p.kv_heads / run) >= threads;
    if (busy && run * group * tile_rows <= kMaxRunSlots) return run;
  }
  return 1;
}

std::vector<WorkItem> MakeWorkItems(const AttentionParams& p, int32_t tile_rows, int32_t run) {
  std::vector<WorkItem> items;
  for (int32_t s = 0; s < p.num_spans; ++s) {
    const StepSpan& span = p.spans[s];
    DSCALE_CHECK(span.q_len >= 0 && span.ctx_len >= 0 && span.q_start >= 0);
    DSCALE_CHECK(span.q_len == 0 || span.page_table != nullptr);
    for (int32_t begin = 0; begin < span.q_len; begin += tile_rows) {
      const int32_t end = std::min(span.q_len, begin + tile_rows);
      for (int32_t kv = 0; kv < p.kv_heads; kv += run)
        items.push_back({s, kv, kv + run, begin, end});
    }
  }
  return items;
}

// Query tiles of the batch (items per run of kv heads).
int64_t CountTiles(const AttentionParams& p, int32_t tile_rows) {
  int64_t tiles = 0;
  for (int32_t s = 0; s < p.num_spans; ++s) tiles += (p.spans[s].q_len + tile_rows - 1) / tile_rows;
  return tiles;
}

// Exclusive end of the positions that span-local row `row` sees. Also applied to the padding
// rows past the tile's live rows: they see at least as much as the last live row, which keeps
// their (discarded) softmax state finite.
int32_t VisibleEnd(const AttentionParams& p, const StepSpan& span, int32_t row) {
  return p.causal ? span.ctx_len + row + 1 : span.ctx_len + span.q_len;
}

float* QtBlock(const HeadScratch& s, int32_t t0, int32_t hd) {
  return s.qt + static_cast<int64_t>(t0) * hd;
}
float* ScoresBlock(const HeadScratch& s, int32_t t0) { return s.scores + t0 * kKeyChunk; }

// Fills qt with the scaled, transposed queries of every slot (zero for padding slots) and
// resets the running softmax state and the accumulators.
void LoadTile(const AttentionParams& p, const StepSpan& span, const WorkItem& item, int32_t kv_head,
              const HeadScratch& s) {
  const int32_t hd = p.head_dim;
  const int32_t group = p.heads / p.kv_heads;
  const int32_t padded = item.padded_slots(group);
  for (int32_t t = 0; t < padded; ++t) {
    float* dst = QtBlock(s, t - t % kRowBlock, hd) + t % kRowBlock;
    if (t < item.slots(group)) {
      const int32_t head = kv_head * group + t / item.live();
      const float* src = p.q + (span.q_start + item.row_begin + t % item.live()) * p.q_row_stride +
                         static_cast<int64_t>(head) * hd;
      for (int32_t d = 0; d < hd; ++d) dst[d * kRowBlock] = src[d] * p.scale;
    } else {
      for (int32_t d = 0; d < hd; ++d) dst[d * kRowBlock] = 0.0f;
    }
  }
  std::fill_n(s.row_max, padded, kNegInf);
  std::fill_n(s.row_sum, padded, 0.0f);
  std::fill_n(s.acc, static_cast<size_t>(padded) * hd, 0.0f);
}

void GatherKeyChunk(const AttentionParams& p, const StepSpan& span, int32_t kv_head, int32_t begin,
                    int32_t end, KeyChunk& chunk) {
  const int32_t page_size = p.kv.page_size;
  chunk.begin = begin;
  chunk.size = end - begin;
  chunk.padded = (chunk.size + kKeysPerStep - 1) / kKeysPerStep * kKeysPerStep;
  // Walk the pages rather than divide per position.
  int32_t page = begin / page_size;
  int32_t in_page = begin % page_size;
  for (int32_t c = 0; c < chunk.size; ++c) {
    const int64_t slot = static_cast<int64_t>(span.page_table[page]) * page_size + in_page;
    chunk.offset[c] = (slot * p.kv_heads + kv_head) * p.head_dim;
    if (++in_page == page_size) {
      in_page = 0;
      ++page;
    }
  }
}

// Copies the chunk's rows into the scratch's keys / values as f32 (BF16 rows widened by `widen`
// on the way), each position's rows of the whole run in one piece; key rows from chunk.size up
// to chunk.padded are zero (their scores are masked out). Read in place, one head's rows of a
// chunk would sit kv_heads·head_dim elements apart — a multiple of 4 KiB at Qwen3 sizes — and
// map to the same few L1 sets, evicting themselves before the next slot comes back to them.
void CopyChunk(const PagedKvLayer& kv, const KeyChunk& chunk, int32_t hd, int32_t run,
               WidenBf16Fn widen, TileScratch& s) {
  const int64_t row = static_cast<int64_t>(run) * hd;
  for (int32_t c = 0; c < chunk.size; ++c) {
    float* key = s.keys() + c * row;
    float* value = s.values() + c * row;
    if (kv.bf16()) {
      widen(kv.k_bf16 + chunk.offset[c], row, key);
      widen(kv.v_bf16 + chunk.offset[c], row, value);
    } else {
      std::copy_n(kv.k + chunk.offset[c], row, key);
      std::copy_n(kv.v + chunk.offset[c], row, value);
    }
  }
  std::fill(s.keys() + chunk.size * row, s.keys() + chunk.padded * row, 0.0f);
}

// scores[c, i] = q_i · k_c for the first kVectors·kLanes slots of one block (qt: [hd,
// kRowBlock]) and keys c0 .. c0 + kKeys − 1 of kc (key c at kc + c·stride). Each score is one
// accumulator lane summed over d in order, whatever kVectors and kKeys are, so every tile shape
// gives a row the same bits. kStride, when not 0, is `stride` known at compile time: the kKeys
// key offsets then become address displacements, where a run-time stride left GCC short of
// registers and it reloaded every offset from the stack for each d.
template <int kVectors, int kKeys, int64_t kStride>
void ScoreKeys(const float* qt, const float* kc, int64_t stride, int32_t c0, int32_t hd,
               float* scores) {
  if constexpr (kStride != 0) stride = kStride;
  Floats acc[kKeys][kVectors] = {};
  const float* key = kc + c0 * stride;
  for (int32_t d = 0; d < hd; ++d) {
    Floats q[kVectors];
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) q[v] = simd::Load(qt + d * kRowBlock + v * kLanes);
#pragma GCC unroll 8
    for (int k = 0; k < kKeys; ++k) {
      const Floats kd = simd::Splat(key[k * stride + d]);
#pragma GCC unroll 8
      for (int v = 0; v < kVectors; ++v) acc[k][v] += kd * q[v];
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < kKeys; ++k) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) {
      simd::Store(scores + (c0 + k) * kRowBlock + v * kLanes, acc[k][v]);
    }
  }
}

// All `keys` (a multiple of kKeysPerStep) for one block. A block whose live slots fit one vector
// (a decode row of a small GQA group) scores one vector, twice as many keys at a time, so that
// it still runs eight independent accumulator chains.
template <int kVectors, int64_t kStride>
void ScoreRowBlockStrided(const float* qt, const float* kc, int64_t stride, int32_t keys,
                          int32_t hd, float* scores) {
  constexpr int kWide = kKeysPerStep * kRowVectors / kVectors;
  int32_t c0 = 0;
  for (; c0 + kWide <= keys; c0 += kWide) {
    ScoreKeys<kVectors, kWide, kStride>(qt, kc, stride, c0, hd, scores);
  }
  for (; c0 < keys; c0 += kKeysPerStep) {
    ScoreKeys<kVectors, kKeysPerStep, kStride>(qt, kc, stride, c0, hd, scores);
  }
}

// The key row strides of Qwen3's head_dim 128 for runs of 1, 2, 4 and 8 kv heads are compiled
// as constants; any other stride takes the run-time form (same arithmetic, same bits).
template <int kVectors>
void ScoreRowBlock(const float* qt, const float* kc, int64_t stride, int32_t keys, int32_t hd,
                   float* scores) {
  switch (stride) {
    case 128:
      return ScoreRowBlockStrided<kVectors, 128>(qt, kc, stride, keys, hd, scores);
    case 256:
      return ScoreRowBlockStrided<kVectors, 256>(qt, kc, stride, keys, hd, scores);
    case 512:
      return ScoreRowBlockStrided<kVectors, 512>(qt, kc, stride, keys, hd, scores);
    case 1024:
      return ScoreRowBlockStrided<kVectors, 1024>(qt, kc, stride, keys, hd, scores);
    default:
      return ScoreRowBlockStrided<kVectors, 0>(qt, kc, stride, keys, hd, scores);
  }
}

// Online-softmax bookkeeping for the kLanes slots t0 .. t0 + kLanes − 1 (`scores` points at
// their lanes of the block) over one chunk:
//   m' = max(m, max_c s_c),  rescale = e^(m − m'),  l' = l·rescale + Σ_c e^(s_c − m'),
// turning the chunk's scores into e^(s_c − m') in place. Scores a row may not see become −inf
// first, hence probability 0. After the first chunk every slot has a finite maximum (each row
// sees position 0), so m − m' is never −inf − (−inf).
void SoftmaxStep(const AttentionParams& p, const StepSpan& span, const WorkItem& item,
                 const KeyChunk& chunk, int32_t t0, float* scores, const HeadScratch& s) {
  constexpr int64_t stride = kRowBlock;
  const int32_t group = p.heads / p.kv_heads;
  simd::Ints visible;  // positions of this chunk that each lane's row may see
  for (int i = 0; i < kLanes; ++i) {
    visible[i] = VisibleEnd(p, span, item.row_begin + item.row_of(t0 + i, group)) - chunk.begin;
  }
  const Floats old_max = simd::Load(s.row_max + t0);
  Floats new_max = old_max;
  for (int32_t c = 0; c < chunk.padded; ++c) {
    const Floats masked = c < visible ? simd::Load(scores + c * stride) : simd::Splat(kNegInf);
    simd::Store(scores + c * stride, masked);
    new_max = simd::Max(new_max, masked);
  }
  Floats sum{};
  for (int32_t c = 0; c < chunk.padded; ++c) {
    const Floats prob = simd::ExpNonPositive(simd::Load(scores + c * stride) - new_max);
    simd::Store(scores + c * stride, prob);
    sum += prob;
  }
  const Floats rescale = simd::ExpNonPositive(old_max - new_max);
  simd::Store(s.rescale + t0, rescale);
  simd::Store(s.row_max + t0, new_max);
  simd::Store(s.row_sum + t0, simd::Load(s.row_sum + t0) * rescale + sum);
}

// acc[d0, d0 + kVectors·kLanes) = acc·rescale + Σ_{c < valid} prob[c·stride] · v_c over that
// column block of the value rows vc (value c at vc + c·v_stride); the block's partial sums stay
// in registers across all the chunk's keys.
template <int kVectors>
void AccumulateBlock(const float* vc, int64_t v_stride, const float* prob, int64_t stride,
                     int32_t valid, float rescale, int32_t d0, float* acc) {
  Floats block[kVectors];
#pragma GCC unroll 8
  for (int i = 0; i < kVectors; ++i) block[i] = simd::Load(acc + d0 + i * kLanes) * rescale;
  for (int32_t c = 0; c < valid; ++c) {
    const Floats pc = simd::Splat(prob[c * stride]);
    const float* v = vc + c * v_stride + d0;
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) block[i] += pc * simd::Load(v + i * kLanes);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kVectors; ++i) simd::Store(acc + d0 + i * kLanes, block[i]);
}

// One slot's value pass: wide column blocks first, then narrower ones, then scalar leftovers
// for a head_dim that is not a multiple of the vector width.
void AccumulateSlot(const float* vc, int64_t v_stride, int32_t hd, const float* prob,
                    int64_t stride, int32_t valid, float rescale, float* acc) {
  int32_t d0 = 0;
  for (; d0 + 8 * kLanes <= hd; d0 += 8 * kLanes) {
    AccumulateBlock<8>(vc, v_stride, prob, stride, valid, rescale, d0, acc);
  }
  for (; d0 + 2 * kLanes <= hd; d0 += 2 * kLanes) {
    AccumulateBlock<2>(vc, v_stride, prob, stride, valid, rescale, d0, acc);
  }
  for (; d0 + kLanes <= hd; d0 += kLanes) {
    AccumulateBlock<1>(vc, v_stride, prob, stride, valid, rescale, d0, acc);
  }
  for (int32_t d = d0; d < hd; ++d) {
    float sum = acc[d] * rescale;
    for (int32_t c = 0; c < valid; ++c) sum += prob[c * stride] * vc[c * v_stride + d];
    acc[d] = sum;
  }
}

// The value pass of kSlots consecutive slots of a block together, over the first `common` keys
// (which every one of them sees), for the column block [d0, d0 + kVectors·kLanes): each value
// vector loaded serves kSlots slots, where one slot at a time loads a vector per FMA. Every
// accumulator still sums its keys in order, so the bits are the one-slot pass's.
template <int kSlots, int kVectors>
void AccumulateSlotGroupBlock(const float* vc, int64_t v_stride, const float* prob, int64_t stride,
                              int32_t common, const float* rescale, int32_t hd, int32_t d0,
                              float* acc) {
  Floats block[kSlots][kVectors];
#pragma GCC unroll 8
  for (int s = 0; s < kSlots; ++s) {
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) {
      block[s][i] = simd::Load(acc + s * hd + d0 + i * kLanes) * rescale[s];
    }
  }
  for (int32_t c = 0; c < common; ++c) {
    const float* v = vc + c * v_stride + d0;
    Floats vv[kVectors];
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) vv[i] = simd::Load(v + i * kLanes);
#pragma GCC unroll 8
    for (int s = 0; s < kSlots; ++s) {
      const Floats pc = simd::Splat(prob[c * stride + s]);
#pragma GCC unroll 8
      for (int i = 0; i < kVectors; ++i) block[s][i] += pc * vv[i];
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < kSlots; ++s) {
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) simd::Store(acc + s * hd + d0 + i * kLanes, block[s][i]);
  }
}

// Value vectors per column block of a slot group: 4 × 4 accumulators fit AVX-512's 32
// registers with the loaded values, 4 × 2 AVX2's 16.
constexpr int kGroupVectors = kLanes == 16 ? 4 : 2;

// The value pass of slots t0 + i .. t0 + i + kSlots − 1 of one block: the keys all of them see
// together (AccumulateSlotGroupBlock), then each slot's further keys alone. Needs head_dim a
// multiple of kGroupVectors·kLanes.
template <int kSlots>
void AccumulateSlotGroup(const float* values, int64_t kv_stride, int32_t hd, const float* scores,
                         const int32_t* valid, const float* rescale, float* acc) {
  const int32_t common = *std::min_element(valid, valid + kSlots);
  for (int32_t d0 = 0; d0 < hd; d0 += kGroupVectors * kLanes) {
    AccumulateSlotGroupBlock<kSlots, kGroupVectors>(values, kv_stride, scores, kRowBlock, common,
                                                    rescale, hd, d0, acc);
  }
  for (int s = 0; s < kSlots; ++s) {
    if (valid[s] == common) continue;
    // The rescale was applied above; × 1 is exact.
    AccumulateSlot(values + common * kv_stride, kv_stride, hd, scores + s + common * kRowBlock,
                   kRowBlock, valid[s] - common, 1.0f, acc + static_cast<int64_t>(s) * hd);
  }
}

// Folds one chunk (already in scratch: this kv head's key c at keys + c·kv_stride, likewise its
// values) into every slot of the head, a row block at a time: scores, softmax bookkeeping, then
// the value pass for the block's live slots. Lanes past the live slots of a block's first vector
// are neither scored nor kept when the block has no more than kLanes.
void ProcessChunk(const AttentionParams& p, const StepSpan& span, const WorkItem& item,
                  const KeyChunk& chunk, const float* keys, const float* values, int64_t kv_stride,
                  const HeadScratch& s) {
  const int32_t hd = p.head_dim;
  const int32_t group = p.heads / p.kv_heads;
  const int32_t slots = item.slots(group);
  for (int32_t t0 = 0; t0 < slots; t0 += kRowBlock) {
    const int32_t live = std::min(kRowBlock, slots - t0);
    const int32_t lanes = live <= kLanes ? kLanes : kRowBlock;
    float* scores = ScoresBlock(s, t0);
    if (lanes == kLanes) {
      ScoreRowBlock<1>(QtBlock(s, t0, hd), keys, kv_stride, chunk.padded, hd, scores);
    } else {
      ScoreRowBlock<kRowVectors>(QtBlock(s, t0, hd), keys, kv_stride, chunk.padded, hd, scores);
    }
    for (int32_t i = 0; i < lanes; i += kLanes) {
      SoftmaxStep(p, span, item, chunk, t0 + i, scores + i, s);
    }
    int32_t valid[kRowBlock];  // keys of the chunk each live slot of the block sees
    for (int32_t i = 0; i < live; ++i) {
      const int32_t row = item.row_of(t0 + i, group);
      const int32_t visible = VisibleEnd(p, span, item.row_begin + row) - chunk.begin;
      valid[i] = std::clamp(visible, 0, chunk.size);
    }
    const auto acc_of = [&](int32_t i) { return s.acc + static_cast<int64_t>(t0 + i) * hd; };
    int32_t i = 0;
    if (hd % (kGroupVectors * kLanes) == 0) {
      for (; i + 4 <= live; i += 4) {
        AccumulateSlotGroup<4>(values, kv_stride, hd, scores + i, valid + i, s.rescale + t0 + i,
                               acc_of(i));
      }
      for (; i + 2 <= live; i += 2) {
        AccumulateSlotGroup<2>(values, kv_stride, hd, scores + i, valid + i, s.rescale + t0 + i,
                               acc_of(i));
      }
    }
    for (; i < live; ++i) {
      AccumulateSlot(values, kv_stride, hd, scores + i, kRowBlock, valid[i], s.rescale[t0 + i],
                     acc_of(i));
    }
  }
}

// out = acc / l for every live slot of one kv head.
void StoreTile(const AttentionParams& p, const StepSpan& span, const WorkItem& item,
               int32_t kv_head, const HeadScratch& s) {
  const int32_t hd = p.head_dim;
  const int32_t group = p.heads / p.kv_heads;
  const int64_t out_stride = static_cast<int64_t>(p.heads) * hd;
  for (int32_t g = 0; g < group; ++g) {
    const int32_t head = kv_head * group + g;
    for (int32_t r = 0; r < item.live(); ++r) {
      const int32_t t = g * item.live() + r;
      float* dst = p.out + (span.q_start + item.row_begin + r) * out_stride +
                   static_cast<int64_t>(head) * hd;
      const float* acc = s.acc + static_cast<int64_t>(t) * hd;
      const float inv = 1.0f / s.row_sum[t];
#pragma omp simd
      for (int32_t d = 0; d < hd; ++d) dst[d] = acc[d] * inv;
    }
  }
}

void RunTile(const AttentionParams& p, const WorkItem& item, WidenBf16Fn widen, TileScratch& s) {
  const StepSpan& span = p.spans[item.span];
  for (int32_t j = 0; j < item.run(); ++j) LoadTile(p, span, item, item.kv_begin + j, s.head(j));
  // Every row of a span sees at least its own position, so each live row gets ≥ 1 key.
  const int32_t key_end = VisibleEnd(p, span, item.row_end - 1);
  const int64_t kv_stride = static_cast<int64_t>(item.run()) * p.head_dim;
  KeyChunk chunk;
  for (int32_t begin = 0; begin < key_end; begin += kKeyChunk) {
    GatherKeyChunk(p, span, item.kv_begin, begin, std::min(key_end, begin + kKeyChunk), chunk);
    CopyChunk(p.kv, chunk, p.head_dim, item.run(), widen, s);
    for (int32_t j = 0; j < item.run(); ++j) {
      const int64_t at = static_cast<int64_t>(j) * p.head_dim;
      ProcessChunk(p, span, item, chunk, s.keys() + at, s.values() + at, kv_stride, s.head(j));
    }
  }
  for (int32_t j = 0; j < item.run(); ++j) StoreTile(p, span, item, item.kv_begin + j, s.head(j));
}

// Multiply-adds of QKᵀ and PV over the whole batch: below kParallelMinWork a thread team costs
// more than it saves (tiny models, single-token decode steps).
int64_t AttentionWork(const AttentionParams& p) {
  int64_t work = 0;
  for (int32_t i = 0; i < p.num_spans; ++i) {
    const StepSpan& span = p.spans[i];
    work += int64_t{span.q_len} * (span.ctx_len + span.q_len);
  }
  return 2 * work * p.heads * p.head_dim;
}
constexpr int64_t kParallelMinWork = int64_t{1} << 20;
}  // namespace

// The kernel at tile height kTileRows over validated params; BF16 K/V rows widened by `widen`.
template <int kTileRows>
void RunAttentionTiles(const AttentionParams& params, WidenBf16Fn widen) {
  static_assert(kTileRows % kRowBlock == 0, "tiles are whole row blocks");
  const int32_t run = KvRunLength(params, kTileRows, CountTiles(params, kTileRows));
  const std::vector<WorkItem> items = MakeWorkItems(params, kTileRows, run);
  const auto num_items = static_cast<int64_t>(items.size());
  const int32_t capacity = params.heads / params.kv_heads * kTileRows;
  const bool parallel = num_items > 1 && AttentionWork(params) >= kParallelMinWork;
#pragma omp parallel if (parallel)
  {
    TileScratch scratch(capacity, params.head_dim, run);
#pragma omp for schedule(dynamic)
    for (int64_t i = 0; i < num_items; ++i) RunTile(params, items[i], widen, scratch);
  }
}

// RunAttentionTiles at a run-time tile height, one of kAttentionTileHeights (CHECKed).
inline void RunAttentionTiles(const AttentionParams& params, int tile_rows, WidenBf16Fn widen) {
  switch (tile_rows) {
    case 16:
      return RunAttentionTiles<16>(params, widen);
    case 64:
      return RunAttentionTiles<64>(params, widen);
    case 128:
      return RunAttentionTiles<128>(params, widen);
    default:
      DSCALE_CHECK_MSG(false, "attention tile height is not one of kAttentionTileHeights");
  }
}

}  // namespace dscale::cpu::DSCALE_ATTENTION_VARIANT
