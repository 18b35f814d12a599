// Sampled acceptance in three kernels and one sort (see sample_accept.h for the contract):
//   1. RowStatsKernel, one block per packed row: max logit, argmax, the softmax sum in double,
//      and for rows with a top-k / top-p filter each token's order key: the logit's
//      order-preserving bits above the complemented token id, so keys are distinct and a
//      descending sort gives the CPU's rank order (larger logit first, ties to the lower id)
//      without relying on the sort's stability;
//   2. cub::DeviceSegmentedRadixSort orders each filtered row's keys (descending); unfiltered
//      rows are empty segments, so temperature-only rows pay for no sort;
//   3. NucleusKernel, one block per filtered row: the kept set (top-k, then the top-p cut over
//      the rank-ordered masses) as the order key of its last member, and the kept mass;
//   4. DecideKernel, one block per request: the acceptance tests (thread 0, O(1) per draft from
//      the row statistics), then the inverse-CDF draw over the chosen row in token order.
//
// Why ranking by the f32 logit is the CPU's ranking by probability: P(v) = exp((l_v − max)/T)/Z
// never decreases as l_v grows, so the orders agree except where distinct logits give equal
// double probabilities — which takes an exp that underflows (to 0 or a subnormal) or logits
// closer than double resolution of (l − max)/T; the CPU breaks those ties by id, the sort by
// logit. Such tokens carry no mass (< 1e-300) or sit at the same probability, so the kept
// probabilities, and every decision from them, are the same.

#include <climits>
#include <cmath>
#include <cstdint>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "core/check.h"
#include "device_dvl/sample_accept.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;
// A scan gives each thread this many consecutive elements, which it adds in order (as the CPU
// does); the threads' partial sums are combined by a fixed-shape block scan.
constexpr int kItemsPerThread = 8;
constexpr int32_t kChunk = kThreads * kItemsPerThread;
constexpr size_t kWorkspaceAlignment = 256;

// What P_j needs besides the row's logits.
struct RowStats {
  double softmax_sum = 0;  // Σ_v exp((l_v − max)/T): the CPU's first normaliser (Z)
  double kept_mass = 1;    // Σ over the kept tokens of their exp/Z: the second (1 unfiltered)
  float max_logit = 0;
  int32_t argmax = 0;      // lowest id of the maximum (greedy requests)
  uint64_t last_kept = 0;  // order key of the last kept token (filtered rows)
  int32_t filtered = 0;    // 0: every token is kept
};

// The caller's workspace, carved into fixed sub-buffers.
struct Workspace {
  RowStats* stats = nullptr;         // [rows]
  int32_t* segment_begin = nullptr;  // [rows] sort segment of each row: [begin, end) of the
  int32_t* segment_end = nullptr;    // [rows] pair arrays, empty for unfiltered / idle rows
  uint64_t* keys[2] = {};            // [rows · vocab] order keys, double-buffered by the sort
  void* sort_temp = nullptr;
  size_t sort_temp_bytes = 0;
  size_t total_bytes = 0;
};

size_t AlignUp(size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// Bits of a token id in an order key: enough for vocab − 1.
int IdBits(int64_t vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

// Sorts (or, with temp == nullptr, sizes the scratch for sorting) the segments' order keys,
// descending, on the bits they use; `keys` ends on the buffer holding the result.
cudaError_t SortOrderKeys(void* temp, size_t& temp_bytes, cub::DoubleBuffer<uint64_t>& keys,
                          int64_t items, int64_t segments, const int32_t* begin, const int32_t* end,
                          int id_bits, cudaStream_t stream) {
  return cub::DeviceSegmentedRadixSort::SortKeysDescending(
      temp, temp_bytes, keys, static_cast<int>(items), static_cast<int>(segments), begin, end, 0,
      32 + id_bits, stream);
}

// CUB's scratch for sorting `items` keys in `segments` segments (a size query; queues nothing).
size_t SortTempBytes(int64_t items, int64_t segments, int id_bits) {
  size_t bytes = 0;
  cub::DoubleBuffer<uint64_t> keys(nullptr, nullptr);
  DSCALE_CUDA_CHECK(
      SortOrderKeys(nullptr, bytes, keys, items, segments, nullptr, nullptr, id_bits, nullptr));
  return bytes;
}

// The layout for (rows, vocab); pointers are null when `base` is (a size query).
Workspace Carve(void* base, int64_t rows, int64_t vocab) {
  Workspace w;
  size_t at = 0;
  const auto take = [&](size_t bytes) -> void* {
    void* p = base == nullptr ? nullptr : static_cast<char*>(base) + at;
    at += AlignUp(bytes);
    return p;
  };
  const auto row_count = static_cast<size_t>(rows);
  const auto items = static_cast<size_t>(rows * vocab);
  w.stats = static_cast<RowStats*>(take(row_count * sizeof(RowStats)));
  w.segment_begin = static_cast<int32_t*>(take(row_count * sizeof(int32_t)));
  w.segment_end = static_cast<int32_t*>(take(row_count * sizeof(int32_t)));
  for (uint64_t*& keys : w.keys) keys = static_cast<uint64_t*>(take(items * sizeof(uint64_t)));
  w.sort_temp_bytes = SortTempBytes(rows * vocab, rows, IdBits(vocab));
  w.sort_temp = take(w.sort_temp_bytes);
  w.total_bytes = at;
  return w;
}

// ---- Per-request parameters ----

struct RequestParams {
  bool greedy = false;
  double inv_t = 0;  // 1 / T, as the CPU forms it (double from the float temperature)
  bool use_top_k = false;
  int32_t top_k = 0;
  bool use_top_p = false;
  float top_p = 1;

  __device__ bool filtered() const { return use_top_k || use_top_p; }
};

__device__ RequestParams LoadParams(const SampleAcceptInputs& in, int32_t request, int32_t vocab) {
  RequestParams p;
  const float temperature = in.temperature[request];
  p.greedy = temperature <= 0.0f;
  if (p.greedy) return p;
  p.inv_t = 1.0 / static_cast<double>(temperature);
  p.top_k = in.top_k[request];
  p.use_top_k = p.top_k > 0 && p.top_k < vocab;
  p.top_p = in.top_p[request];
  p.use_top_p = p.top_p < 1.0f;
  return p;
}

// The request owning packed row `row` < offsets[bucket]: the largest i with offsets[i] ≤ row
// (sentinels, k = 0, share their successor's offset and are skipped by taking the largest).
__device__ int32_t RequestOfRow(const int32_t* offsets, int32_t bucket, int32_t row) {
  int32_t lo = 0, hi = bucket - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// ---- Probabilities, exactly the CPU's expressions ----

// A token's place in the rank order as one integer: the logit's bits mapped so that a larger
// logit gives a larger value (−0 and +0 share one, as they share one probability), above
// id_mask − token, so that among equal logits the lower id ranks first. Distinct per token.
__device__ inline uint64_t OrderKey(float logit, int32_t token, int id_bits) {
  const uint32_t bits = logit == 0.0f ? 0u : __float_as_uint(logit);
  const uint32_t monotone = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  const uint64_t id_mask = (uint64_t{1} << id_bits) - 1;
  return (uint64_t{monotone} << id_bits) | (id_mask - static_cast<uint64_t>(token));
}

__device__ inline int32_t TokenOf(uint64_t order_key, int id_bits) {
  const uint64_t id_mask = (uint64_t{1} << id_bits) - 1;
  return static_cast<int32_t>(id_mask - (order_key & id_mask));
}

// Kept tokens are those ranked no later than the last kept one.
__device__ inline bool Kept(const RowStats& s, float logit, int32_t token, int id_bits) {
  return !s.filtered || OrderKey(logit, token, id_bits) >= s.last_kept;
}

// exp((l − max)/T) / Z: the CPU's probabilities after its first Renormalise.
__device__ inline double Softmax(const RowStats& s, double inv_t, float logit) {
  const double max_logit = s.max_logit;
  return exp((static_cast<double>(logit) - max_logit) * inv_t) / s.softmax_sum;
}

// P(token) as TargetDistribution leaves it: 0 outside the kept set, else divided by the kept
// mass (a division by 1, exact, for unfiltered rows, which the CPU does not renormalise again).
__device__ inline double Probability(const RowStats& s, double inv_t, const float* row,
                                     int32_t token, int id_bits) {
  const float logit = row[token];
  if (!Kept(s, logit, token, id_bits)) return 0.0;
  return Softmax(s, inv_t, logit) / s.kept_mass;
}

// ---- Block-wide reductions and scans with a fixed shape (every thread must call them) ----

struct MaxWithIndex {
  float value;
  int32_t index;
};

// Shared memory of the block helpers below (plain members: __shared__ takes no initialisers).
struct BlockScratch {
  double doubles[kWarpSize];
  int32_t ints[kWarpSize];
  MaxWithIndex maxima[kWarpSize];
  double broadcast;
};

// Thread 0's value in every thread: reductions from reduce.cuh leave each lane its own
// rounding of the same sum, and the threads of one block must agree to the bit.
__device__ double Broadcast(double v, BlockScratch& s) {
  __syncthreads();
  if (threadIdx.x == 0) s.broadcast = v;
  __syncthreads();
  return s.broadcast;
}

__device__ int32_t BlockMinInt(int32_t v, BlockScratch& s) {
  return BlockReduce(v, INT_MAX, s.ints, [](int32_t x) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      x = min(x, __shfl_xor_sync(kFullWarp, x, offset));
    }
    return x;
  });
}

__device__ int32_t BlockMaxInt(int32_t v, BlockScratch& s) {
  return BlockReduce(v, INT_MIN, s.ints, [](int32_t x) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      x = max(x, __shfl_xor_sync(kFullWarp, x, offset));
    }
    return x;
  });
}

// Σ term(r) for r in [0, count), the same bits in every thread.
template <typename Term>
__device__ double BlockSumOf(int32_t count, Term term, BlockScratch& s) {
  double local = 0.0;
  for (int32_t r = threadIdx.x; r < count; r += blockDim.x) local += term(r);
  return Broadcast(BlockSum(local, s.doubles), s);
}

// Exclusive prefix sum of v over the block's threads in thread order; *total gets the block's
// sum, the same bits in every thread.
__device__ double BlockExclusiveSum(double v, double* total, BlockScratch& s) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  double inclusive = v;
  for (int offset = 1; offset < kWarpSize; offset *= 2) {
    const double up = __shfl_up_sync(kFullWarp, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  double within_warp = __shfl_up_sync(kFullWarp, inclusive, 1);
  if (lane == 0) within_warp = 0.0;
  __syncthreads();  // earlier readers of the scratch are done
  if (lane == kWarpSize - 1) s.doubles[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const double warp_total = lane < warps ? s.doubles[lane] : 0.0;
    double warp_inclusive = warp_total;
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
      const double up = __shfl_up_sync(kFullWarp, warp_inclusive, offset);
      if (lane >= offset) warp_inclusive += up;
    }
    double warp_exclusive = __shfl_up_sync(kFullWarp, warp_inclusive, 1);
    if (lane == 0) warp_exclusive = 0.0;
    __syncwarp();
    if (lane < warps) s.doubles[lane] = warp_exclusive;
    if (lane == warps - 1) s.broadcast = warp_inclusive;
  }
  __syncthreads();
  *total = s.broadcast;
  return s.doubles[warp] + within_warp;
}

// The first index r in [0, count) at which stop(prefix_r, term(r)) holds, prefix_r being the
// running sum of term(0 .. r); −1 when none does, and then *last_positive is the largest r with
// term(r) > 0 (−1 if none). Elements are taken in chunks, so the scan stops at the chunk that
// holds the answer.
template <typename Term, typename Stop>
__device__ int32_t FirstCrossing(int32_t count, Term term, Stop stop, BlockScratch& s,
                                 int32_t* last_positive) {
  double carry = 0.0;  // sum of the chunks before
  int32_t my_last_positive = -1;
  for (int32_t base = 0; base < count; base += kChunk) {
    const int32_t first = base + static_cast<int32_t>(threadIdx.x) * kItemsPerThread;
    double terms[kItemsPerThread];
    double local = 0.0;
#pragma unroll
    for (int q = 0; q < kItemsPerThread; ++q) {
      terms[q] = first + q < count ? term(first + q) : 0.0;
      local += terms[q];
    }
    double chunk_total = 0.0;
    double prefix = carry + BlockExclusiveSum(local, &chunk_total, s);
    int32_t found = INT_MAX;
#pragma unroll
    for (int q = 0; q < kItemsPerThread; ++q) {
      if (first + q >= count) break;
      prefix += terms[q];
      if (terms[q] > 0.0) my_last_positive = first + q;
      if (found == INT_MAX && stop(prefix, terms[q])) found = first + q;
    }
    found = BlockMinInt(found, s);
    if (found != INT_MAX) return found;
    carry += chunk_total;
  }
  *last_positive = BlockMaxInt(my_last_positive, s);
  return -1;
}

// ---- 1. Row statistics and sort input ----

// Whether (value, index) beats `best`: larger, or as large with a lower index.
__device__ inline bool Beats(float value, int32_t index, const MaxWithIndex& best) {
  return value > best.value || (value == best.value && index < best.index);
}

// The row's maximum and its lowest index; the same in every thread (comparisons only).
__device__ MaxWithIndex BlockArgmax(const float* row, int32_t vocab, BlockScratch& s) {
  MaxWithIndex best{-INFINITY, INT_MAX};
  for (int32_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    if (Beats(row[v], v, best)) best = {row[v], v};
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxWithIndex other{__shfl_xor_sync(kFullWarp, best.value, offset),
                             __shfl_xor_sync(kFullWarp, best.index, offset)};
    if (Beats(other.value, other.index, best)) best = other;
  }
  __syncthreads();  // earlier readers of the scratch are done
  if (threadIdx.x % kWarpSize == 0) s.maxima[threadIdx.x / kWarpSize] = best;
  __syncthreads();
  best = {-INFINITY, INT_MAX};
  for (int w = 0; w < static_cast<int>(blockDim.x) / kWarpSize; ++w) {
    if (Beats(s.maxima[w].value, s.maxima[w].index, best)) best = s.maxima[w];
  }
  return best;
}

// Grid: one block per packed row of the launch's capacity. Rows past offsets[bucket] only
// clear their sort segment.
__global__ void __launch_bounds__(kThreads)
    RowStatsKernel(SampleAcceptInputs in, int32_t bucket, int32_t vocab, int id_bits,
                   Workspace ws) {
  __shared__ BlockScratch scratch;
  const auto row = static_cast<int32_t>(blockIdx.x);
  const int64_t begin = static_cast<int64_t>(row) * vocab;
  const bool live = row < in.offsets[bucket];
  const RequestParams p =
      live ? LoadParams(in, RequestOfRow(in.offsets, bucket, row), vocab) : RequestParams{};
  const bool filtered = live && !p.greedy && p.filtered();
  if (threadIdx.x == 0) {
    ws.segment_begin[row] = static_cast<int32_t>(begin);
    ws.segment_end[row] = static_cast<int32_t>(filtered ? begin + vocab : begin);
  }
  if (!live) return;

  const float* logits = in.logits + begin;
  const MaxWithIndex best = BlockArgmax(logits, vocab, scratch);
  double softmax_sum = 0.0;
  if (!p.greedy) {
    const double max_logit = best.value;
    softmax_sum = BlockSumOf(
        vocab,
        [&](int32_t v) { return exp((static_cast<double>(logits[v]) - max_logit) * p.inv_t); },
        scratch);
  }
  if (filtered) {
    for (int32_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      ws.keys[0][begin + v] = OrderKey(logits[v], v, id_bits);
    }
  }
  if (threadIdx.x == 0) {
    ws.stats[row] = RowStats{.softmax_sum = softmax_sum,
                             .kept_mass = 1.0,
                             .max_logit = best.value,
                             .argmax = best.index,
                             .filtered = filtered ? 1 : 0};
  }
}

// ---- 3. The kept set of filtered rows ----

// Grid: one block per packed row. For a filtered row, from its pairs in rank order: keep the
// top k (or all), then within them the shortest prefix whose mass, renormalised over them,
// reaches top_p — the CPU's loop, as a chunked scan — and record the last kept pair and the
// kept mass.
__global__ void __launch_bounds__(kThreads)
    NucleusKernel(SampleAcceptInputs in, int32_t bucket, int32_t vocab, int id_bits, Workspace ws,
                  const uint64_t* __restrict__ sorted_keys) {
  __shared__ BlockScratch scratch;
  const auto row = static_cast<int32_t>(blockIdx.x);
  if (row >= in.offsets[bucket]) return;
  RowStats stats = ws.stats[row];
  if (!stats.filtered) return;
  const RequestParams p = LoadParams(in, RequestOfRow(in.offsets, bucket, row), vocab);
  const int64_t begin = static_cast<int64_t>(row) * vocab;
  const float* logits = in.logits + begin;
  const uint64_t* ranked = sorted_keys + begin;
  const auto ranked_softmax = [&](int32_t r) {
    return Softmax(stats, p.inv_t, logits[TokenOf(ranked[r], id_bits)]);
  };

  int32_t keep = p.use_top_k ? p.top_k : vocab;
  if (p.use_top_p) {
    const double top_mass = BlockSumOf(keep, ranked_softmax, scratch);
    const double top_p = p.top_p;
    int32_t unused = -1;
    const int32_t cut = FirstCrossing(
        keep, [&](int32_t r) { return ranked_softmax(r) / top_mass; },
        [&](double mass, double) { return mass >= top_p; }, scratch, &unused);
    if (cut >= 0) keep = cut + 1;
  }
  const double kept_mass = BlockSumOf(keep, ranked_softmax, scratch);
  if (threadIdx.x == 0) {
    stats.kept_mass = kept_mass;
    stats.last_kept = ranked[keep - 1];
    ws.stats[row] = stats;
  }
}

// ---- 4. Decisions and the final draw ----

// What the acceptance tests left for the block to do (plain members: it lives in __shared__).
struct Decision {
  int32_t accepted;
  int32_t used;        // uniforms consumed, the draw's included
  int32_t next_token;  // when no draw is needed (greedy)
  bool draw;
  int32_t row;       // packed row to draw from
  int32_t excluded;  // the rejected draft, removed from the draw; −1 for none
  bool rejected;     // divide by `rest` = 1 − P(excluded)
  double rest;
  double u;  // the draw's uniform
};

__device__ Decision NoDecision() {
  return Decision{.accepted = 0,
                  .used = 0,
                  .next_token = -1,
                  .draw = false,
                  .row = 0,
                  .excluded = -1,
                  .rejected = false,
                  .rest = 1.0,
                  .u = 0.0};
}

__device__ Decision DecideGreedy(const SampleAcceptInputs& in, const Workspace& ws, int32_t first,
                                 int32_t rows) {
  Decision d = NoDecision();
  for (int32_t j = 0; j + 1 < rows; ++j) {
    const int32_t target = ws.stats[first + j].argmax;
    if (target != in.tokens[first + j + 1]) {
      d.accepted = j;
      d.next_token = target;
      return d;
    }
  }
  d.accepted = rows - 1;
  d.next_token = ws.stats[first + rows - 1].argmax;
  return d;
}

__device__ Decision DecideSampled(const SampleAcceptInputs& in, const Workspace& ws,
                                  const RequestParams& p, int32_t request, int32_t first,
                                  int32_t rows, int32_t vocab, int id_bits) {
  const double* uniforms = in.uniforms + static_cast<int64_t>(request) * kUniformsPerRequest;
  Decision d = NoDecision();
  d.draw = true;
  for (int32_t j = 0; j + 1 < rows; ++j) {
    const int32_t row = first + j;
    const int32_t draft = in.tokens[row + 1];
    const bool in_vocab = draft >= 0 && draft < vocab;
    const double accept_probability =
        in_vocab
            ? Probability(ws.stats[row], p.inv_t, in.logits + int64_t{row} * vocab, draft, id_bits)
            : 0.0;
    if (uniforms[d.used++] < accept_probability) continue;
    d.accepted = j;
    d.row = row;
    d.excluded = in_vocab ? draft : -1;
    d.rejected = true;
    d.rest = 1.0 - accept_probability;
    d.u = uniforms[d.used++];
    return d;
  }
  d.accepted = rows - 1;
  d.row = first + rows - 1;
  d.u = uniforms[d.used++];
  return d;
}

// Grid: one block per request.
__global__ void __launch_bounds__(kThreads)
    DecideKernel(SampleAcceptInputs in, int32_t vocab, int id_bits, Workspace ws,
                 SampleAcceptOutputs out) {
  __shared__ BlockScratch scratch;
  __shared__ Decision decision;
  const auto request = static_cast<int32_t>(blockIdx.x);
  const int32_t rows = in.k[request];
  if (rows <= 0) {
    if (threadIdx.x == 0) {
      out.accepted[request] = 0;
      out.next_token[request] = -1;
      out.uniforms_used[request] = 0;
    }
    return;
  }
  if (rows > kUniformsPerRequest) __trap();  // more rows than uniforms: a broken contract
  const RequestParams p = LoadParams(in, request, vocab);
  const int32_t first = in.offsets[request];
  if (threadIdx.x == 0) {
    decision = p.greedy ? DecideGreedy(in, ws, first, rows)
                        : DecideSampled(in, ws, p, request, first, rows, vocab, id_bits);
  }
  __syncthreads();
  const Decision d = decision;
  int32_t next_token = d.next_token;
  if (d.draw) {
    // SampleIndex over P (or the residual) in token order: the first token with P > 0 whose
    // running sum exceeds u, else the last token with P > 0.
    const RowStats stats = ws.stats[d.row];
    const float* logits = in.logits + static_cast<int64_t>(d.row) * vocab;
    const auto probability = [&](int32_t v) {
      if (v == d.excluded) return 0.0;
      const double q = Probability(stats, p.inv_t, logits, v, id_bits);
      return d.rejected ? q / d.rest : q;
    };
    int32_t last_positive = -1;
    next_token = FirstCrossing(
        vocab, probability,
        [&](double cumulative, double q) { return q > 0.0 && d.u < cumulative; }, scratch,
        &last_positive);
    if (next_token < 0) next_token = max(last_positive, 0);
  }
  if (threadIdx.x == 0) {
    out.accepted[request] = d.accepted;
    out.next_token[request] = next_token;
    out.uniforms_used[request] = d.used;
  }
}

void CheckShape(int32_t bucket, int64_t rows, int64_t vocab) {
  DSCALE_CHECK_MSG(bucket >= 0, "bucket must be non-negative");
  DSCALE_CHECK_MSG(rows >= 0, "rows must be non-negative");
  DSCALE_CHECK_MSG(vocab >= 1, "vocab must be positive");
  DSCALE_CHECK_MSG(rows * vocab < int64_t{INT_MAX},
                   "rows · vocab must stay below 2^31 (the sort's offsets are int)");
}

}  // namespace

size_t SampleAcceptWorkspaceBytes(int64_t rows, int64_t vocab) {
  CheckShape(0, rows, vocab);
  return Carve(nullptr, rows, vocab).total_bytes;
}

void VerifySampledPacked(const SampleAcceptInputs& in, int32_t bucket, int64_t rows, int64_t vocab,
                         void* workspace, size_t workspace_bytes, const SampleAcceptOutputs& out,
                         cudaStream_t stream) {
  CheckShape(bucket, rows, vocab);
  if (bucket == 0) return;
  const Workspace ws = Carve(workspace, rows, vocab);
  DSCALE_CHECK_MSG(workspace != nullptr && workspace_bytes >= ws.total_bytes,
                   "workspace smaller than SampleAcceptWorkspaceBytes(rows, vocab)");
  DSCALE_CHECK_MSG(reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment == 0,
                   "workspace must be 256-byte aligned");
  const auto v = static_cast<int32_t>(vocab);
  const int id_bits = IdBits(vocab);
  if (rows > 0) {
    const auto row_blocks = static_cast<unsigned>(rows);
    RowStatsKernel<<<row_blocks, kThreads, 0, stream>>>(in, bucket, v, id_bits, ws);
    DSCALE_CUDA_CHECK_LAUNCH();
    cub::DoubleBuffer<uint64_t> keys(ws.keys[0], ws.keys[1]);
    size_t temp_bytes = ws.sort_temp_bytes;
    DSCALE_CUDA_CHECK(SortOrderKeys(ws.sort_temp, temp_bytes, keys, rows * vocab, rows,
                                    ws.segment_begin, ws.segment_end, id_bits, stream));
    // keys.Current() is the buffer the last pass wrote: the same for every call of one shape.
    NucleusKernel<<<row_blocks, kThreads, 0, stream>>>(in, bucket, v, id_bits, ws, keys.Current());
    DSCALE_CUDA_CHECK_LAUNCH();
  }
  DecideKernel<<<static_cast<unsigned>(bucket), kThreads, 0, stream>>>(in, v, id_bits, ws, out);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
