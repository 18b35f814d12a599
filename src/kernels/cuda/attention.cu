#include <cmath>
#include <cstdio>
#include <limits>

#include "core/check.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"

// One block = one query tile (up to kTileRows rows of one span) × one query head; see
// attention.h for the grid. Inside a block the work runs in phases separated by barriers,
// each phase spreading its elements over all kThreads threads:
//   load the tile's queries (scaled) and reset the running state;
//   for each chunk of kKeyChunk positions up to what the tile's last row sees:
//     gather the chunk's key and value rows through the page table,
//     score every (row, key) pair — positions a row may not see score −inf,
//     per row: fold the chunk into the running max m and sum l (online softmax) and turn the
//       scores into weights e^(s − m),
//     per (row, dim): acc = acc · e^(m_old − m) + Σ_c weight_c · v_c;
//   write acc / l for every row.
// Rows are independent: a row's numbers do not depend on the tile height, only on the chunk
// boundaries, which are the same for every tile.

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kKeyChunk = 16;
// Row stride of the score matrix: one float of padding puts the rows a warp walks down on
// distinct shared-memory banks.
constexpr int kScoreStride = kKeyChunk + 1;

// Shared memory of one block (hd = head_dim; q and k rows are padded to hd + 1 floats for the
// same reason as the scores: the scoring phase reads them down a column).
//   q        [tile_rows, hd + 1]       the tile's queries, multiplied by the scale
//   k        [kKeyChunk, hd + 1]       the chunk's key rows
//   v        [kKeyChunk, hd]           the chunk's value rows
//   acc      [tile_rows, hd]           unnormalised Σ weight · v per row
//   p        [tile_rows, kScoreStride] the chunk's scores, then their weights
//   row_max, row_sum, rescale [tile_rows]
struct TileSmem {
  float* q;
  float* k;
  float* v;
  float* acc;
  float* p;
  float* row_max;
  float* row_sum;
  float* rescale;
};

__host__ __device__ constexpr int64_t TileSmemFloats(int64_t tile_rows, int64_t hd) {
  return tile_rows * (hd + 1) + kKeyChunk * (hd + 1) + kKeyChunk * hd + tile_rows * hd +
         tile_rows * kScoreStride + 3 * tile_rows;
}

__device__ TileSmem CarveTileSmem(float* base, int tile_rows, int hd) {
  TileSmem s;
  s.q = base;
  s.k = s.q + tile_rows * (hd + 1);
  s.v = s.k + kKeyChunk * (hd + 1);
  s.acc = s.v + kKeyChunk * hd;
  s.p = s.acc + tile_rows * hd;
  s.row_max = s.p + tile_rows * kScoreStride;
  s.row_sum = s.row_max + tile_rows;
  s.rescale = s.row_sum + tile_rows;
  return s;
}

// What one block works on.
struct Tile {
  StepSpan span;
  int32_t row_begin;  // first span-local row
  int32_t live;       // rows of the tile that exist (only a span's last tile has fewer)
  int32_t head;
  int32_t kv_head;
  int32_t key_end;  // exclusive end of the positions the tile's last row sees
};

// Exclusive end of the positions that span-local row `row` sees.
__device__ int32_t VisibleEnd(const AttentionParams& p, const StepSpan& span, int32_t row) {
  return p.causal ? span.ctx_len + row + 1 : span.ctx_len + span.q_len;
}

__device__ void LoadQueries(const AttentionParams& p, const Tile& t, const TileSmem& s) {
  const int hd = p.head_dim;
  const int64_t first_row = int64_t{t.span.q_start} + t.row_begin;
  for (int e = threadIdx.x; e < t.live * hd; e += blockDim.x) {
    const int r = e / hd;
    const int d = e - r * hd;
    const float* src = p.q + (first_row + r) * p.q_row_stride + int64_t{t.head} * hd;
    s.q[r * (hd + 1) + d] = src[d] * p.scale;
    s.acc[e] = 0.0f;
  }
  for (int r = threadIdx.x; r < t.live; r += blockDim.x) {
    s.row_max[r] = -INFINITY;
    s.row_sum[r] = 0.0f;
  }
}

// Key and value rows of positions [begin, begin + n) for the tile's kv head. Consecutive
// threads read consecutive floats of a row, so each warp's loads are coalesced.
__device__ void LoadKeyChunk(const AttentionParams& p, const Tile& t, int32_t begin, int n,
                             const TileSmem& s) {
  const int hd = p.head_dim;
  const int64_t page_size = p.kv.page_size;
  for (int e = threadIdx.x; e < n * hd; e += blockDim.x) {
    const int c = e / hd;
    const int d = e - c * hd;
    const int64_t pos = int64_t{begin} + c;
    const int64_t slot = int64_t{t.span.page_table[pos / page_size]} * page_size + pos % page_size;
    const int64_t offset = (slot * p.kv_heads + t.kv_head) * hd + d;
    s.k[c * (hd + 1) + d] = p.kv.k[offset];
    s.v[c * hd + d] = p.kv.v[offset];
  }
}

// p[r, c] = q_r · k_c, or −inf where row r may not see position begin + c.
__device__ void ScoreChunk(const AttentionParams& p, const Tile& t, int32_t begin, int n,
                           const TileSmem& s) {
  const int hd = p.head_dim;
  for (int e = threadIdx.x; e < t.live * n; e += blockDim.x) {
    const int r = e / n;
    const int c = e - r * n;
    const float* q = s.q + r * (hd + 1);
    const float* k = s.k + c * (hd + 1);
    float dot = 0.0f;
    for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
    const bool visible = begin + c < VisibleEnd(p, t.span, t.row_begin + r);
    s.p[r * kScoreStride + c] = visible ? dot : -INFINITY;
  }
}

// Per row: m' = max(m, max_c s_c), rescale = e^(m − m'), l' = l·rescale + Σ_c e^(s_c − m'),
// with the scores replaced by e^(s_c − m'). Every row sees position 0, which is in the first
// chunk, so m' is finite from the first chunk on; the guard keeps a row that has seen nothing
// at zero weight instead of NaN all the same.
__device__ void SoftmaxChunk(const Tile& t, int n, const TileSmem& s) {
  for (int r = threadIdx.x; r < t.live; r += blockDim.x) {
    float* pr = s.p + r * kScoreStride;
    const float old_max = s.row_max[r];
    float new_max = old_max;
    for (int c = 0; c < n; ++c) new_max = fmaxf(new_max, pr[c]);
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    float sum = 0.0f;
    for (int c = 0; c < n; ++c) {
      pr[c] = expf(pr[c] - base);
      sum += pr[c];
    }
    const float rescale = expf(old_max - base);
    s.rescale[r] = rescale;
    s.row_max[r] = new_max;
    s.row_sum[r] = s.row_sum[r] * rescale + sum;
  }
}

// acc[r, d] = acc[r, d] · rescale[r] + Σ_c p[r, c] · v[c, d]. Consecutive threads take
// consecutive d, so a warp reads a value row's floats side by side (no bank conflicts) and one
// weight per row (a broadcast).
__device__ void AccumulateChunk(int hd, const Tile& t, int n, const TileSmem& s) {
  for (int e = threadIdx.x; e < t.live * hd; e += blockDim.x) {
    const int r = e / hd;
    const int d = e - r * hd;
    const float* pr = s.p + r * kScoreStride;
    float a = s.acc[e] * s.rescale[r];
    for (int c = 0; c < n; ++c) a += pr[c] * s.v[c * hd + d];
    s.acc[e] = a;
  }
}

__device__ void StoreRows(const AttentionParams& p, const Tile& t, const TileSmem& s) {
  const int hd = p.head_dim;
  const int64_t first_row = int64_t{t.span.q_start} + t.row_begin;
  const int64_t out_stride = int64_t{p.heads} * hd;
  for (int e = threadIdx.x; e < t.live * hd; e += blockDim.x) {
    const int r = e / hd;
    const int d = e - r * hd;
    p.out[(first_row + r) * out_stride + int64_t{t.head} * hd + d] =
        s.acc[e] * (1.0f / s.row_sum[r]);
  }
}

template <int kTileRows>
__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(const AttentionParams p) {
  extern __shared__ float smem[];
  Tile t;
  t.span = p.spans[blockIdx.x];
  t.row_begin = static_cast<int32_t>(blockIdx.z) * kTileRows;
  if (t.row_begin >= t.span.q_len) return;  // the whole block: past this span's rows
  t.live = min(kTileRows, t.span.q_len - t.row_begin);
  t.head = static_cast<int32_t>(blockIdx.y);
  t.kv_head = t.head / (p.heads / p.kv_heads);
  t.key_end = VisibleEnd(p, t.span, t.row_begin + t.live - 1);
  const TileSmem s = CarveTileSmem(smem, kTileRows, p.head_dim);
  LoadQueries(p, t, s);
  for (int32_t begin = 0; begin < t.key_end; begin += kKeyChunk) {
    const int n = min(kKeyChunk, t.key_end - begin);
    __syncthreads();  // queries loaded; the previous chunk's k, v and p no longer read
    LoadKeyChunk(p, t, begin, n, s);
    __syncthreads();
    ScoreChunk(p, t, begin, n, s);
    __syncthreads();
    SoftmaxChunk(t, n, s);
    __syncthreads();
    AccumulateChunk(p.head_dim, t, n, s);
  }
  __syncthreads();
  StoreRows(p, t, s);
}

void ValidateParams(const AttentionParams& p, int32_t max_q_len) {
  DSCALE_CHECK(p.heads > 0 && p.kv_heads > 0 && p.heads % p.kv_heads == 0);
  DSCALE_CHECK(p.head_dim > 0);
  DSCALE_CHECK(p.kv.page_size > 0);
  DSCALE_CHECK_MSG(p.kv.k_bf16 == nullptr, "device attention reads f32 K/V rows");
  DSCALE_CHECK(p.q_row_stride >= static_cast<int64_t>(p.heads) * p.head_dim);
  DSCALE_CHECK(p.num_spans >= 0 && (p.num_spans == 0 || p.spans != nullptr));
  DSCALE_CHECK(max_q_len >= 0);
  DSCALE_CHECK_MSG(p.heads <= 65535, "grid.y holds one block per query head");
}

// The largest dynamic shared memory a block of the current device may opt into.
int64_t MaxSharedBytesPerBlock() {
  int device = 0;
  DSCALE_CUDA_CHECK(cudaGetDevice(&device));
  int bytes = 0;
  DSCALE_CUDA_CHECK(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

void CheckTileFits(int tile_rows, int32_t head_dim, int64_t bytes) {
  const int64_t limit = MaxSharedBytesPerBlock();
  char msg[160];
  std::snprintf(msg, sizeof(msg),
                "attention tile %d x head_dim %d needs %lld bytes of shared memory; the device "
                "allows %lld per block",
                tile_rows, head_dim, static_cast<long long>(bytes), static_cast<long long>(limit));
  DSCALE_CHECK_MSG(bytes <= limit, msg);
}

}  // namespace

template <int kTileRows>
void PagedAttentionTiled(const AttentionParams& params, int32_t max_q_len, cudaStream_t stream) {
  static_assert(kTileRows > 0 && kTileRows <= 65535);
  ValidateParams(params, max_q_len);
  if (params.num_spans == 0 || max_q_len == 0) return;
  const int64_t tiles = (int64_t{max_q_len} + kTileRows - 1) / kTileRows;
  DSCALE_CHECK_MSG(tiles <= 65535, "grid.z holds one block per query tile");
  const int64_t bytes = TileSmemFloats(kTileRows, params.head_dim) * int64_t{sizeof(float)};
  CheckTileFits(kTileRows, params.head_dim, bytes);
  // Above 48 KiB a kernel must opt in to its dynamic shared memory; the setting is per kernel
  // and cheap to repeat.
  DSCALE_CUDA_CHECK(cudaFuncSetAttribute(PagedAttentionKernel<kTileRows>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned>(params.num_spans), static_cast<unsigned>(params.heads),
                  static_cast<unsigned>(tiles));
  PagedAttentionKernel<kTileRows><<<grid, kThreads, static_cast<size_t>(bytes), stream>>>(params);
  DSCALE_CUDA_CHECK_LAUNCH();
}

template void PagedAttentionTiled<16>(const AttentionParams&, int32_t, cudaStream_t);
template void PagedAttentionTiled<64>(const AttentionParams&, int32_t, cudaStream_t);
template void PagedAttentionTiled<128>(const AttentionParams&, int32_t, cudaStream_t);

void PagedAttention(const AttentionParams& params, int32_t max_q_len, int tile_rows,
                    cudaStream_t stream) {
  switch (tile_rows) {
    case 16:
      return PagedAttentionTiled<16>(params, max_q_len, stream);
    case 64:
      return PagedAttentionTiled<64>(params, max_q_len, stream);
    case 128:
      return PagedAttentionTiled<128>(params, max_q_len, stream);
    default:
      DSCALE_CHECK_MSG(false, "attention tile height is not one of kAttentionTileHeights");
  }
}

}  // namespace dscale::cuda
