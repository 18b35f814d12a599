#pragma once
// A request's committed rows that wait on the host to join its draft context. While the auto
// budget decodes plainly and keeps a request's draft context for its next probe, feeding each
// plain step's one row would read the drafter's context weights (its feature projection and every
// layer's K/V projection) once per token; held instead, the rows join the context in one call
// right before the request drafts again, one read of those weights for all of them. A row's K/V
// do not depend on the rows beside it (every kernel is row-invariant), so the drafter holds the
// same bits either way.

#include <cstdint>
#include <span>
#include <vector>

#include "backend/step_backend.h"
#include "model/drafter.h"

namespace dscale {

class HeldContext {
 public:
  // Rows a request holds at most: past this they join the context at once (a bound on the
  // memory a long plain stretch takes, K · target hidden floats a row).
  static constexpr int32_t kMaxRows = 64;

  // Copies rows [first, first + count) of `pass` (a host pass that captured the drafter's
  // feature layers, `width` = K · target hidden floats a row, 0 for a drafter that reads none):
  // their features, positions and KV slots.
  void Hold(const TargetPass& pass, int64_t width, int32_t first, int32_t count);
  int32_t rows() const { return static_cast<int32_t>(positions_.size()); }
  bool empty() const { return positions_.empty(); }
  void Clear();

  // Every request's held rows to `drafter` in one AppendContext call (`scratch` holds them
  // together where there are several), in the order given; each HeldContext is emptied. Returns
  // the rows appended.
  static int64_t Release(std::span<HeldContext* const> held, Drafter& drafter,
                         HeldContext& scratch);

 private:
  std::vector<float> features_;     // [rows, width]
  std::vector<int32_t> positions_;  // [rows]
  std::vector<int32_t> slots_;      // [rows]
};

}  // namespace dscale
