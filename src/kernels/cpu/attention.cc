#include "kernels/cpu/attention.h"

#include "core/check.h"

#define DSCALE_ATTENTION_VARIANT build_vectors
#include "kernels/cpu/attention_tiles.h"

namespace dscale::cpu {

// attention_avx512.cc: the tiles in 16-lane AVX-512 vectors, for CPUs that have AVX-512.
void PagedAttentionAvx512Vectors(const AttentionParams& params, int tile_rows, WidenBf16Fn widen);

namespace {
void ValidateParams(const AttentionParams& p) {
  DSCALE_CHECK(p.heads > 0 && p.kv_heads > 0 && p.heads % p.kv_heads == 0);
  DSCALE_CHECK(p.head_dim > 0);
  DSCALE_CHECK(p.kv.page_size > 0);
  const bool f32 = p.kv.k != nullptr || p.kv.v != nullptr;
  const bool bf16 = p.kv.k_bf16 != nullptr || p.kv.v_bf16 != nullptr;
  DSCALE_CHECK_MSG(f32 != bf16, "attention needs either the f32 or the BF16 K/V rows");
  DSCALE_CHECK(f32 ? p.kv.k && p.kv.v : p.kv.k_bf16 && p.kv.v_bf16);
  DSCALE_CHECK(p.q_row_stride >= static_cast<int64_t>(p.heads) * p.head_dim);
  DSCALE_CHECK(p.num_spans >= 0 && (p.num_spans == 0 || p.spans != nullptr));
}

// With `isa` AVX-512 the tiles run in 16-lane vectors (a decode or verify row block is one
// vector), else in the build's; both give the same bits.
void Dispatch(const AttentionParams& params, int tile_rows, Bf16Isa isa) {
  ValidateParams(params);
  CheckBf16IsaSupported(isa);
  const WidenBf16Fn widen = WidenBf16For(isa);
  if (isa == Bf16Isa::kAvx512) return PagedAttentionAvx512Vectors(params, tile_rows, widen);
  build_vectors::RunAttentionTiles(params, tile_rows, widen);
}

}  // namespace

template <int kTileRows>
void PagedAttentionTiled(const AttentionParams& params, Bf16Isa isa) {
  Dispatch(params, kTileRows, isa);
}

template void PagedAttentionTiled<16>(const AttentionParams& params, Bf16Isa isa);
template void PagedAttentionTiled<64>(const AttentionParams& params, Bf16Isa isa);
template void PagedAttentionTiled<128>(const AttentionParams& params, Bf16Isa isa);

void PagedAttention(const AttentionParams& params, int tile_rows, Bf16Isa isa) {
  Dispatch(params, tile_rows, isa);
}

void PagedAttention(const AttentionParams& params, int tile_rows) {
  PagedAttention(params, tile_rows, BestBf16Isa());
}

}  // namespace dscale::cpu
