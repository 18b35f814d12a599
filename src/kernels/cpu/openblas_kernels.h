#pragma once
// OpenBLAS picks its kernel family once, when the library is loaded, from the CPU models it
// knows. Debian 12's OpenBLAS 0.3.21 predates AVX-512 on AMD (Zen 4, Zen 5) and gives those CPUs
// its AVX2 (Haswell) kernels, whose sgemm runs at about half the rate of its AVX-512 (SkylakeX)
// kernels there: 226 against 422 GFLOP/s on the 2-vCPU EPYC of docs/BENCHMARKS.md. Intel models
// newer than it (Emerald Rapids, family 6 model 207) fare worse: it falls back to its SSE3
// (Prescott) kernels. Only the environment variable OPENBLAS_CORETYPE, read at load time,
// changes the choice, so a program that wants the faster kernels runs itself again with it set.
// It does the same to keep OpenBLAS within DSCALE_CPU_ISA's cap (cpu_isa_cap.h), so that the
// sgemm too is the one a machine of the capped level would run.

#include <string>
#include <string_view>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_isa_cap.h"

namespace dscale::cpu {

// The widest vector instructions of a CPU or of an OpenBLAS kernel family, in the order of
// OpenBLAS's x86-64 families: SSE-era (Prescott, Nehalem, ...), AVX (Sandybridge, Bulldozer),
// AVX2 with FMA (Haswell, Zen), AVX-512 (SkylakeX, Cooperlake, SapphireRapids).
enum class OpenBlasSimd { kUnknown, kSse, kAvx, kAvx2, kAvx512 };

// The kernel family OpenBLAS chose at load time (openblas_get_corename), e.g. "Haswell".
std::string OpenBlasCoreName();

// The SIMD level of an OpenBLAS core name (any case); kUnknown for a name it does not know.
OpenBlasSimd OpenBlasFamilySimd(std::string_view core_name);

// What this CPU supports within DSCALE_CPU_ISA's cap, in the terms above (AVX-512 means F, CD,
// BW, DQ and VL: what the SkylakeX kernels use); the same within `cap` instead, and for a CPU
// with `features` (a capped description never reaches above OpenBlasSimdCap of its cap).
OpenBlasSimd CpuSimdForOpenBlas();
OpenBlasSimd CpuSimdForOpenBlas(CpuIsaCap cap);
OpenBlasSimd CpuSimdForOpenBlas(const CpuFeatures& features);

// The widest level `cap` lets OpenBLAS use: kSse under portable (OpenBLAS has no x86-64 kernels
// without SIMD; SSE is the floor), kAvx2 under avx2, kAvx512 under avx512 and amx.
OpenBlasSimd OpenBlasSimdCap(CpuIsaCap cap);

// The OPENBLAS_CORETYPE value that brings OpenBLAS within `cap` when `chosen`, its core name, is
// a family above OpenBlasSimdCap(cap): "Haswell" under avx2, "Prescott" under portable; "" when
// the family is within the cap or is one this rule does not know.
std::string CappedOpenBlasCoreType(std::string_view chosen, CpuIsaCap cap);

// The OPENBLAS_CORETYPE value that would give this CPU faster kernels than the loaded library
// chose, or "" when the choice is right.
std::string BetterOpenBlasCoreType();
// The rule behind it: the family of the CPU's level ("SkylakeX", "Haswell" or "Sandybridge")
// when that is above the level of `chosen`, OpenBLAS's core name; "" when it is not, or when
// `chosen` is a name this rule does not know (a newer library's family is left alone).
std::string BetterOpenBlasCoreType(std::string_view chosen, OpenBlasSimd cpu);

// When CappedOpenBlasCoreType (under DSCALE_CPU_ISA's cap) or else BetterOpenBlasCoreType()
// names a family and OPENBLAS_CORETYPE is unset, sets it and replaces this process with a fresh
// run of the same executable and arguments. Returns when it does not (nothing to change, the user
// set OPENBLAS_CORETYPE, or exec failed: the program then runs on as it is).
void ReexecForMatchingOpenBlasKernels(char** argv);

}  // namespace dscale::cpu
