#pragma once
// How many distinct experts a request's consecutive rows wake: for m = 1, 2, 4, … 256, the
// distinct experts among the first m rows of every span of at least m rows, summed over the spans
// and a mixture of experts' sparse layers. A prefill chunk or a verified block is such a span, so
// the sums say how much a request's own rows share experts (consecutive tokens of one text route
// alike) before any draft row is verified: what the auto budget prices draft rows by, up to 16
// rows, and what a prompt chunk riding in a verify pass wakes, past them
// (budget/expert_cost_model.h).

#include <array>
#include <cstdint>

namespace dscale {

struct ExpertOccupancy {
  static constexpr int kPoints = 9;
  static constexpr std::array<int32_t, kPoints> kRows = {1, 2, 4, 8, 16, 32, 64, 128, 256};

  std::array<double, kPoints> distinct{};  // Σ over (span, sparse layer) of the distinct experts
  std::array<int64_t, kPoints> count{};    // (span, sparse layer) pairs summed

  void Add(const ExpertOccupancy& other) {
    for (int i = 0; i < kPoints; ++i) {
      distinct[static_cast<size_t>(i)] += other.distinct[static_cast<size_t>(i)];
      count[static_cast<size_t>(i)] += other.count[static_cast<size_t>(i)];
    }
  }
  bool empty() const { return count[0] == 0; }
};

}  // namespace dscale
