#pragma once
// The instruction-set variants of the CPU's BF16 kernels (gemm_bf16.h, attention.h): each is
// compiled for AVX-512, for AVX2 + FMA and portably, whatever the build's baseline (sanitizer
// and debug builds target plain x86-64), and picked at run time from what the CPU supports
// and DSCALE_CPU_ISA allows: the description of cpu_features.h.

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace dscale::cpu {

enum class Bf16Isa { kPortable, kAvx2, kAvx512 };
std::string_view Bf16IsaName(Bf16Isa isa);
// The variants this CPU can run under DSCALE_CPU_ISA's cap, portable first (listed once, from
// CpuFeaturesInUse()).
std::vector<Bf16Isa> SupportedBf16Isas();
// The same under `cap` instead of the environment's (tests compare caps), and for a CPU with
// `features`: portable, AVX2 + FMA where it has both, AVX-512 where it has F and BW.
std::vector<Bf16Isa> SupportedBf16Isas(CpuIsaCap cap);
std::vector<Bf16Isa> SupportedBf16Isas(const CpuFeatures& features);
// The last of SupportedBf16Isas(): the one the kernels use.
Bf16Isa BestBf16Isa();
// Whether the AVX2 + FMA variant is among them (the quantisers' and unpackers' vector loops).
bool HasAvx2Fma();
// CHECK-fails when this CPU cannot run `isa` (tests and benchmarks pick variants by hand).
void CheckBf16IsaSupported(Bf16Isa isa);
// Whether this CPU has AVX512-BF16's dot products (vdpbf16ps) besides AVX-512 F and BW, and
// DSCALE_CPU_ISA's cap allows them (answered once); the same under `cap`, and for `features`.
bool HasAvx512Bf16();
bool HasAvx512Bf16(CpuIsaCap cap);
bool HasAvx512Bf16(const CpuFeatures& features);
// Whether HasAvx512Bf16() and the CPU is one whose vdpbf16ps issues at the f32 FMA's rate, so
// that its 32 products an instruction are twice the FMA's 16: AMD's (Zen 4 and 5: a one-core
// probe of 24 independent accumulators on a Zen 4-class EPYC retired 3.58 G vdpbf16ps a second
// against 3.56 G vfmadd231ps). Intel's AVX512-BF16 without AMX retired half the FMA's rate on
// the Xeon measured (docs/BENCHMARKS.md, "BF16 activations on the CPU").
// Answered once; the same under `cap` instead (tests), and for `features`.
bool HasFullRateAvx512Bf16();
bool HasFullRateAvx512Bf16(CpuIsaCap cap);
bool HasFullRateAvx512Bf16(const CpuFeatures& features);

// dst[0, n) = the n BF16 values at src widened to f32 (exact), with `isa`'s vectors, on the
// calling thread; any alignment.
using WidenBf16Fn = void (*)(const uint16_t* src, int64_t n, float* dst);
WidenBf16Fn WidenBf16For(Bf16Isa isa);

}  // namespace dscale::cpu
