// Parity of the CUDA budget allocator and flat-pack with the CPU reference
// (dvl/budget_allocator.h, dvl/flat_pack.h). Every test skips where no CUDA device is usable.
//
// Given the same prefix scores q — the CPU's bytes, uploaded — the device allocator must give
// the same bits: seeds, lengths, offsets and the update count, with ties (plentiful here, from
// logits on a coarse grid) going to the lowest request index. Given the same lengths, the
// device packer must write the same bits into every array of the bucket, sentinels and tail
// placeholders included. From logits, q itself passes through expf and may differ in the last
// bits; that case is tested separately, on inputs where such noise cannot decide a comparison.

#include "device_dvl/dvl_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/dvl_shapes.h"
#include "cuda/cuda_test_util.h"
#include "cuda/dvl_test_util.h"
#include "dvl/budget_allocator.h"
#include "dvl/flat_pack.h"
#include "kernels/cuda/dvl_pack.h"
#include "kernels/kernel_test_util.h"

namespace dscale {
namespace {

using dvl::kBlockWidth;
using dvl::kDraftPositions;
using testing::CudaTest;
using testing::DeviceStep;
using testing::PoisonedBuffer;

constexpr int64_t kLiveCounts[] = {1, 3, 7, 19, 33};
// Launches cover this many requests past the live ones, as a bucket does.
constexpr int64_t kExtraRequests = 4;

// Predictor logits on the grid {k / steps_per_unit : |k| ≤ units · steps_per_unit}.
std::vector<float> GridLogits(std::mt19937& rng, int64_t count, int steps_per_unit, int units) {
  std::uniform_int_distribution<int> pick(-units * steps_per_unit, units * steps_per_unit);
  std::vector<float> logits(count);
  for (float& x : logits) x = static_cast<float>(pick(rng)) / static_cast<float>(steps_per_unit);
  return logits;
}

// Budgets that exercise both loops to their extremes: N (every length shrinks to 1), W·N
// (every length grows to W), and fractions around the default half.
std::vector<int64_t> Budgets(int64_t n) {
  std::vector<int64_t> budgets = {n, kBlockWidth * n};
  for (const double fraction : {0.25, 0.5, 0.8}) {
    budgets.push_back(*dvl::BudgetFromFraction(n, kBlockWidth, fraction));
  }
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  return budgets;
}

struct AllocationResult {
  std::vector<int32_t> seed;     // [n]
  std::vector<int32_t> k;        // [n]
  std::vector<int32_t> offsets;  // [n + 1]
  int32_t updates = 0;
};

AllocationResult CpuAllocation(const std::vector<float>& q, int64_t n, int64_t budget) {
  AllocationResult r;
  r.seed.resize(n);
  r.k.resize(n);
  r.offsets.resize(n + 1);
  r.updates = static_cast<int32_t>(dvl::AllocateInto(q.data(), n, kBlockWidth, budget,
                                                     r.seed.data(), r.k.data(), r.offsets.data()));
  return r;
}

class CudaDvlAllocatorTest : public CudaTest {
 protected:
  // Runs the device allocator over `requests` rows of q (device) with N = n, and checks that
  // nothing past the live entries was written. Returns the live entries.
  AllocationResult DeviceAllocation(const cuda::DeviceBuffer<float>& q, int64_t requests, int64_t n,
                                    int64_t budget) {
    auto step = DeviceStep(static_cast<int32_t>(n), static_cast<int32_t>(budget));
    auto seed = PoisonedBuffer<int32_t>(requests);
    auto k = PoisonedBuffer<int32_t>(requests);
    auto offsets = PoisonedBuffer<int32_t>(requests + 1);
    auto updates = PoisonedBuffer<int32_t>(1);
    cuda::AllocateInto(q.data(), requests, kBlockWidth, step.data(), seed.data(), k.data(),
                       offsets.data(), updates.data(), stream_);
    std::vector<int32_t> all_seed = ToHost(seed), all_k = ToHost(k);
    std::vector<int32_t> all_offsets = ToHost(offsets);
    for (int64_t i = n; i < requests; ++i) {
      EXPECT_EQ(all_seed[i], -1) << "seed " << i << " past the live count written";
      EXPECT_EQ(all_k[i], -1) << "k " << i << " past the live count written";
      EXPECT_EQ(all_offsets[i + 1], -1) << "offset " << i + 1 << " past the live count written";
    }
    AllocationResult r;
    r.seed.assign(all_seed.begin(), all_seed.begin() + n);
    r.k.assign(all_k.begin(), all_k.begin() + n);
    r.offsets.assign(all_offsets.begin(), all_offsets.begin() + n + 1);
    r.updates = ToHost(updates)[0];
    return r;
  }

  std::vector<float> DevicePrefixScores(const std::vector<float>& logits, int64_t requests,
                                        int64_t n) {
    auto d_logits = ToDevice(logits);
    auto step = DeviceStep(static_cast<int32_t>(n), static_cast<int32_t>(n));
    auto q = PoisonedBuffer<float>(requests * kBlockWidth);
    cuda::PrefixScoresFromLogits(d_logits.data(), requests, kBlockWidth, step.data(), q.data(),
                                 stream_);
    return ToHost(q);
  }
};

void ExpectSameAllocation(const AllocationResult& gpu, const AllocationResult& cpu) {
  EXPECT_EQ(gpu.seed, cpu.seed);
  EXPECT_EQ(gpu.k, cpu.k);
  EXPECT_EQ(gpu.offsets, cpu.offsets);
  EXPECT_EQ(gpu.updates, cpu.updates);
}

TEST_F(CudaDvlAllocatorTest, AllocationMatchesCpuBitwiseOnTheSameScores) {
  std::mt19937 rng(401);
  for (const int64_t n : kLiveCounts) {
    const int64_t requests = n + kExtraRequests;
    // Logits on a quarter grid (ties between requests and, through the cumulative minimum,
    // within rows), then the same scores with every row identical (all ties).
    std::vector<float> logits = GridLogits(rng, requests * kDraftPositions, 4, 3);
    for (const bool identical_rows : {false, true}) {
      if (identical_rows) {
        for (int64_t i = 1; i < requests; ++i) {
          std::copy_n(logits.begin(), kDraftPositions, logits.begin() + i * kDraftPositions);
        }
      }
      std::vector<float> q(requests * kBlockWidth);
      dvl::PrefixScoresFromLogits(logits.data(), requests, kBlockWidth, q.data());
      const auto d_q = ToDevice(q);
      for (const int64_t budget : Budgets(n)) {
        SCOPED_TRACE(::testing::Message()
                     << "n=" << n << " identical_rows=" << identical_rows << " budget=" << budget);
        ExpectSameAllocation(DeviceAllocation(d_q, requests, n, budget),
                             CpuAllocation(q, n, budget));
      }
    }
  }
}

// σ goes through expf (CUDA within 2 ulp, glibc within 1), so q may differ from the CPU's by a
// few ulp: |Δσ|/σ ≤ 3.6e-7 from the exponential plus four roundings of 6e-8 in 1 + e and the
// division, < 1e-6. The cumulative minimum does not enlarge an elementwise difference. NaN
// scores exactly 0 on both sides, and saturated logits give exactly 0 or 1.
TEST_F(CudaDvlAllocatorTest, PrefixScoresMatchCpuWithinExpfNoise) {
  std::mt19937 rng(402);
  for (const int64_t n : kLiveCounts) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const int64_t requests = n + kExtraRequests;
    std::vector<float> logits = testing::RandomNormal(rng, requests * kDraftPositions, 0.5f, 4.0f);
    logits[0] = std::nanf("");
    if (logits.size() > 3) {
      logits[1] = 60.0f;
      logits[2] = -60.0f;
    }
    std::vector<float> expected(requests * kBlockWidth);
    dvl::PrefixScoresFromLogits(logits.data(), n, kBlockWidth, expected.data());
    const std::vector<float> got = DevicePrefixScores(logits, requests, n);
    for (int64_t e = 0; e < n * kBlockWidth; ++e) {
      ASSERT_LE(std::fabs(got[e] - expected[e]), 1e-6 * expected[e] + 1e-38)
          << "request " << e / kBlockWidth << " score " << e % kBlockWidth;
    }
    for (int64_t e = n * kBlockWidth; e < requests * kBlockWidth; ++e) {
      ASSERT_TRUE(std::isnan(got[e])) << "score " << e << " past the live count written";
    }
  }
}

// Whether float noise of the size PrefixScoresMatchCpuWithinExpfNoise allows could change the
// allocation of these scores: two different scores closer than 1e-5 (a comparison could flip),
// or a seed sum within 1e-4 of a rounding boundary k + ½ (a seed could change). Equal logits
// give equal scores on both sides, so exact ties stay exact ties.
bool NoiseCouldDecide(const std::vector<float>& q, int64_t n) {
  std::vector<float> values(q.begin(), q.begin() + n * kBlockWidth);
  std::sort(values.begin(), values.end());
  for (size_t v = 1; v < values.size(); ++v) {
    if (values[v] != values[v - 1] && values[v] - values[v - 1] < 1e-5f) return true;
  }
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int j = 1; j < kBlockWidth; ++j) sum += q[i * kBlockWidth + j];
    if (std::fabs(sum - std::floor(sum) - 0.5) < 1e-4) return true;
  }
  return false;
}

// End to end from predictor logits, where ties could differ only through float noise in σ.
// Logits on an eighth grid in [−4, 4] keep different scores at least σ'(4)/8 ≈ 2e-3 apart,
// far beyond that noise, and the test first asserts that no score pair and no seed sum is close
// enough for the noise to matter. Then the device allocation equals the CPU's from the same
// logits; and, whatever the inputs, the device allocation equals the CPU allocator run on the
// device's own scores.
TEST_F(CudaDvlAllocatorTest, EndToEndFromLogitsAgreesWhereNoiseCannotDecide) {
  std::mt19937 rng(403);
  for (const int64_t n : kLiveCounts) {
    const int64_t requests = n + kExtraRequests;
    const std::vector<float> logits = GridLogits(rng, requests * kDraftPositions, 8, 4);
    std::vector<float> cpu_q(n * kBlockWidth);
    dvl::PrefixScoresFromLogits(logits.data(), n, kBlockWidth, cpu_q.data());
    ASSERT_FALSE(NoiseCouldDecide(cpu_q, n)) << "n=" << n << ": pick another seed";

    const std::vector<float> gpu_q = DevicePrefixScores(logits, requests, n);
    const auto d_q = ToDevice(gpu_q);
    const std::vector<float> gpu_q_live(gpu_q.begin(), gpu_q.begin() + n * kBlockWidth);
    for (const int64_t budget : Budgets(n)) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " budget=" << budget);
      const AllocationResult gpu = DeviceAllocation(d_q, requests, n, budget);
      ExpectSameAllocation(gpu, CpuAllocation(gpu_q_live, n, budget));
      const Result<dvl::Allocation> cpu = dvl::AllocateFromLogits(logits.data(), n, budget);
      ASSERT_TRUE(cpu.ok());
      EXPECT_EQ(gpu.seed, cpu->seed);
      EXPECT_EQ(gpu.k, cpu->k);
      EXPECT_EQ(gpu.offsets, cpu->offsets);
      EXPECT_EQ(gpu.updates, cpu->updates);
    }
  }
}

// One step's draft blocks for a bucket: [bucket, width] tokens, positions and KV slots. Rows of
// requests past the live count hold values too, which the packer must not read.
struct Blocks {
  std::vector<int32_t> tokens, positions, kv_slots;
};

Blocks RandomBlocks(std::mt19937& rng, int32_t bucket, int width) {
  std::uniform_int_distribution<int32_t> token(0, 151935);
  std::uniform_int_distribution<int32_t> context(0, 4000);
  Blocks b;
  for (int32_t i = 0; i < bucket; ++i) {
    const int32_t start = context(rng);
    const int32_t page = 64 * (1 + i);
    for (int j = 0; j < width; ++j) {
      b.tokens.push_back(token(rng));
      b.positions.push_back(start + j);
      b.kv_slots.push_back(page * 1000 + start + j);
    }
  }
  return b;
}

struct PackCase {
  int64_t n;
  int width;
  bool from_allocator;  // k from Algorithm 1 at half budget, else uniform random in [1, W]
  bool k_in_place;      // k passed in the output k array (as the decision pipeline does)
};

class CudaDvlPackTest : public CudaTest {};

TEST_F(CudaDvlPackTest, PackMatchesCpuBitwiseWithSentinelsAndTail) {
  std::vector<PackCase> cases;
  for (const int64_t n : kLiveCounts) {
    cases.push_back({n, kBlockWidth, true, true});
    for (const int width : {kBlockWidth, 5, 2}) cases.push_back({n, width, false, false});
  }
  std::mt19937 rng(404);
  for (const PackCase& pc : cases) {
    SCOPED_TRACE(::testing::Message() << "n=" << pc.n << " width=" << pc.width
                                      << " from_allocator=" << pc.from_allocator);
    dvl::BucketConfig config;
    config.width = pc.width;
    config.verify_budget = pc.from_allocator ? dvl::kDefaultVerifyBudget : 1.0;
    const int32_t bucket = *dvl::SelectBucket(config.buckets, pc.n);
    const int64_t capacity = dvl::BucketCapacity(config, bucket);
    const Blocks blocks = RandomBlocks(rng, bucket, pc.width);

    std::vector<int32_t> k(bucket, 0);
    if (pc.from_allocator) {
      const std::vector<float> logits = GridLogits(rng, pc.n * kDraftPositions, 4, 3);
      const int64_t budget = *dvl::BudgetFromFraction(pc.n, pc.width, config.verify_budget);
      const Result<dvl::Allocation> a = dvl::AllocateFromLogits(logits.data(), pc.n, budget);
      ASSERT_TRUE(a.ok());
      std::copy(a->k.begin(), a->k.end(), k.begin());
    } else {
      std::uniform_int_distribution<int32_t> length(1, pc.width);
      for (int64_t i = 0; i < pc.n; ++i) k[i] = length(rng);
    }
    // Past the live count k holds junk the packer must ignore.
    for (int64_t i = pc.n; i < bucket; ++i) k[i] = 7;

    dvl::BucketStep ws(bucket, capacity, pc.width);
    const size_t live_cells = static_cast<size_t>(pc.n) * pc.width;
    const StepBatch live_blocks =
        testing::BlocksFromRows(pc.n, pc.width, std::span(blocks.tokens).first(live_cells),
                                std::span(blocks.positions).first(live_cells),
                                std::span(blocks.kv_slots).first(live_cells));
    ASSERT_TRUE(dvl::Pack(live_blocks, std::span(k).first(pc.n), &ws).ok());

    auto tokens = ToDevice(blocks.tokens), positions = ToDevice(blocks.positions);
    auto kv_slots = ToDevice(blocks.kv_slots);
    auto step = DeviceStep(static_cast<int32_t>(pc.n), ws.batch().rows());
    auto out_tokens = PoisonedBuffer<int32_t>(capacity);
    auto out_positions = PoisonedBuffer<int32_t>(capacity);
    auto out_kv = PoisonedBuffer<int32_t>(capacity);
    auto out_k = PoisonedBuffer<int32_t>(bucket);
    auto out_offsets = PoisonedBuffer<int32_t>(bucket + 1);
    auto separate_k = ToDevice(k);
    if (pc.k_in_place) out_k.CopyFromHost(k.data());
    const cuda::PackedRows out{.tokens = out_tokens.data(),
                               .positions = out_positions.data(),
                               .kv_slots = out_kv.data(),
                               .k = out_k.data(),
                               .offsets = out_offsets.data()};
    cuda::Pack(tokens.data(), positions.data(), kv_slots.data(),
               pc.k_in_place ? out_k.data() : separate_k.data(), bucket, capacity, pc.width,
               step.data(), out, stream_);

    const auto expect = [](std::span<const int32_t> want) {
      return std::vector<int32_t>(want.begin(), want.end());
    };
    EXPECT_EQ(ToHost(out_tokens), expect(ws.batch().token_storage()));
    EXPECT_EQ(ToHost(out_positions), expect(ws.batch().position_storage()));
    EXPECT_EQ(ToHost(out_kv), expect(ws.batch().kv_slot_storage()));
    EXPECT_EQ(ToHost(out_k), expect(ws.k()));
    EXPECT_EQ(ToHost(out_offsets), expect(ws.offsets()));
  }
}

}  // namespace
}  // namespace dscale
