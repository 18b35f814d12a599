#include "engine/held_context.h"

#include "core/check.h"

namespace dscale {

void HeldContext::Hold(const TargetPass& pass, int64_t width, int32_t first, int32_t count) {
  DSCALE_CHECK(!pass.on_device() && pass.out != nullptr && width >= 0);
  const std::span<const float> features =
      std::span(pass.out->features).subspan(first * width, count * width);
  features_.insert(features_.end(), features.begin(), features.end());
  const std::span<const int32_t> positions = pass.rows->positions().subspan(first, count);
  const std::span<const int32_t> slots = pass.rows->kv_slots().subspan(first, count);
  positions_.insert(positions_.end(), positions.begin(), positions.end());
  slots_.insert(slots_.end(), slots.begin(), slots.end());
}

void HeldContext::Clear() {
  features_.clear();
  positions_.clear();
  slots_.clear();
}

int64_t HeldContext::Release(std::span<HeldContext* const> held, Drafter& drafter,
                             HeldContext& scratch) {
  if (held.size() == 1) {  // one request (the usual case): its rows as they lie
    HeldContext& h = *held[0];
    const int64_t rows = h.rows();
    if (rows > 0) {
      drafter.AppendContext(
          {.features = h.features_, .positions = h.positions_, .slots = h.slots_});
    }
    h.Clear();
    return rows;
  }
  scratch.Clear();
  for (HeldContext* h : held) {
    scratch.features_.insert(scratch.features_.end(), h->features_.begin(), h->features_.end());
    scratch.positions_.insert(scratch.positions_.end(), h->positions_.begin(), h->positions_.end());
    scratch.slots_.insert(scratch.slots_.end(), h->slots_.begin(), h->slots_.end());
    h->Clear();
  }
  if (scratch.empty()) return 0;
  drafter.AppendContext(
      {.features = scratch.features_, .positions = scratch.positions_, .slots = scratch.slots_});
  const int64_t rows = scratch.rows();
  scratch.Clear();
  return rows;
}

}  // namespace dscale
