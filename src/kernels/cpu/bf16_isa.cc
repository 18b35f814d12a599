#include "kernels/cpu/bf16_isa.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu {
namespace {

inline float Bf16Bits(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

void WidenPortable(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16Bits(src[i]);
}

DSCALE_AVX2 void WidenAvx2(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i,
                     _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)));
  }
  for (; i < n; ++i) dst[i] = Bf16Bits(src[i]);
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
DSCALE_AVX512 void WidenAvx512(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i,
                     _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
  }
  for (; i < n; ++i) dst[i] = Bf16Bits(src[i]);
}
#pragma GCC diagnostic pop

const std::vector<Bf16Isa>& Supported() {
  static const std::vector<Bf16Isa> isas = SupportedBf16Isas(CpuFeaturesInUse());
  return isas;
}

}  // namespace

std::string_view Bf16IsaName(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::kAvx512:
      return "avx512";
    case Bf16Isa::kAvx2:
      return "avx2";
    case Bf16Isa::kPortable:
      break;
  }
  return "portable";
}

std::vector<Bf16Isa> SupportedBf16Isas() { return Supported(); }

std::vector<Bf16Isa> SupportedBf16Isas(CpuIsaCap cap) {
  return SupportedBf16Isas(CpuFeaturesFor(cap));
}

std::vector<Bf16Isa> SupportedBf16Isas(const CpuFeatures& features) {
  std::vector<Bf16Isa> found = {Bf16Isa::kPortable};
  if (features.Avx2Fma()) found.push_back(Bf16Isa::kAvx2);
  if (features.Avx512()) found.push_back(Bf16Isa::kAvx512);
  return found;
}

bool HasAvx512Bf16() {
  static const bool has = HasAvx512Bf16(CpuFeaturesInUse());
  return has;
}

bool HasAvx512Bf16(CpuIsaCap cap) { return HasAvx512Bf16(CpuFeaturesFor(cap)); }

bool HasAvx512Bf16(const CpuFeatures& features) {
  return features.Avx512() && features.avx512_bf16;
}

bool HasFullRateAvx512Bf16() {
  static const bool full_rate = HasFullRateAvx512Bf16(CpuFeaturesInUse());
  return full_rate;
}

bool HasFullRateAvx512Bf16(CpuIsaCap cap) { return HasFullRateAvx512Bf16(CpuFeaturesFor(cap)); }

bool HasFullRateAvx512Bf16(const CpuFeatures& features) {
  return HasAvx512Bf16(features) && features.amd;
}

Bf16Isa BestBf16Isa() { return Supported().back(); }

bool HasAvx2Fma() { return CpuFeaturesInUse().Avx2Fma(); }

void CheckBf16IsaSupported(Bf16Isa isa) {
  const std::vector<Bf16Isa>& supported = Supported();
  DSCALE_CHECK_MSG(std::find(supported.begin(), supported.end(), isa) != supported.end(),
                   "this CPU cannot run the requested BF16 kernel variant");
}

WidenBf16Fn WidenBf16For(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::kAvx512:
      return WidenAvx512;
    case Bf16Isa::kAvx2:
      return WidenAvx2;
    case Bf16Isa::kPortable:
      break;
  }
  return WidenPortable;
}

}  // namespace dscale::cpu
