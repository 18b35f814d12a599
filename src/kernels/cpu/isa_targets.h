#pragma once
// The instruction sets the kernels' variants are compiled for, whatever the build's baseline
// (sanitizer and debug builds target plain x86-64), one definition each (module-private). A
// function so marked runs only where the CPU has the set (cpu_features.h says which CPUs do):
// its callers dispatch on CpuFeatures, never on the build's flags.

// AVX2 + FMA: the 256-bit variants (Bf16Isa::kAvx2, Int8DotIsa::kAvx2; CpuFeatures::Avx2Fma()).
#define DSCALE_AVX2_TARGETS "avx2,fma"
#define DSCALE_AVX2 __attribute__((target(DSCALE_AVX2_TARGETS)))

// AVX-512 F + BW: the 512-bit variants (Bf16Isa::kAvx512; CpuFeatures::Avx512()) and the AMX
// kernels' vector parts (every AMX CPU has them).
#define DSCALE_AVX512_TARGETS "avx512f,avx512bw"
#define DSCALE_AVX512 __attribute__((target(DSCALE_AVX512_TARGETS)))

// AVX512-BF16's dot products (Bf16DotIsa::kAvx512Bf16).
#define DSCALE_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

// The VNNI dot products of the int8 × int8 tiles: 256-bit (Int8DotIsa::kAvxVnni) and 512-bit
// (Int8DotIsa::kAvx512Vnni), each beside the AVX2 helpers they share (int8_avx2.h).
#define DSCALE_AVXVNNI __attribute__((target("avx2,fma,avxvnni")))
#define DSCALE_AVX512VNNI __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vnni")))

// AMX: the tile configuration alone, and the tile products of the BF16 and int8 kernels (the
// int8 one folds its sums with AVX-512 F).
#define DSCALE_AMX_TILE __attribute__((target("amx-tile")))
#define DSCALE_AMX_BF16 __attribute__((target("amx-tile,amx-bf16")))
#define DSCALE_AMX_INT8 __attribute__((target("amx-tile,amx-int8,avx512f")))

// Every function from here to the end of the file (DSCALE_END_TARGET_FILE() under Clang) compiled
// for `targets`, one of the *_TARGETS strings above: a file that compiles shared templates for a
// wider target (attention_avx512.cc). Clang has no GCC target pragma: it applies the attribute.
#define DSCALE_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define DSCALE_BEGIN_TARGET_FILE(targets) \
  DSCALE_PRAGMA(clang attribute push(__attribute__((target(targets))), apply_to = function))
#define DSCALE_END_TARGET_FILE() DSCALE_PRAGMA(clang attribute pop)
#else
#define DSCALE_BEGIN_TARGET_FILE(targets) DSCALE_PRAGMA(GCC target(targets))
#define DSCALE_END_TARGET_FILE()
#endif
