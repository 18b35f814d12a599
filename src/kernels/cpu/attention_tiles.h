#pragma once
// The CPU attention kernel's tiles (module-private), compiled once per vector width: attention.cc
// includes this file with the build's vectors (simd.h: 8 lanes under the Release flags, 4 in
// sanitizer and debug builds) and attention_avx512.cc with 16-lane AVX-512 vectors. The
// including file names its copy's namespace with DSCALE_ATTENTION_VARIANT. Each lane's arithmetic
// is the same in every width (a score summed over head_dim in order, the softmax and the value
// pass per lane), so the copies give the same bits.

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
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
// of kv_heads·head_dim. Per kv head, the query rows are "slots", stacked head after head with no
// gaps and handled in blocks of kRowBlock (a block may hold rows of two heads):
//   slot t = g·live + r        g: head within the group, r: row within the tile, live: the
//                              tile's rows; slots past group·live (to whole blocks) are padding
//   qs      [slots, head_dim]               scaled query rows
//   scores  [blocks, kKeyChunk, kRowBlock]  one chunk's scores, then its probabilities
//   acc     [slots, head_dim]               unnormalised Σ p·v per slot
// A score is a dot product along head_dim in a fixed order (DotBlock): 16 partial sums, partial
// j over d ≡ j (mod 16) in order of d, then a fixed pairwise tree. Every vector width and every
// tile shape computes it the same way, so a row's bits depend neither on the CPU's vectors nor on
// the rows it shares a step with. The online-softmax bookkeeping runs across slots in vector
// lanes; the value pass runs along head_dim.
// Items of few slots (decode rows) read K and V straight from the cache (BF16 widened in
// registers); larger items first copy each chunk's rows, widened, into scratch
//   keys, values [kKeyChunk, run, head_dim]
// so that every slot group reuses them from L1/L2.

namespace dscale::cpu::DSCALE_ATTENTION_VARIANT {
namespace {

using simd::Floats;
using simd::kLanes;

// Positions per chunk of the online softmax: the chunk's key and value rows (2 · 32 · head_dim
// floats, 32 KiB at head_dim 128) are copied once and stay in L1/L2 for every slot.
constexpr int kKeyChunk = 32;
// Slots whose softmax bookkeeping runs together (one AVX-512 vector, two AVX ones).
constexpr int kRowBlock = 16;
static_assert(kRowBlock % kLanes == 0);
// Partial sums of a score: a whole AVX-512 vector along head_dim; narrower vectors hold them in
// kDotVectors registers.
constexpr int kDotPartials = 16;
constexpr int kDotVectors = kDotPartials / kLanes;
// (slot, key) pairs a DotBlock scores at once: 16 accumulators, in AVX-512's 32 registers with
// the loaded rows; 4 pairs (8 or 16 registers) in narrower vectors.
constexpr int kDotPairs = kLanes == 16 ? 16 : 4;
static_assert(kKeyChunk % kDotPairs == 0);
// Items of at most this many slots per kv head read K/V in place (one slot group per key row).
constexpr int32_t kInPlaceMaxSlots = 4;
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
  // Scaled queries: rows [slots, head_dim] where K/V are read in place (DotBlock), else
  // transposed per block [blocks, PaddedHeadDim, kRowBlock], zero past head_dim and for padding
  // slots (ScoreKeysInLanes).
  float* qs;
  float* scores;
  float* acc;
  float* row_max;  // running maximum score per slot
  float* row_sum;  // running Σ e^(score − row_max) per slot
  float* rescale;  // e^(old max − new max) for the current chunk, per slot
};

// head_dim rounded up to whole groups of kDotPartials (the transposed queries' rows).
constexpr int64_t PaddedHeadDim(int64_t hd) {
  return (hd + kDotPartials - 1) / kDotPartials * kDotPartials;
}
// Floats per slot of a head's buffers: queries, accumulators, scores, softmax state.
constexpr int64_t PerSlot(int64_t hd) { return PaddedHeadDim(hd) + hd + kKeyChunk + 3; }

// Per-thread buffers, allocated once per call and reused across work items: `capacity` slots for
// each of up to `run` kv heads, and one chunk of K/V rows for the run.
class TileScratch {
 public:
  TileScratch(int32_t capacity, int32_t head_dim, int32_t run)
      : capacity_(capacity),
        head_dim_(head_dim),
        per_slot_(static_cast<size_t>(run) * capacity * PerSlot(head_dim)),
        keys_(static_cast<size_t>(kKeyChunk) * run * head_dim),
        values_(keys_.size()) {}

  HeadScratch head(int32_t j) {
    const int64_t cap = capacity_;
    float* base = per_slot_.data() + j * cap * PerSlot(head_dim_);
    HeadScratch h;
    h.qs = base;
    h.acc = h.qs + cap * PaddedHeadDim(head_dim_);
    h.scores = h.acc + cap * head_dim_;
    h.row_max = h.scores + cap * kKeyChunk;
    h.row_sum = h.row_max + cap;
    h.rescale = h.row_sum + cap;
    return h;
  }
  // The current chunk's copied rows (large items only).
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
// (page-table lookups done once per chunk). Offsets past `size` are left from earlier chunks (or
// 0): rows there may be read but their scores are always masked.
struct KeyChunk {
  int32_t begin = 0;  // first position
  int32_t size = 0;   // positions in the chunk, ≤ kKeyChunk
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
  if (p.causal) return span.ctx_len + row + 1;
  const int32_t end = span.ctx_len + span.q_len;
  return p.window > 0 ? std::min(end, span.ctx_len + row + p.window) : end;
}

// First position that span-local row `row` sees: 0 but under a sliding window.
int32_t VisibleBegin(const AttentionParams& p, const StepSpan& span, int32_t row) {
  return p.window > 0 ? std::max(0, span.ctx_len + row - p.window + 1) : 0;
}

float* ScoresBlock(const HeadScratch& s, int32_t t0) { return s.scores + t0 * kKeyChunk; }

// Fills qs with the scaled queries of the live slots (as rows, or transposed: see HeadScratch)
// and resets the running softmax state and the accumulators of every slot.
void LoadTile(const AttentionParams& p, const StepSpan& span, const WorkItem& item, int32_t kv_head,
              bool transposed, const HeadScratch& s) {
  const int32_t hd = p.head_dim;
  const int64_t hd_pad = PaddedHeadDim(hd);
  const int32_t group = p.heads / p.kv_heads;
  const int32_t padded = item.padded_slots(group);
  if (transposed) std::fill_n(s.qs, padded * hd_pad, 0.0f);
  for (int32_t t = 0; t < item.slots(group); ++t) {
    const int32_t head = kv_head * group + t / item.live();
    const float* src = p.q + (span.q_start + item.row_begin + t % item.live()) * p.q_row_stride +
                       static_cast<int64_t>(head) * hd;
    if (transposed) {
      float* dst = s.qs + (t - t % kRowBlock) * hd_pad + t % kRowBlock;
      for (int32_t d = 0; d < hd; ++d) dst[d * kRowBlock] = src[d] * p.scale;
    } else {
      float* dst = s.qs + static_cast<int64_t>(t) * hd;
      for (int32_t d = 0; d < hd; ++d) dst[d] = src[d] * p.scale;
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

// kLanes values from p on as f32: loaded, or BF16 bits widened (exactly) in registers.
using Halves = uint16_t __attribute__((vector_size(kLanes * sizeof(uint16_t))));
inline Floats LoadRow(const float* p) { return simd::Load(p); }
inline Floats LoadRow(const uint16_t* p) {
  Halves bits;
  std::memcpy(&bits, p, sizeof(bits));
  const simd::Ints wide = __builtin_convertvector(bits, simd::Ints) << 16;
  Floats f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}
inline float LoadScalar(const float* p) { return *p; }
inline float LoadScalar(const uint16_t* p) {
  const uint32_t wide = uint32_t{*p} << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

// One kv head's key or value rows of a chunk, row c at Row(c) (f32 or BF16 elements):
// copied into scratch (row c at base + c·stride) or read in the cache (at base + offset[c]).
struct ScratchRows {
  const float* base;
  int64_t stride;
  const float* Row(int32_t c) const { return base + c * stride; }
};
template <typename T>
struct CacheRows {
  const T* base;  // the layer's rows, plus the kv head's offset within a position
  const int64_t* offset;
  const T* Row(int32_t c) const { return base + offset[c]; }
};

// Lane i of the result: lane w of segment `seg` of x (segments 0 .. n−1) or of y (n .. 2n−1),
// where segments of kSeg lanes are halved: the low half (kHigh false) or the high half.
constexpr int HalvingLane(int seg_size, bool high, int i) {
  const int half = seg_size / 2;
  const int segments = kLanes / seg_size;
  const int seg = i / half;
  const int w = i % half + (high ? half : 0);
  return seg < segments ? seg * seg_size + w : kLanes + (seg - segments) * seg_size + w;
}
template <int kSeg, bool kHigh, size_t... I>
[[gnu::always_inline]] inline Floats HalfLanes(Floats x, Floats y, std::index_sequence<I...>) {
  return __builtin_shufflevector(x, y, HalvingLane(kSeg, kHigh, static_cast<int>(I))...);
}

// v[0 .. kCount): vectors of segments of kSeg partial sums, one segment per (slot, key) pair, the
// pairs in order. Each level adds every segment's high half to its low half (partial j + partial
// j + kSeg/2) and packs two vectors' halved segments into one, so lane i of the result is the
// tree sum of pair i (i < pairs).
template <int kSeg, int kCount>
[[gnu::always_inline]] inline Floats ReduceSegments(Floats* v) {
  if constexpr (kSeg == 1) {
    return v[0];
  } else {
    constexpr auto lanes = std::make_index_sequence<kLanes>();
    constexpr int next = kCount > 1 ? kCount / 2 : 1;
    for (int i = 0; i < next; ++i) {
      const Floats x = v[2 * i];
      const Floats y = kCount > 1 ? v[2 * i + 1] : x;
      v[i] = HalfLanes<kSeg, false>(x, y, lanes) + HalfLanes<kSeg, true>(x, y, lanes);
    }
    return ReduceSegments<kSeg / 2, next>(v);
  }
}

// scores[k·kRowBlock + s] = q_s · key_k for kS slots (query rows at q + s·hd) and the kK keys
// rows.Row(c0 + k): partial j sums d ≡ j (mod 16) in order of d, the partials are then added as
// a fixed tree ((j, j+8), then (j, j+4), (j, j+2), (0, 1)). head_dim's last partial group, when
// it is not whole, runs on zero-padded copies.
template <int kS, int kK, class Rows>
void DotBlock(const float* q, int32_t hd, const Rows& rows, int32_t c0, float* scores) {
  static_assert(kS * kK <= kDotPairs && kDotPairs % (kS * kK) == 0);
  Floats acc[kK][kS][kDotVectors] = {};
  const auto step = [&](const float* const* qrow, const auto* const* krow, int32_t d) {
    Floats qv[kS][kDotVectors];
#pragma GCC unroll 16
    for (int s = 0; s < kS; ++s) {
#pragma GCC unroll 4
      for (int v = 0; v < kDotVectors; ++v) qv[s][v] = simd::Load(qrow[s] + d + v * kLanes);
    }
#pragma GCC unroll 16
    for (int k = 0; k < kK; ++k) {
#pragma GCC unroll 4
      for (int v = 0; v < kDotVectors; ++v) {
        const Floats kv = LoadRow(krow[k] + d + v * kLanes);
#pragma GCC unroll 16
        for (int s = 0; s < kS; ++s) acc[k][s][v] += kv * qv[s][v];
      }
    }
  };
  using Elem = std::remove_cv_t<std::remove_pointer_t<decltype(rows.Row(0))>>;
  const float* qrow[kS];
  const Elem* krow[kK];
  for (int s = 0; s < kS; ++s) qrow[s] = q + static_cast<int64_t>(s) * hd;
  for (int k = 0; k < kK; ++k) krow[k] = rows.Row(c0 + k);
  const int32_t whole = hd / kDotPartials * kDotPartials;
  for (int32_t d = 0; d < whole; d += kDotPartials) step(qrow, krow, d);
  if (whole < hd) {
    float qpad[kS][kDotPartials] = {};
    Elem kpad[kK][kDotPartials] = {};
    for (int s = 0; s < kS; ++s) {
      std::copy(qrow[s] + whole, qrow[s] + hd, qpad[s]);
      qrow[s] = qpad[s];
    }
    for (int k = 0; k < kK; ++k) {
      std::copy(krow[k] + whole, krow[k] + hd, kpad[k]);
      krow[k] = kpad[k];
    }
    step(qrow, krow, 0);
  }
  Floats pairs[kDotPairs];
#pragma GCC unroll 16
  for (int k = 0; k < kK; ++k) {
#pragma GCC unroll 16
    for (int s = 0; s < kS; ++s) {
      // Narrower vectors add their partial vectors first: the tree's first levels.
      Floats* part = acc[k][s];
#pragma GCC unroll 4
      for (int n = kDotVectors; n > 1; n /= 2) {
        for (int v = 0; v < n / 2; ++v) part[v] += part[v + n / 2];
      }
      pairs[k * kS + s] = part[0];
    }
  }
  const Floats sums = ReduceSegments<kLanes, kS * kK>(pairs);
#pragma GCC unroll 16
  for (int k = 0; k < kK; ++k) {
#pragma GCC unroll 16
    for (int s = 0; s < kS; ++s) scores[k * kRowBlock + s] = sums[k * kS + s];
  }
}

// kS slots' scores against keys 0 .. keys − 1 (and up to the next whole DotBlock: those rows
// exist but their scores are masked).
template <int kS, class Rows>
void ScoreSlots(const float* q, int32_t hd, const Rows& rows, int32_t keys, float* scores) {
  constexpr int kK = kDotPairs / kS;
  for (int32_t c0 = 0; c0 < keys; c0 += kK) {
    DotBlock<kS, kK>(q, hd, rows, c0, scores + c0 * kRowBlock);
  }
}

// Scores of the `live` slots of one block (query rows from q) for the chunk's keys; lanes from
// `live` to `lanes` (padding the softmax vectors) get 0.
template <class Rows>
void ScoreBlockAlongHeadDim(const float* q, int32_t hd, const Rows& rows, int32_t keys,
                            int32_t live, int32_t lanes, float* scores) {
  int32_t i = 0;
  for (; i + 4 <= live; i += 4) ScoreSlots<4>(q + int64_t{i} * hd, hd, rows, keys, scores + i);
  for (; i + 2 <= live; i += 2) ScoreSlots<2>(q + int64_t{i} * hd, hd, rows, keys, scores + i);
  for (; i < live; ++i) ScoreSlots<1>(q + int64_t{i} * hd, hd, rows, keys, scores + i);
  for (int32_t c = 0; c < keys; ++c)
    std::fill(scores + c * kRowBlock + live, scores + c * kRowBlock + lanes, 0.0f);
}

// Per key, kVectors vectors of per-slot sums (slots in lanes).
template <int kVectors, int kKeys>
using LaneSums = std::array<std::array<Floats, kVectors>, kKeys>;

template <int kVectors, int kKeys>
[[gnu::always_inline]] inline LaneSums<kVectors, kKeys> Add(LaneSums<kVectors, kKeys> a,
                                                            const LaneSums<kVectors, kKeys>& b) {
#pragma GCC unroll 8
  for (int k = 0; k < kKeys; ++k) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) a[k][v] += b[k][v];
  }
  return a;
}

// Group g's terms of the partials j and j + 8 for slots in lanes (see FirstLevel). kTail: the
// group may reach past head_dim, where DotBlock multiplies zero padding, adding +0; so here.
template <bool kTail, int kVectors, int kKeys>
[[gnu::always_inline]] inline void PartialPairStep(const float* qt, const float* const* key,
                                                   int32_t hd, int j, int32_t g,
                                                   LaneSums<kVectors, kKeys>& lo,
                                                   LaneSums<kVectors, kKeys>& hi) {
  const int32_t d = g * kDotPartials + j;
  const int32_t d8 = d + kDotPartials / 2;
  Floats q[kVectors], q8[kVectors];
#pragma GCC unroll 4
  for (int v = 0; v < kVectors; ++v) {
    q[v] = simd::Load(qt + d * kRowBlock + v * kLanes);
    q8[v] = simd::Load(qt + d8 * kRowBlock + v * kLanes);
  }
#pragma GCC unroll 8
  for (int k = 0; k < kKeys; ++k) {
    const Floats kd = simd::Splat(kTail && d >= hd ? 0.0f : key[k][d]);
    const Floats kd8 = simd::Splat(kTail && d8 >= hd ? 0.0f : key[k][d8]);
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      lo[k][v] += kd * q[v];
      hi[k][v] += kd8 * q8[v];
    }
  }
}

// The tree's first level for slots in lanes: a_j = p_j + p_(j+8) for kKeys keys (rows key[k])
// and kVectors vectors of slots (qt: a block's transposed queries, zero past head_dim), the two
// partials summed side by side (2·kKeys·kVectors independent chains).
template <int kVectors, int kKeys>
[[gnu::always_inline]] inline LaneSums<kVectors, kKeys> FirstLevel(const float* qt,
                                                                   const float* const* key,
                                                                   int32_t hd, int j) {
  LaneSums<kVectors, kKeys> lo{}, hi{};
  const int32_t whole = hd / kDotPartials;  // groups with no element past head_dim
  for (int32_t g = 0; g < whole; ++g)
    PartialPairStep<false, kVectors, kKeys>(qt, key, hd, j, g, lo, hi);
  if (whole * kDotPartials < hd)
    PartialPairStep<true, kVectors, kKeys>(qt, key, hd, j, whole, lo, hi);
  return Add<kVectors, kKeys>(lo, hi);
}

// The same scores with the slots in vector lanes, for copied chunks: scores[(c0 + k)·kRowBlock +
// lane] for kKeys keys (key k at keys + (c0 + k)·stride) and the first kVectors·kLanes slots of a
// block. Each lane sums DotBlock's 16 partials in the same order and adds them in its tree, so
// it gives DotBlock's bits; a partial pair is folded into the tree as soon as it is summed, so
// at most five values per key and vector are live.
template <int kVectors, int kKeys>
void ScoreKeysInLanes(const float* qt, const float* keys, int64_t stride, int32_t c0, int32_t hd,
                      float* scores) {
  const float* key[kKeys];
  for (int k = 0; k < kKeys; ++k) key[k] = keys + (c0 + k) * stride;
  constexpr auto a = FirstLevel<kVectors, kKeys>;
  constexpr auto add = Add<kVectors, kKeys>;
  // ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): b_j = a_j + a_(j+4), c_j = b_j + b_(j+2).
  const auto left =
      add(add(a(qt, key, hd, 0), a(qt, key, hd, 4)), add(a(qt, key, hd, 2), a(qt, key, hd, 6)));
  const auto right =
      add(add(a(qt, key, hd, 1), a(qt, key, hd, 5)), add(a(qt, key, hd, 3), a(qt, key, hd, 7)));
  const auto sum = add(left, right);
#pragma GCC unroll 8
  for (int k = 0; k < kKeys; ++k) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      simd::Store(scores + (c0 + k) * kRowBlock + v * kLanes, sum[k][v]);
    }
  }
}

// A copied chunk's scores (keys 0 .. keys − 1, and up to the next whole step: those rows exist
// but their scores are masked) for one block, kVectors vectors of slots wide.
template <int kVectors>
void ScoreBlockInLanes(const float* qt, const float* keys, int64_t stride, int32_t count,
                       int32_t hd, float* scores) {
  constexpr int kKeys = std::max(1, (kLanes == 16 ? 4 : 2) / kVectors);
  static_assert(kKeyChunk % kKeys == 0);
  for (int32_t c0 = 0; c0 < count; c0 += kKeys) {
    ScoreKeysInLanes<kVectors, kKeys>(qt, keys, stride, c0, hd, scores);
  }
}

// Copies the chunk's rows into the scratch's keys / values as f32 (BF16 rows widened by `widen`
// on the way), each position's rows of the whole run in one piece.
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
}

// Online-softmax bookkeeping for the kLanes slots t0 .. t0 + kLanes − 1 (`scores` points at
// their lanes of the block) over one chunk:
//   m' = max(m, max_c s_c),  rescale = e^(m − m'),  l' = l·rescale + Σ_c e^(s_c − m'),
// turning the chunk's scores into e^(s_c − m') in place. Scores a row may not see become −inf
// first, hence probability 0. Without a window every slot has a finite maximum after the first
// chunk (each row sees position 0); under one, a slot that has seen nothing yet keeps m' = −inf,
// and its exponents are taken against 0 instead (all of them e^−inf = 0, never −inf − (−inf)).
void SoftmaxStep(const AttentionParams& p, const StepSpan& span, const WorkItem& item,
                 const KeyChunk& chunk, int32_t t0, float* scores, const HeadScratch& s) {
  constexpr int64_t stride = kRowBlock;
  const int32_t group = p.heads / p.kv_heads;
  simd::Ints visible;  // positions of this chunk that each lane's row may see: [first, visible)
  simd::Ints first;
  for (int i = 0; i < kLanes; ++i) {
    const int32_t row = item.row_begin + item.row_of(t0 + i, group);
    visible[i] = VisibleEnd(p, span, row) - chunk.begin;
    first[i] = VisibleBegin(p, span, row) - chunk.begin;
  }
  const Floats old_max = simd::Load(s.row_max + t0);
  Floats new_max = old_max;
  for (int32_t c = 0; c < chunk.size; ++c) {
    const Floats masked =
        ((c < visible) & (c >= first)) ? simd::Load(scores + c * stride) : simd::Splat(kNegInf);
    simd::Store(scores + c * stride, masked);
    new_max = simd::Max(new_max, masked);
  }
  // A slot that has seen no position yet (only under a window): exponents against 0.
  const Floats base = p.window > 0 ? (new_max == kNegInf ? Floats{} : new_max) : new_max;
  Floats sum{};
  for (int32_t c = 0; c < chunk.size; ++c) {
    const Floats prob = simd::ExpNonPositive(simd::Load(scores + c * stride) - base);
    simd::Store(scores + c * stride, prob);
    sum += prob;
  }
  const Floats rescale = simd::ExpNonPositive(old_max - base);
  simd::Store(s.rescale + t0, rescale);
  simd::Store(s.row_max + t0, new_max);
  simd::Store(s.row_sum + t0, simd::Load(s.row_sum + t0) * rescale + sum);
}

// acc[d0, d0 + kVectors·kLanes) = acc·rescale + Σ_{c < valid} prob[c·stride] · v_{first + c} over
// that column block of the value rows; the block's partial sums stay in registers across all
// the chunk's keys.
template <int kVectors, class Rows>
void AccumulateBlock(const Rows& rows, int32_t first, const float* prob, int64_t stride,
                     int32_t valid, float rescale, int32_t d0, float* acc) {
  Floats block[kVectors];
#pragma GCC unroll 8
  for (int i = 0; i < kVectors; ++i) block[i] = simd::Load(acc + d0 + i * kLanes) * rescale;
  for (int32_t c = 0; c < valid; ++c) {
    const Floats pc = simd::Splat(prob[c * stride]);
    const auto* v = rows.Row(first + c) + d0;
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) block[i] += pc * LoadRow(v + i * kLanes);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kVectors; ++i) simd::Store(acc + d0 + i * kLanes, block[i]);
}

// One slot's value pass over keys first .. first + valid − 1: wide column blocks first, then
// narrower ones, then scalar leftovers for a head_dim that is not a multiple of the vector width.
template <class Rows>
void AccumulateSlot(const Rows& rows, int32_t first, int32_t hd, const float* prob, int64_t stride,
                    int32_t valid, float rescale, float* acc) {
  int32_t d0 = 0;
  for (; d0 + 8 * kLanes <= hd; d0 += 8 * kLanes) {
    AccumulateBlock<8>(rows, first, prob, stride, valid, rescale, d0, acc);
  }
  for (; d0 + 2 * kLanes <= hd; d0 += 2 * kLanes) {
    AccumulateBlock<2>(rows, first, prob, stride, valid, rescale, d0, acc);
  }
  for (; d0 + kLanes <= hd; d0 += kLanes) {
    AccumulateBlock<1>(rows, first, prob, stride, valid, rescale, d0, acc);
  }
  for (int32_t d = d0; d < hd; ++d) {
    float sum = acc[d] * rescale;
    for (int32_t c = 0; c < valid; ++c) {
      sum += prob[c * stride] * LoadScalar(rows.Row(first + c) + d);
    }
    acc[d] = sum;
  }
}

// The value pass of kSlots consecutive slots of a block together, over the first `common` keys
// (which every one of them sees), for the column block [d0, d0 + kVectors·kLanes): each value
// vector loaded serves kSlots slots, where one slot at a time loads a vector per FMA. Every
// accumulator still sums its keys in order, so the bits are the one-slot pass's.
template <int kSlots, int kVectors, class Rows>
void AccumulateSlotGroupBlock(const Rows& rows, const float* prob, int64_t stride, int32_t common,
                              const float* rescale, int32_t hd, int32_t d0, float* acc) {
  Floats block[kSlots][kVectors];
#pragma GCC unroll 8
  for (int s = 0; s < kSlots; ++s) {
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) {
      block[s][i] = simd::Load(acc + s * hd + d0 + i * kLanes) * rescale[s];
    }
  }
  for (int32_t c = 0; c < common; ++c) {
    const auto* v = rows.Row(c) + d0;
    Floats vv[kVectors];
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) vv[i] = LoadRow(v + i * kLanes);
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
template <int kSlots, class Rows>
void AccumulateSlotGroup(const Rows& rows, int32_t hd, const float* scores, const int32_t* valid,
                         const float* rescale, float* acc) {
  const int32_t common = *std::min_element(valid, valid + kSlots);
  for (int32_t d0 = 0; d0 < hd; d0 += kGroupVectors * kLanes) {
    AccumulateSlotGroupBlock<kSlots, kGroupVectors>(rows, scores, kRowBlock, common, rescale, hd,
                                                    d0, acc);
  }
  for (int s = 0; s < kSlots; ++s) {
    if (valid[s] == common) continue;
    // The rescale was applied above; × 1 is exact.
    AccumulateSlot(rows, common, hd, scores + s + common * kRowBlock, kRowBlock, valid[s] - common,
                   1.0f, acc + static_cast<int64_t>(s) * hd);
  }
}

// Folds one chunk (this kv head's key and value rows: key_rows.Row(c), value_rows.Row(c)) into
// every slot of the head, a row block at a time: scores, softmax bookkeeping, then the value pass
// for the block's live slots. Lanes past the live slots of a block's first vector are neither
// scored nor kept when the block has no more than kLanes.
template <class Rows>
void ProcessChunk(const AttentionParams& p, const StepSpan& span, const WorkItem& item,
                  const KeyChunk& chunk, const Rows& key_rows, const Rows& value_rows,
                  const HeadScratch& s) {
  const int32_t hd = p.head_dim;
  const int32_t group = p.heads / p.kv_heads;
  const int32_t slots = item.slots(group);
  for (int32_t t0 = 0; t0 < slots; t0 += kRowBlock) {
    const int32_t live = std::min(kRowBlock, slots - t0);
    const int32_t lanes = live <= kLanes ? kLanes : kRowBlock;
    float* scores = ScoresBlock(s, t0);
    if constexpr (std::is_same_v<Rows, ScratchRows>) {
      const float* qt = s.qs + t0 * PaddedHeadDim(hd);
      if (lanes == kLanes) {
        ScoreBlockInLanes<1>(qt, key_rows.base, key_rows.stride, chunk.size, hd, scores);
      } else {
        ScoreBlockInLanes<kRowBlock / kLanes>(qt, key_rows.base, key_rows.stride, chunk.size, hd,
                                              scores);
      }
    } else {
      ScoreBlockAlongHeadDim(s.qs + static_cast<int64_t>(t0) * hd, hd, key_rows, chunk.size, live,
                             lanes, scores);
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
        AccumulateSlotGroup<4>(value_rows, hd, scores + i, valid + i, s.rescale + t0 + i,
                               acc_of(i));
      }
      for (; i + 2 <= live; i += 2) {
        AccumulateSlotGroup<2>(value_rows, hd, scores + i, valid + i, s.rescale + t0 + i,
                               acc_of(i));
      }
    }
    for (; i < live; ++i) {
      AccumulateSlot(value_rows, 0, hd, scores + i, kRowBlock, valid[i], s.rescale[t0 + i],
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

// One chunk for every kv head of the item, its rows read in the cache at chunk.offset.
template <typename T>
void ProcessChunkInPlace(const AttentionParams& p, const StepSpan& span, const WorkItem& item,
                         const KeyChunk& chunk, const T* k, const T* v, TileScratch& s) {
  for (int32_t j = 0; j < item.run(); ++j) {
    const int64_t head = static_cast<int64_t>(j) * p.head_dim;
    ProcessChunk(p, span, item, chunk, CacheRows<T>{k + head, chunk.offset},
                 CacheRows<T>{v + head, chunk.offset}, s.head(j));
  }
}

void RunTile(const AttentionParams& p, const WorkItem& item, WidenBf16Fn widen, TileScratch& s) {
  const StepSpan& span = p.spans[item.span];
  const bool in_place = item.slots(p.heads / p.kv_heads) <= kInPlaceMaxSlots;
  for (int32_t j = 0; j < item.run(); ++j) {
    LoadTile(p, span, item, item.kv_begin + j, /*transposed=*/!in_place, s.head(j));
  }
  // Every row of a span sees at least its own position, so each live row gets ≥ 1 key.
  const int32_t key_end = VisibleEnd(p, span, item.row_end - 1);
  KeyChunk chunk;
  for (int32_t begin = 0; begin < key_end; begin += kKeyChunk) {
    GatherKeyChunk(p, span, item.kv_begin, begin, std::min(key_end, begin + kKeyChunk), chunk);
    if (in_place && p.kv.bf16()) {
      ProcessChunkInPlace(p, span, item, chunk, p.kv.k_bf16, p.kv.v_bf16, s);
    } else if (in_place) {
      ProcessChunkInPlace(p, span, item, chunk, p.kv.k, p.kv.v, s);
    } else {
      CopyChunk(p.kv, chunk, p.head_dim, item.run(), widen, s);
      const int64_t row = static_cast<int64_t>(item.run()) * p.head_dim;
      for (int32_t j = 0; j < item.run(); ++j) {
        const int64_t head = static_cast<int64_t>(j) * p.head_dim;
        ProcessChunk(p, span, item, chunk, ScratchRows{s.keys() + head, row},
                     ScratchRows{s.values() + head, row}, s.head(j));
      }
    }
  }
  for (int32_t j = 0; j < item.run(); ++j) StoreTile(p, span, item, item.kv_begin + j, s.head(j));
}

// Multiply-adds of QKᵀ and PV over the whole batch: below kParallelMinWork a thread team costs
// more than it saves (tiny models). A Qwen3-0.6B decode row passes it from about 16 positions
// (docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
int64_t AttentionWork(const AttentionParams& p) {
  int64_t work = 0;
  for (int32_t i = 0; i < p.num_spans; ++i) {
    const StepSpan& span = p.spans[i];
    work += int64_t{span.q_len} * (span.ctx_len + span.q_len);
  }
  return 2 * work * p.heads * p.head_dim;
}
constexpr int64_t kParallelMinWork = int64_t{1} << 16;
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
