// The uniform lookahead keeps a request's random stream exactly RequestRng's, however peeks and
// consumption interleave, and lets a verifier that only sees peeked uniforms (the device's)
// reach the CPU verifier's results with the stream left where the CPU would leave it.

#include "spec/uniform_lookahead.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dvl_shapes.h"
#include "spec/prefix_verifier.h"
#include "spec/sampling.h"

namespace dscale {
namespace {

using dvl::kBlockWidth;

TEST(UniformLookaheadTest, UniformIsTheRequestStream) {
  RequestRng rng(42);
  UniformLookahead lookahead(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(lookahead.Uniform(), rng.Uniform()) << "draw " << i;
  EXPECT_EQ(lookahead.ahead(), 0);
}

TEST(UniformLookaheadTest, PeekDoesNotConsume) {
  RequestRng rng(7);
  std::array<double, 5> want{};
  for (double& u : want) u = rng.Uniform();

  UniformLookahead lookahead(7);
  std::array<double, 3> first{};
  std::array<double, 5> again{};
  lookahead.Peek(first);
  lookahead.Peek(again);  // longer than the first peek: draws two more
  EXPECT_TRUE(std::equal(first.begin(), first.end(), want.begin()));
  EXPECT_EQ(again, want);
  EXPECT_EQ(lookahead.ahead(), 5);
  EXPECT_EQ(lookahead.Uniform(), want[0]);
  lookahead.Consume(2);
  EXPECT_EQ(lookahead.ahead(), 2);
  EXPECT_EQ(lookahead.Uniform(), want[3]);
  lookahead.Consume(3);  // one peeked, two never drawn before
  EXPECT_EQ(lookahead.ahead(), 0);
  for (int i = 0; i < 2; ++i) rng.Uniform();
  EXPECT_EQ(lookahead.Uniform(), rng.Uniform());
}

// Interleaved peeks of random lengths, partial consumption and pops: the popped values are the
// stream's, in order.
TEST(UniformLookaheadTest, RandomInterleavingKeepsTheStream) {
  RequestRng rng(99);
  UniformLookahead lookahead(99);
  std::mt19937 choice(3);
  std::uniform_int_distribution<int> op(0, 2), length(0, 20);
  for (int step = 0; step < 2000; ++step) {
    const int n = length(choice);
    switch (op(choice)) {
      case 0: {
        std::vector<double> peeked(n);
        lookahead.Peek(peeked);
        ASSERT_GE(lookahead.ahead(), n);
        break;
      }
      case 1:
        lookahead.Consume(n);
        for (int i = 0; i < n; ++i) rng.Uniform();
        break;
      default:
        ASSERT_EQ(lookahead.Uniform(), rng.Uniform()) << "step " << step;
    }
  }
}

// Random logits over a small vocabulary, rows k in [1, W], drafts planted as the row's argmax
// (likely accepted) up to a planned point and random after it, and parameters cycling through
// temperatures and filters.
struct VerifyCase {
  int64_t vocab = 0;
  std::vector<float> logits;  // [k, vocab]
  std::vector<int32_t> drafts;
  SamplingParams params;
};

VerifyCase RandomCase(std::mt19937& rng, int index) {
  constexpr float kTemperatures[] = {0.3f, 0.7f, 1.0f, 1.5f};
  VerifyCase c;
  c.vocab = 50;
  const int k = std::uniform_int_distribution<int>(1, kBlockWidth)(rng);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  c.logits.resize(k * c.vocab);
  for (float& l : c.logits) l = logit(rng);
  const int planned = std::uniform_int_distribution<int>(0, k - 1)(rng);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab) - 1);
  for (int j = 0; j + 1 < k; ++j) {
    const auto row = c.logits.begin() + j * c.vocab;
    const auto argmax = static_cast<int32_t>(std::max_element(row, row + c.vocab) - row);
    c.drafts.push_back(j < planned ? argmax : token(rng));
  }
  c.params.temperature = kTemperatures[index % 4];
  if (index / 4 % 4 == 1 || index / 4 % 4 == 3) c.params.top_k = 1 + index % 9;
  if (index / 4 % 4 >= 2) c.params.top_p = 0.6f;
  return c;
}

// VerifySampled drawing from a request's RequestRng, against the same call replaying
// uniforms peeked from a UniformLookahead of the same seed and then consuming the ones used:
// the same results, the documented count of uniforms used, and the same stream afterwards,
// over several steps of each request.
TEST(UniformLookaheadTest, ReplayedPeekedUniformsMatchVerifySampled) {
  std::mt19937 rng(2024);
  std::vector<double> probs;
  int accepted_all = 0, rejected = 0;
  for (int request = 0; request < 64; ++request) {
    const uint64_t seed = 1000 + request;
    RequestRng stream(seed);
    UniformLookahead lookahead(seed);
    for (int step = 0; step < 4; ++step) {
      SCOPED_TRACE(::testing::Message() << "request " << request << " step " << step);
      const VerifyCase c = RandomCase(rng, request + step);
      const auto k = static_cast<int32_t>(c.drafts.size()) + 1;
      const VerifyResult want =
          VerifySampled(c.logits, c.vocab, c.drafts, c.params, stream, &probs);

      std::array<double, kBlockWidth> peeked{};  // the most one verification can use
      lookahead.Peek(peeked);
      int64_t used = 0;
      const VerifyResult got = VerifySampled(
          c.logits, c.vocab, c.drafts, c.params,
          [&] {
            EXPECT_LT(used, kBlockWidth) << "more uniforms than a block can use";
            return peeked[std::min<int64_t>(used++, kBlockWidth - 1)];
          },
          &probs);
      lookahead.Consume(used);

      EXPECT_EQ(got.accepted, want.accepted);
      EXPECT_EQ(got.next_token, want.next_token);
      EXPECT_EQ(used, want.accepted == k - 1 ? k : want.accepted + 2);
      (want.accepted == k - 1 ? accepted_all : rejected) += 1;
      // The next uniform of each stream: the lookahead is where the request's RNG is.
      std::array<double, 1> next{};
      lookahead.Peek(next);
      RequestRng probe = stream;
      EXPECT_EQ(next[0], probe.Uniform());
    }
  }
  // Both outcomes occurred, so both consumption counts were checked.
  EXPECT_GT(accepted_all, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace dscale
