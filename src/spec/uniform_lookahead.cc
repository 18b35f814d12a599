#include "spec/uniform_lookahead.h"

#include <algorithm>

#include "core/check.h"

namespace dscale {

void UniformLookahead::DrawAhead(int64_t n) {
  if (ahead() >= n) return;
  // Drop the consumed prefix before growing, so the buffer stays as long as the longest peek.
  drawn_.erase(drawn_.begin(), drawn_.begin() + static_cast<std::ptrdiff_t>(next_));
  next_ = 0;
  while (ahead() < n) drawn_.push_back(rng_.Uniform());
}

void UniformLookahead::Peek(std::span<double> out) {
  DrawAhead(static_cast<int64_t>(out.size()));
  std::copy_n(drawn_.begin() + static_cast<std::ptrdiff_t>(next_), out.size(), out.begin());
}

void UniformLookahead::Consume(int64_t n) {
  DSCALE_CHECK_MSG(n >= 0, "Consume: n must be non-negative");
  DrawAhead(n);
  next_ += static_cast<size_t>(n);
}

double UniformLookahead::Uniform() {
  if (ahead() == 0) return rng_.Uniform();  // nothing read ahead: the stream itself
  return drawn_[next_++];
}

}  // namespace dscale
