#pragma once
// What the CPU offers the kernels: one description, detected once, and what DSCALE_CPU_ISA's cap
// (cpu_isa_cap.h) leaves of it. Every kernel family picks its variants from a CpuFeatures alone
// (bf16_isa.h, gemm_bf16.h, gemm_int8.h, the AMX kernels, openblas_kernels.h), so a capped
// description runs exactly what a CPU with only those features runs, and no family reads the CPU
// itself.

#include <iterator>
#include <string>
#include <string_view>

#include "kernels/cpu/cpu_isa_cap.h"

namespace dscale::cpu {

// The features the kernels dispatch on. The vector extensions count only where the OS saves
// their registers' state (XCR0), as __builtin_cpu_supports reports them.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512cd = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;  // vdpbf16ps
  bool avx512_vnni = false;  // vpdpbusd on 512-bit vectors (EVEX)
  bool avx_vnni = false;     // vpdpbusd on 256-bit vectors (VEX)
  // AMX-TILE with AMX-BF16 (tdpbf16ps) and with AMX-INT8 (tdpbssd). DetectedCpuFeatures() has
  // them as the CPU reports them; CpuFeaturesFor() only where Linux also lets this process use
  // the tile registers.
  bool amx_bf16 = false;
  bool amx_int8 = false;
  // The vendor is AMD: not an instruction set but a rate (HasFullRateAvx512Bf16, bf16_isa.h).
  bool amd = false;

  // AVX2 and FMA: the 256-bit variants (DSCALE_AVX2, isa_targets.h).
  bool Avx2Fma() const { return avx2 && fma; }
  // AVX-512 F and BW: the 512-bit variants (DSCALE_AVX512).
  bool Avx512() const { return avx512f && avx512bw; }

  bool operator==(const CpuFeatures&) const = default;
};

// One row per feature: its name (as /proc/cpuinfo's flags spell it), its field, and the lowest
// cap that allows it (cpu_isa_cap.h's levels). The vendor is allowed by every cap.
// (nvcc's front end writes the member pointer out as `bool (CpuFeatures::*has)`, which the host
// compiler's -Wparentheses flags in the CUDA sources that include this header.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wparentheses"
struct CpuFeature {
  std::string_view name;
  bool CpuFeatures::*has;
  CpuIsaCap level;
};
#pragma GCC diagnostic pop
inline constexpr CpuFeature kCpuFeatureTable[] = {
    {"avx", &CpuFeatures::avx, CpuIsaCap::kAvx2},
    {"avx2", &CpuFeatures::avx2, CpuIsaCap::kAvx2},
    {"fma", &CpuFeatures::fma, CpuIsaCap::kAvx2},
    {"avx512f", &CpuFeatures::avx512f, CpuIsaCap::kAvx512},
    {"avx512bw", &CpuFeatures::avx512bw, CpuIsaCap::kAvx512},
    {"avx512cd", &CpuFeatures::avx512cd, CpuIsaCap::kAvx512},
    {"avx512dq", &CpuFeatures::avx512dq, CpuIsaCap::kAvx512},
    {"avx512vl", &CpuFeatures::avx512vl, CpuIsaCap::kAvx512},
    {"avx512_bf16", &CpuFeatures::avx512_bf16, CpuIsaCap::kAvx512},
    {"avx512_vnni", &CpuFeatures::avx512_vnni, CpuIsaCap::kAvx512},
    {"avx_vnni", &CpuFeatures::avx_vnni, CpuIsaCap::kAvx512},
    {"amx_bf16", &CpuFeatures::amx_bf16, CpuIsaCap::kAmx},
    {"amx_int8", &CpuFeatures::amx_int8, CpuIsaCap::kAmx},
    {"amd", &CpuFeatures::amd, CpuIsaCap::kPortable},
};
static_assert(sizeof(CpuFeatures) == std::size(kCpuFeatureTable) * sizeof(bool),
              "every field of CpuFeatures needs a row: the cap reads its level there");

// What this CPU has, read from cpuid once (the only place the kernels read it).
const CpuFeatures& DetectedCpuFeatures();

// `cpu` less every feature `cap` does not allow (kCpuFeatureTable's levels): the cap only
// removes, so the result never has a feature `cpu` lacks.
constexpr CpuFeatures CappedCpuFeatures(const CpuFeatures& cpu, CpuIsaCap cap) {
  CpuFeatures capped = cpu;
  for (const CpuFeature& feature : kCpuFeatureTable) {
    if (!CpuIsaCapAllows(cap, feature.level)) capped.*feature.has = false;
  }
  return capped;
}

// What the kernels may use under `cap`: DetectedCpuFeatures() capped, with AMX only where Linux
// lets this process use the tiles' 8 KiB of state (it asks each process to request them:
// arch_prctl, asked once, and only where a cap allows AMX on a CPU that has it).
CpuFeatures CpuFeaturesFor(CpuIsaCap cap);

// CpuFeaturesFor(DSCALE_CPU_ISA's cap), computed once: what the kernels dispatch on.
const CpuFeatures& CpuFeaturesInUse();

// The names of the features `features` has, in kCpuFeatureTable's order, space-separated
// ("avx avx2 fma"; "none" for none), for benchmark headers and logs.
std::string CpuFeaturesString(const CpuFeatures& features);

}  // namespace dscale::cpu
