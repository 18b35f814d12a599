#pragma once
// Error bounds for comparing float results whose operands come from different computation
// orders (BLAS blockings of different row counts, SIMD widths, thread counts). A comparison
// that uses one of these fails only on a wrong result, never on rounding, on any CPU.
//
// The bounds are the classical worst-case ones (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., §3.1): a float32 sum or dot product of n terms, evaluated in any order
// and with or without fused multiply-adds, is within γ_n·Σ|terms| of the exact value, where
// γ_n = n·u / (1 − n·u) and u = 2^-24 is the unit roundoff.

#include <cstdint>
#include <limits>

namespace dscale::testing {

// u: half the float machine epsilon.
inline constexpr double kFloatUnitRoundoff = std::numeric_limits<float>::epsilon() / 2.0;

// γ_n for float32 arithmetic.
constexpr double FloatGamma(int64_t n) {
  const double nu = static_cast<double>(n) * kFloatUnitRoundoff;
  return nu / (1.0 - nu);
}

// The largest |a − b| for two float32 evaluations, in any two orders, of one dot product of
// n terms whose magnitudes sum to abs_mass = Σ|x_i·y_i|: each is within γ_n·abs_mass of the
// exact value.
constexpr double DotProductOrderBound(int64_t n, double abs_mass) {
  return 2.0 * FloatGamma(n) * abs_mass;
}

}  // namespace dscale::testing
