// The attention tiles (attention_tiles.h) in 16-lane AVX-512 vectors. Every header this file
// shares with the rest of the program is included before the target switch below, so the inline
// and template functions they define (std::vector's among them) are compiled for the build's
// baseline here too: a copy compiled with AVX-512, if the linker kept it, would run on CPUs
// without it. Only the tiles' own functions, each in this file's namespace or internal to it,
// use AVX-512; attention.cc calls them only where the CPU has it.

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
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/isa_targets.h"

// What Bf16Isa::kAvx512 requires of the CPU, for every function below (the headers above keep
// their own targets).
DSCALE_BEGIN_TARGET_FILE(DSCALE_AVX512_TARGETS)
#define DSCALE_SIMD_LANES 16
#define DSCALE_ATTENTION_VARIANT avx512_vectors
#include "kernels/cpu/attention_tiles.h"

namespace dscale::cpu {

void PagedAttentionAvx512Vectors(const AttentionParams& params, int tile_rows, WidenBf16Fn widen) {
  avx512_vectors::RunAttentionTiles(params, tile_rows, widen);
}

}  // namespace dscale::cpu

DSCALE_END_TARGET_FILE()
