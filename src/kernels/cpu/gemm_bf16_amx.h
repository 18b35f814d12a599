#pragma once
// LinearBf16's BF16-activation path on AMX (Advanced Matrix Extensions, Intel Xeon from Sapphire
// Rapids): tdpbf16ps multiplies a 16 × 32 tile of BF16 weights by a 32 × 16 tile of BF16
// activations into 16 × 16 f32 sums in one instruction, 16 times the products of an AVX-512 FMA,
// so a verify step's rows cost what reading the weights costs, as a decode step's row does.
//
// Every output is the same sum in the same order whatever the row count (the k steps of 32 in
// order, each tdpbf16ps adding its 32 exact products into the running f32 sum), so a verified row
// gets a decode row's bits. tdpbf16ps flushes subnormal inputs and outputs to zero and rounds to
// nearest even, as vdpbf16ps does; its bits may differ from the AVX-512 variants'.

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace dscale::cpu {

// Whether this CPU has AMX-TILE and AMX-BF16, DSCALE_CPU_ISA's cap allows AMX, and the kernel
// lets this process use the tile registers (CpuFeatures::amx_bf16 of CpuFeaturesInUse(), answered
// once); the same under `cap` instead of the environment's, and for `features`.
bool HasAmxBf16();
bool HasAmxBf16(CpuIsaCap cap);
bool HasAmxBf16(const CpuFeatures& features);

// y[rows, out] (+)= xb[rows, in] · w[out, in]ᵀ with xb the activations' BF16 bits and w BF16
// weights in PyTorch's Linear layout, any alignment; rows of y are `ldy` floats apart. Requires
// HasAmxBf16(). The threads split the outputs; many rows run in panels of at most 512 KiB of
// packed activations.
void LinearAmxBf16(const uint16_t* xb, const uint16_t* w, float* y, int64_t rows, int64_t in,
                   int64_t out, bool accumulate, int64_t ldy);

}  // namespace dscale::cpu
