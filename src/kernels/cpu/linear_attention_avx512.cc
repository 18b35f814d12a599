// The delta rule's column blocks (delta_rule_columns.h) in 16-lane AVX-512 vectors. Every header
// this file shares with the rest of the program is included before the target switch below, so
// the inline and template functions they define are compiled for the build's baseline here too;
// only the blocks' own functions, in this file's namespace, use AVX-512, and linear_attention.cc
// calls them only where the CPU has it.

#include <cstdint>
#include <cstring>

#include "kernels/cpu/delta_rule.h"
#include "kernels/cpu/isa_targets.h"

DSCALE_BEGIN_TARGET_FILE(DSCALE_AVX512_TARGETS)
#define DSCALE_SIMD_LANES 16
#define DSCALE_DELTA_VARIANT avx512_vectors
#include "kernels/cpu/delta_rule_columns.h"

namespace dscale::cpu {

void DeltaRuleColumnsAvx512(const DeltaRuleRows& rows, const float* state_in, float* state,
                            int64_t head, int64_t first, int64_t count) {
  avx512_vectors::DeltaRuleColumns(rows, state_in, state, head, first, count);
}
int64_t DeltaRuleBlockAvx512() { return avx512_vectors::kBlockColumns; }

}  // namespace dscale::cpu

DSCALE_END_TARGET_FILE()
