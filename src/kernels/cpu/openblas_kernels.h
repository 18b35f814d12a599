#pragma once
// OpenBLAS picks its kernel family once, when the library is loaded, from the CPU models it
// knows. Debian 12's OpenBLAS 0.3.21 predates AVX-512 on AMD (Zen 4, Zen 5) and gives those CPUs
// its AVX2 (Haswell) kernels, whose sgemm runs at about half the rate of its AVX-512 (SkylakeX)
// kernels there: 226 against 422 GFLOP/s on the 2-vCPU EPYC of docs/BENCHMARKS.md. Only the
// environment variable OPENBLAS_CORETYPE, read at load time, changes the choice, so a program
// that wants the faster kernels runs itself again with it set.

#include <string>
#include <string_view>

namespace dscale::cpu {

// The kernel family OpenBLAS chose at load time (openblas_get_corename), e.g. "Haswell".
std::string OpenBlasCoreName();

// The OPENBLAS_CORETYPE value that would give this CPU faster kernels than the loaded library
// chose ("SkylakeX" for an AVX-512 CPU given AVX2 kernels), or "" when the choice is right.
std::string BetterOpenBlasCoreType();
// The rule behind it: `chosen` is OpenBLAS's core name (any case), `has_avx512` whether the CPU
// has what the SkylakeX kernels use (AVX-512 F, CD, BW, DQ and VL).
std::string BetterOpenBlasCoreType(std::string_view chosen, bool has_avx512);

// When BetterOpenBlasCoreType() names a family and OPENBLAS_CORETYPE is unset, sets it and
// replaces this process with a fresh run of the same executable and arguments. Returns when it
// does not (nothing to change, the user set OPENBLAS_CORETYPE, or exec failed: the program then
// runs on as it is).
void ReexecForFasterOpenBlasKernels(char** argv);

}  // namespace dscale::cpu
