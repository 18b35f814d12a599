// Parity of the CUDA greedy acceptance over packed ragged rows with the CPU prefix verifier
// (spec/prefix_verifier.h, VerifyGreedy). Every test skips where no CUDA device is usable.
//
// Acceptance compares integers only: the argmax (ties to the lowest index on both sides, no
// arithmetic) and token equality, so the results must be exactly the CPU's.

#include "kernels/cuda/greedy_accept.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/dvl_shapes.h"
#include "cuda/cuda_test_util.h"
#include "cuda/dvl_test_util.h"
#include "dvl/flat_pack.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/softmax.h"
#include "kernels/kernel_test_util.h"
#include "spec/prefix_verifier.h"

namespace dscale {
namespace {

using dvl::kBlockWidth;
using testing::CudaTest;
using testing::PoisonedBuffer;
using testing::RandomNormal;

struct AcceptCase {
  int64_t n;
  int64_t vocab;
};

class CudaGreedyAcceptTest : public CudaTest {};

// Per request a random length k_i and a planned accepted count a_i < k_i: the drafts copy the
// target's argmax for a_i rows, then (if a_i < k_i − 1) differ from it. The rows are packed by
// the CPU packer into a bucket with sentinels, the logits cover every packed row (tail too), and
// the device takes the argmax of each row and verifies.
TEST_F(CudaGreedyAcceptTest, MatchesCpuVerifyGreedyOnPackedRows) {
  std::vector<AcceptCase> cases;
  for (const int64_t n : {1, 3, 7, 19, 33}) {
    for (const int64_t vocab : {17, 300, 4160}) cases.push_back({n, vocab});
  }
  std::mt19937 rng(501);
  for (const AcceptCase& ac : cases) {
    SCOPED_TRACE(::testing::Message() << "n=" << ac.n << " vocab=" << ac.vocab);
    dvl::BucketConfig config;
    config.verify_budget = 1.0;                                           // room for any lengths
    const int32_t bucket = *dvl::SelectBucket(config.buckets, ac.n + 1);  // ≥ 1 sentinel
    const int64_t capacity = dvl::BucketCapacity(config, bucket);

    std::uniform_int_distribution<int32_t> length(1, kBlockWidth);
    std::vector<int32_t> k(ac.n);
    for (int32_t& ki : k) ki = length(rng);
    std::vector<int32_t> offsets(ac.n + 1, 0);
    for (int64_t i = 0; i < ac.n; ++i) offsets[i + 1] = offsets[i] + k[i];

    // Logits of every packed row, and the target's argmax there.
    const std::vector<float> logits = RandomNormal(rng, capacity * ac.vocab, 0.0f, 2.0f);
    std::vector<int32_t> argmax(capacity);
    cpu::ArgmaxRows(logits.data(), capacity, ac.vocab, argmax.data());

    // Draft blocks whose drafts follow the argmax for a planned number of rows.
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(ac.vocab) - 1);
    std::vector<int32_t> tokens(ac.n * kBlockWidth), positions(ac.n * kBlockWidth);
    std::vector<int32_t> kv_slots(ac.n * kBlockWidth);
    for (int64_t i = 0; i < ac.n; ++i) {
      std::uniform_int_distribution<int32_t> planned(0, k[i] - 1);
      const int32_t accept = planned(rng);
      for (int j = 0; j < kBlockWidth; ++j) {
        const int64_t cell = i * kBlockWidth + j;
        tokens[cell] = token(rng);
        positions[cell] = 10 * static_cast<int32_t>(i) + j;
        kv_slots[cell] = 1000 * static_cast<int32_t>(i) + j;
        if (j == 0 || j >= k[i]) continue;
        const int32_t row_argmax = argmax[offsets[i] + j - 1];  // predicts block row j
        if (j <= accept) tokens[cell] = row_argmax;
        if (j == accept + 1) tokens[cell] = (row_argmax + 1) % static_cast<int32_t>(ac.vocab);
      }
    }
    dvl::BucketStep ws(bucket, capacity, kBlockWidth);
    ASSERT_TRUE(dvl::Pack(testing::BlocksFromRows(ac.n, kBlockWidth, tokens, positions, kv_slots),
                          std::span(k).first(static_cast<size_t>(ac.n)), &ws)
                    .ok());

    // CPU: VerifyGreedy on each request's rows of the packed logits.
    std::vector<int32_t> want_accepted(bucket, 0), want_next(bucket, -1);
    const std::span<const float> all_logits(logits);
    for (int64_t i = 0; i < ac.n; ++i) {
      const int32_t first = ws.offsets()[i];
      const int32_t rows = ws.k()[i];
      const VerifyResult r =
          VerifyGreedy(all_logits.subspan(first * ac.vocab, rows * ac.vocab), ac.vocab,
                       ws.batch().token_storage().subspan(first + 1, rows - 1));
      want_accepted[i] = r.accepted;
      want_next[i] = r.next_token;
    }

    // Device: argmax of every packed row, then acceptance from k and offsets.
    auto d_logits = ToDevice(logits);
    auto d_argmax = PoisonedBuffer<int32_t>(capacity);
    cuda::ArgmaxRows(d_logits.data(), capacity, ac.vocab, d_argmax.data(), stream_);
    auto d_tokens = ToDevice(
        std::vector<int32_t>(ws.batch().token_storage().begin(), ws.batch().token_storage().end()));
    auto d_k = ToDevice(std::vector<int32_t>(ws.k().begin(), ws.k().end()));
    auto d_offsets = ToDevice(std::vector<int32_t>(ws.offsets().begin(), ws.offsets().end()));
    auto d_accepted = PoisonedBuffer<int32_t>(bucket);
    auto d_next = PoisonedBuffer<int32_t>(bucket);
    cuda::VerifyGreedyPacked(d_argmax.data(), d_tokens.data(), d_k.data(), d_offsets.data(), bucket,
                             d_accepted.data(), d_next.data(), stream_);
    EXPECT_EQ(ToHost(d_argmax), argmax);
    EXPECT_EQ(ToHost(d_accepted), want_accepted);
    EXPECT_EQ(ToHost(d_next), want_next);
  }
}

// Hand-made rows: every draft accepted (bonus from the last row), a rejection at the first
// draft, the anchor alone, and a sentinel.
TEST_F(CudaGreedyAcceptTest, AcceptsTheMatchingPrefixAndMarksSentinels) {
  // Request 0: 4 rows, drafts 5 6 7 all match; request 1: 3 rows, first draft wrong;
  // request 2: anchor only; request 3: sentinel.
  const std::vector<int32_t> tokens = {1, 5, 6, 7, /**/ 2, 9, 9, /**/ 3};
  const std::vector<int32_t> argmax = {5, 6, 7, 8, /**/ 4, 9, 9, /**/ 11};
  const std::vector<int32_t> k = {4, 3, 1, 0};
  const std::vector<int32_t> offsets = {0, 4, 7, 8, 8};
  auto d_tokens = ToDevice(tokens), d_argmax = ToDevice(argmax), d_k = ToDevice(k);
  auto d_offsets = ToDevice(offsets);
  auto d_accepted = PoisonedBuffer<int32_t>(4), d_next = PoisonedBuffer<int32_t>(4);
  cuda::VerifyGreedyPacked(d_argmax.data(), d_tokens.data(), d_k.data(), d_offsets.data(), 4,
                           d_accepted.data(), d_next.data(), stream_);
  EXPECT_EQ(ToHost(d_accepted), (std::vector<int32_t>{3, 0, 0, 0}));
  EXPECT_EQ(ToHost(d_next), (std::vector<int32_t>{8, 4, 11, -1}));
}

}  // namespace
}  // namespace dscale
