#pragma once
// The sustained issue rate of the multiply-add instructions the CPU kernels are built on —
// vfmadd231ps (f32), vdpbf16ps (BF16 pairs) and vpdpbusd (int8 quads) — on 512-bit (zmm) and
// 256-bit (ymm) vectors, on one or more cores: the arithmetic roofs a kernel's rate is judged
// against (docs/BENCHMARKS.md, "The machine's limits"). Each thread runs a loop of 24 independent
// accumulators (enough to cover the instruction's latency times its issue width on every CPU
// class so far), written in assembly so that the count of instructions is exactly the one timed.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace dscale::bench {

enum class MultiplyAdd { kFmaF32, kDotBf16, kDotInt8 };
enum class VectorWidth { kYmm, kZmm };

inline std::string_view MultiplyAddName(MultiplyAdd op) {
  switch (op) {
    case MultiplyAdd::kFmaF32:
      return "vfmadd231ps";
    case MultiplyAdd::kDotBf16:
      return "vdpbf16ps";
    case MultiplyAdd::kDotInt8:
      return "vpdpbusd";
  }
  return "";
}

// Multiply-adds one instruction does: 16 f32 lanes of a zmm, each lane 1 (FMA), 2 (BF16 pairs)
// or 4 (int8 quads) products.
inline int MultiplyAddsPerInstruction(MultiplyAdd op, VectorWidth width) {
  const int lanes = width == VectorWidth::kZmm ? 16 : 8;
  return lanes * (op == MultiplyAdd::kFmaF32 ? 1 : op == MultiplyAdd::kDotBf16 ? 2 : 4);
}

// Whether this CPU decodes the instruction at that width (the ymm forms of the AVX-512
// instructions need AVX512VL; vpdpbusd ymm also exists as AVX-VNNI).
inline bool CanRun(MultiplyAdd op, VectorWidth width, const cpu::CpuFeatures& f) {
  const bool zmm = width == VectorWidth::kZmm;
  switch (op) {
    case MultiplyAdd::kFmaF32:
      return zmm ? f.avx512f : f.Avx2Fma();
    case MultiplyAdd::kDotBf16:
      return f.avx512_bf16 && (zmm || f.avx512vl);
    case MultiplyAdd::kDotInt8:
      return zmm ? f.avx512_vnni : (f.avx512_vnni && f.avx512vl) || f.avx_vnni;
  }
  return false;
}

namespace detail {

// clang-format off
// One instruction into accumulator register n.
#define DSCALE_RATE_1(op, src, reg, n) op " " src ", %%" reg #n "\n\t"
// 12 accumulators: registers 0-11, or 12-23.
#define DSCALE_RATE_12(op, src, reg)                                                            \
  DSCALE_RATE_1(op, src, reg, 0)  DSCALE_RATE_1(op, src, reg, 1)  DSCALE_RATE_1(op, src, reg, 2)  \
  DSCALE_RATE_1(op, src, reg, 3)  DSCALE_RATE_1(op, src, reg, 4)  DSCALE_RATE_1(op, src, reg, 5)  \
  DSCALE_RATE_1(op, src, reg, 6)  DSCALE_RATE_1(op, src, reg, 7)  DSCALE_RATE_1(op, src, reg, 8)  \
  DSCALE_RATE_1(op, src, reg, 9)  DSCALE_RATE_1(op, src, reg, 10) DSCALE_RATE_1(op, src, reg, 11)
#define DSCALE_RATE_12_HIGH(op, src, reg)                                                       \
  DSCALE_RATE_1(op, src, reg, 12) DSCALE_RATE_1(op, src, reg, 13) DSCALE_RATE_1(op, src, reg, 14) \
  DSCALE_RATE_1(op, src, reg, 15) DSCALE_RATE_1(op, src, reg, 16) DSCALE_RATE_1(op, src, reg, 17) \
  DSCALE_RATE_1(op, src, reg, 18) DSCALE_RATE_1(op, src, reg, 19) DSCALE_RATE_1(op, src, reg, 20) \
  DSCALE_RATE_1(op, src, reg, 21) DSCALE_RATE_1(op, src, reg, 22) DSCALE_RATE_1(op, src, reg, 23)
// 24 accumulators (registers 0-23), the sources in registers 30 and 31 (EVEX forms).
#define DSCALE_RATE_24(op, src, reg) DSCALE_RATE_12(op, src, reg) DSCALE_RATE_12_HIGH(op, src, reg)
// The VEX forms reach registers 0-15 only: 12 accumulators, each taking two of the 24.
#define DSCALE_RATE_12X2(op, src, reg) DSCALE_RATE_12(op, src, reg) DSCALE_RATE_12(op, src, reg)

#define DSCALE_CLOBBER_ZMM                                                                     \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
  "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",     \
  "xmm21", "xmm22", "xmm23", "xmm30", "xmm31"
#define DSCALE_CLOBBER_YMM                                                                     \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
  "xmm11", "xmm14", "xmm15"
// clang-format on

// `iterations` × 24 instructions. The accumulators start from whatever the registers hold: the
// rate of these instructions does not depend on the values (no denormal assists on this path:
// the sources are zeroed).
#define DSCALE_RATE_LOOP(name, isa, zero, body, clobbers)                                          \
  __attribute__((target(isa))) inline void name(int64_t iterations) {                              \
    asm volatile(zero "1:\n\t" body "dec %0\n\tjnz 1b\n\t" : "+r"(iterations) : : "cc", clobbers); \
  }

#define DSCALE_ZERO_EVEX "vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"
#define DSCALE_ZERO_VEX "vpxor %%ymm14, %%ymm14, %%ymm14\n\tvpxor %%ymm15, %%ymm15, %%ymm15\n\t"

DSCALE_RATE_LOOP(FmaZmm, "avx512f", DSCALE_ZERO_EVEX,
                 DSCALE_RATE_24("vfmadd231ps", "%%zmm30, %%zmm31", "zmm"), DSCALE_CLOBBER_ZMM)
DSCALE_RATE_LOOP(FmaYmm, "avx2,fma", DSCALE_ZERO_VEX,
                 DSCALE_RATE_12X2("vfmadd231ps", "%%ymm14, %%ymm15", "ymm"), DSCALE_CLOBBER_YMM)
DSCALE_RATE_LOOP(DotBf16Zmm, "avx512f,avx512bf16", DSCALE_ZERO_EVEX,
                 DSCALE_RATE_24("vdpbf16ps", "%%zmm30, %%zmm31", "zmm"), DSCALE_CLOBBER_ZMM)
DSCALE_RATE_LOOP(DotBf16Ymm, "avx512f,avx512vl,avx512bf16", DSCALE_ZERO_EVEX,
                 DSCALE_RATE_24("vdpbf16ps", "%%ymm30, %%ymm31", "ymm"), DSCALE_CLOBBER_ZMM)
DSCALE_RATE_LOOP(DotInt8Zmm, "avx512f,avx512vnni", DSCALE_ZERO_EVEX,
                 DSCALE_RATE_24("vpdpbusd", "%%zmm30, %%zmm31", "zmm"), DSCALE_CLOBBER_ZMM)
DSCALE_RATE_LOOP(DotInt8YmmEvex, "avx512f,avx512vl,avx512vnni", DSCALE_ZERO_EVEX,
                 DSCALE_RATE_24("vpdpbusd", "%%ymm30, %%ymm31", "ymm"), DSCALE_CLOBBER_ZMM)
DSCALE_RATE_LOOP(DotInt8YmmVex, "avx2,avxvnni", DSCALE_ZERO_VEX,
                 DSCALE_RATE_12X2("%{vex%} vpdpbusd", "%%ymm14, %%ymm15", "ymm"),
                 DSCALE_CLOBBER_YMM)

#undef DSCALE_RATE_LOOP
#undef DSCALE_RATE_24
#undef DSCALE_RATE_12X2
#undef DSCALE_RATE_12
#undef DSCALE_RATE_12_HIGH
#undef DSCALE_RATE_1
#undef DSCALE_CLOBBER_ZMM
#undef DSCALE_CLOBBER_YMM
#undef DSCALE_ZERO_EVEX
#undef DSCALE_ZERO_VEX

constexpr int64_t kInstructionsPerIteration = 24;

using RateLoop = void (*)(int64_t);

inline RateLoop RateLoopFor(MultiplyAdd op, VectorWidth width, const cpu::CpuFeatures& f) {
  const bool zmm = width == VectorWidth::kZmm;
  switch (op) {
    case MultiplyAdd::kFmaF32:
      return zmm ? FmaZmm : FmaYmm;
    case MultiplyAdd::kDotBf16:
      return zmm ? DotBf16Zmm : DotBf16Ymm;
    case MultiplyAdd::kDotInt8:
      if (zmm) return DotInt8Zmm;
      return f.avx512_vnni && f.avx512vl ? DotInt8YmmEvex : DotInt8YmmVex;
  }
  return nullptr;
}

}  // namespace detail

// Instructions per second that `threads` threads (each its own loop, started together) retire
// of `op` at `width`, the best of 5 trials of about 0.1 s each; the caller checks CanRun first.
inline double InstructionRate(MultiplyAdd op, VectorWidth width, int threads) {
  const detail::RateLoop loop = detail::RateLoopFor(op, width, cpu::DetectedCpuFeatures());
  constexpr int64_t kIterations = 4'000'000;  // ~0.05-0.2 s at 0.5-2 G instructions a second
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    loop(kIterations);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, threads * kIterations * detail::kInstructionsPerIteration / s);
  }
  return best;
}

}  // namespace dscale::bench
