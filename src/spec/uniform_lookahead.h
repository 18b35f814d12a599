#pragma once
// A request's random stream with read-ahead, for verifiers that consume uniforms somewhere the
// stream cannot be drawn (on the device). The host peeks the next few uniforms and hands them
// over; once the verifier reports how many it used, the host consumes exactly that many. The
// stream the request sees is then the one RequestRng (sampling.h) would have produced had the
// CPU verifier drawn the same uniforms itself: Uniform() returns RequestRng(seed)'s draws in
// order, however the calls interleave with Peek and Consume.

#include <cstdint>
#include <span>
#include <vector>

#include "spec/sampling.h"

namespace dscale {

class UniformLookahead {
 public:
  explicit UniformLookahead(uint64_t seed) : rng_(seed) {}

  // Copies the next out.size() uniforms of the stream into `out` without consuming them,
  // drawing those not drawn yet; a later Peek or Uniform sees the same values again.
  void Peek(std::span<double> out);

  // Consumes the next n ≥ 0 uniforms, as n calls of Uniform() would (drawing any not peeked).
  void Consume(int64_t n);

  // Consumes and returns the next uniform of the stream.
  double Uniform();

  // Uniforms drawn by a Peek and not consumed yet.
  int64_t ahead() const { return static_cast<int64_t>(drawn_.size() - next_); }

 private:
  // Draws until at least n uniforms are ahead.
  void DrawAhead(int64_t n);

  RequestRng rng_;
  std::vector<double> drawn_;  // drawn_[next_ ..] are ahead; earlier entries are consumed
  size_t next_ = 0;
};

}  // namespace dscale
