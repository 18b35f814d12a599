#pragma once
// DSCALE_CPU_ISA: a cap on the instruction sets the CPU kernels dispatch to. It is applied once,
// to the one description of the CPU (cpu_features.h: CappedCpuFeatures, CpuFeaturesInUse) that
// every kernel family reads (bf16_isa.h, gemm_bf16.h, gemm_int8.h, the AMX kernels, the OpenBLAS
// family in openblas_kernels.h), so a machine runs exactly what a smaller one runs (an AVX-512
// Xeon the AVX2 variants of an AVX2-only EPYC), and a user can pin a variant. The cap only
// removes: it never claims an instruction set the CPU lacks.

#include <string_view>

#include "core/status.h"

namespace dscale::cpu {

// The levels, lowest first; each allows what the levels below it allow.
//   kPortable: no SIMD variant of dscale's kernels (OpenBLAS keeps its SSE-era kernels, the
//              floor of x86-64).
//   kAvx2:     AVX2 and FMA (and AVX): no AVX-512, no AVX-VNNI, AVX512-VNNI or AVX512-BF16, no
//              AMX.
//   kAvx512:   AVX-512 (F, BW; CD, DQ, VL for OpenBLAS), with AVX512-BF16, AVX512-VNNI and
//              AVX-VNNI where present; no AMX.
//   kAmx:      everything the CPU has, AMX-BF16 and AMX-INT8 included (no cap: the default).
enum class CpuIsaCap { kPortable, kAvx2, kAvx512, kAmx };

// The environment variable, read once (CpuIsaCapFromEnvironment).
inline constexpr char kCpuIsaCapVariable[] = "DSCALE_CPU_ISA";

// "portable", "avx2", "avx512" or "amx": the value that selects `cap`.
std::string_view CpuIsaCapName(CpuIsaCap cap);

// The cap a value of DSCALE_CPU_ISA selects: one of CpuIsaCapName's names, or "" (the variable
// set empty, as unset: no cap). Any other value is an InvalidArgument naming the variable, the
// accepted values and the value given.
Result<CpuIsaCap> ParseCpuIsaCap(std::string_view value);

// DSCALE_CPU_ISA's cap (kAmx when unset), read on the first call. An unknown value is a usage
// error, never a silent fallback: ParseCpuIsaCap's message goes to stderr and the process exits
// with status 2.
CpuIsaCap CpuIsaCapFromEnvironment();

// Whether `cap` lets the kernels use the instruction sets of `level` (those listed above for it).
constexpr bool CpuIsaCapAllows(CpuIsaCap cap, CpuIsaCap level) { return level <= cap; }

}  // namespace dscale::cpu
