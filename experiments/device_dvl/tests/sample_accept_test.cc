// Parity of the CUDA sampled acceptance over packed ragged rows with the CPU prefix verifier
// (spec/prefix_verifier.h, VerifySampled) driven by the same uniforms, which each request
// peeks from its UniformLookahead (spec/uniform_lookahead.h). Every test skips where no CUDA
// device is usable.
//
// The device forms the CPU's probabilities with the same expressions in double, but adds them
// in another order (block reductions), so each sum may differ from the CPU's in its last bits.
// A decision can therefore differ only where the quantity compared lies within that rounding of
// its boundary: a uniform next to an acceptance threshold P_j(x) or a step of the CDF it is
// inverted through, or a nucleus mass next to top_p. The parity test finds every such decision
// from the CPU's own numbers (relative distance below kBoundaryNoise, far above the ~1e-15 the
// sums can differ by), reports how many there were, skips only those requests' outcomes, and
// fails if they are not rare. Everything else must match exactly.

#include "device_dvl/sample_accept.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "core/dvl_shapes.h"
#include "cuda/cuda_test_util.h"
#include "cuda/dvl_test_util.h"
#include "dvl/flat_pack.h"
#include "kernels/cuda/graph.h"
#include "kernels/kernel_test_util.h"
#include "spec/prefix_verifier.h"
#include "spec/sampling.h"
#include "spec/uniform_lookahead.h"

namespace dscale {
namespace {

using cuda::kUniformsPerRequest;
using dvl::kBlockWidth;
using testing::CudaTest;
using testing::PoisonedBuffer;
using testing::RandomNormal;

// Relative distance to a boundary below which a decision counts as within float noise.
constexpr double kBoundaryNoise = 1e-9;
constexpr double kFar = std::numeric_limits<double>::infinity();

// Relative distance of `value` from `boundary` (> 0); infinite for a boundary of 0, which a
// uniform in [0, 1) and a mass of positive terms are compared with exactly on both sides.
double RelativeDistance(double value, double boundary) {
  return boundary > 0 ? std::fabs(value - boundary) / boundary : kFar;
}

// The nucleus cut of TargetDistribution for one row, redone from the CPU's intermediate
// probabilities: the relative distance of top_p from the masses on either side of the cut.
double NucleusMargin(std::span<const float> row, const SamplingParams& params) {
  if (params.top_p >= 1.0f) return kFar;
  SamplingParams plain = params;
  plain.top_k = 0;
  plain.top_p = 1.0f;
  std::vector<double> probs;
  TargetDistribution(row, plain, &probs);  // softmax only: the CPU's first renormalisation
  std::vector<int32_t> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  const auto vocab = static_cast<int32_t>(row.size());
  const int32_t keep = params.top_k > 0 && params.top_k < vocab ? params.top_k : vocab;
  double kept_mass = 0;
  for (int32_t r = 0; r < keep; ++r) kept_mass += probs[order[r]];
  double mass = 0;
  for (int32_t r = 0; r < keep; ++r) {
    const double before = mass;
    mass += probs[order[r]] / kept_mass;
    if (mass >= params.top_p) {
      return std::min(RelativeDistance(mass, params.top_p), RelativeDistance(before, params.top_p));
    }
  }
  return kFar;
}

// Relative distance of u from the nearest step of the CDF SampleIndex walks through `probs`.
double CdfMargin(const std::vector<double>& probs, double u) {
  double margin = kFar, cumulative = 0;
  for (const double p : probs) {
    if (p <= 0) continue;
    cumulative += p;
    margin = std::min(margin, RelativeDistance(u, cumulative));
  }
  return margin;
}

// The smallest relative distance to a boundary over every decision VerifySampled took for one
// request (whose outcome is `result`) with these uniforms.
double DecisionMargin(std::span<const float> logits, int64_t vocab, std::span<const int32_t> drafts,
                      const SamplingParams& params, std::span<const double> uniforms,
                      const VerifyResult& result) {
  const auto k = static_cast<int32_t>(drafts.size()) + 1;
  double margin = kFar;
  std::vector<double> probs;
  for (int32_t j = 0; j <= result.accepted; ++j) {
    const std::span<const float> row = logits.subspan(j * vocab, vocab);
    margin = std::min(margin, NucleusMargin(row, params));
    TargetDistribution(row, params, &probs);
    if (j == k - 1) {  // every draft passed: the draw from P_{k−1}
      margin = std::min(margin, CdfMargin(probs, uniforms[j]));
      break;
    }
    const int32_t x = drafts[j];
    margin = std::min(margin, RelativeDistance(uniforms[j], probs[x]));
    if (j < result.accepted) continue;
    const double rest = 1.0 - probs[x];  // rejected: the draw from the residual
    probs[x] = 0.0;
    for (double& p : probs) p /= rest;
    margin = std::min(margin, CdfMargin(probs, uniforms[j + 1]));
  }
  return margin;
}

int32_t UniformsUsed(const VerifyResult& r, int32_t k) {
  return r.accepted == k - 1 ? k : r.accepted + 2;
}

// One bucket as the packer lays it out, with each request's sampling parameters and uniforms.
struct SampledBucket {
  int64_t n = 0;
  int64_t vocab = 0;
  int32_t bucket = 0;
  int64_t capacity = 0;  // packed rows the logits cover
  std::vector<float> logits;
  std::vector<int32_t> tokens, k, offsets;
  std::vector<SamplingParams> params;  // [n]
  std::vector<float> temperature, top_p;
  std::vector<int32_t> top_k;
  std::vector<double> uniforms;  // [bucket, kUniformsPerRequest]
};

constexpr float kTemperatures[] = {0.3f, 0.7f, 1.0f, 1.5f};
enum class Filter { kNone, kTopK, kTopP, kBoth, kTopKPastVocab, kCount };

// Request i's parameters: temperatures and filters cycle so every pairing occurs; every 11th
// request is greedy (temperature 0).
SamplingParams RequestParams(std::mt19937& rng, int64_t i, int64_t vocab) {
  SamplingParams p;
  p.seed = 7000 + static_cast<uint64_t>(i);
  if (i % 11 == 10) return p;
  p.temperature = kTemperatures[i % 4];
  const auto filter = static_cast<Filter>(i / 4 % static_cast<int64_t>(Filter::kCount));
  const int32_t largest_k = static_cast<int32_t>(std::min<int64_t>(vocab - 1, 40));
  std::uniform_int_distribution<int32_t> top_k(1, std::max(largest_k, 1));
  constexpr float kTopPs[] = {0.5f, 0.8f, 0.95f};
  if (filter == Filter::kTopK || filter == Filter::kBoth) p.top_k = top_k(rng);
  if (filter == Filter::kTopP || filter == Filter::kBoth) p.top_p = kTopPs[(i / 20) % 3];
  if (filter == Filter::kTopKPastVocab) p.top_k = static_cast<int32_t>(vocab + i % 3);
  return p;
}

// n live requests of random lengths; the drafts follow each row's argmax (likely accepted) up
// to a planned point, then one random token (likely rejected) and random ones after it.
SampledBucket MakeBucket(std::mt19937& rng, int64_t n, int64_t vocab) {
  SampledBucket b;
  b.n = n;
  b.vocab = vocab;
  dvl::BucketConfig config;
  config.verify_budget = 1.0;                            // room for any lengths
  b.bucket = *dvl::SelectBucket(config.buckets, n + 1);  // ≥ 1 sentinel
  b.capacity = dvl::BucketCapacity(config, b.bucket);
  b.logits = RandomNormal(rng, b.capacity * vocab, 0.0f, 2.0f);

  std::uniform_int_distribution<int32_t> length(1, kBlockWidth);
  std::vector<int32_t> k(n);
  for (int32_t& ki : k) ki = length(rng);
  std::vector<int32_t> offsets(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + k[i];

  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> tokens(n * kBlockWidth), positions(n * kBlockWidth);
  std::vector<int32_t> kv_slots(n * kBlockWidth);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t planned = std::uniform_int_distribution<int32_t>(0, k[i] - 1)(rng);
    for (int j = 0; j < kBlockWidth; ++j) {
      const int64_t cell = i * kBlockWidth + j;
      tokens[cell] = token(rng);
      positions[cell] = 10 * static_cast<int32_t>(i) + j;
      kv_slots[cell] = 1000 * static_cast<int32_t>(i) + j;
      if (j == 0 || j > planned || j >= k[i]) continue;
      const auto row = b.logits.begin() + (offsets[i] + j - 1) * vocab;  // predicts block row j
      tokens[cell] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    }
  }
  dvl::BucketStep ws(b.bucket, b.capacity, kBlockWidth);
  const Status packed =
      dvl::Pack(testing::BlocksFromRows(n, kBlockWidth, tokens, positions, kv_slots),
                std::span(k).first(static_cast<size_t>(n)), &ws);
  DSCALE_CHECK(packed.ok());
  b.tokens.assign(ws.batch().token_storage().begin(), ws.batch().token_storage().end());
  b.k.assign(ws.k().begin(), ws.k().end());
  b.offsets.assign(ws.offsets().begin(), ws.offsets().end());

  b.temperature.assign(b.bucket, 0.0f);
  b.top_k.assign(b.bucket, 0);
  b.top_p.assign(b.bucket, 1.0f);
  b.uniforms.assign(static_cast<size_t>(b.bucket) * kUniformsPerRequest, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const SamplingParams p = RequestParams(rng, i, vocab);
    b.params.push_back(p);
    b.temperature[i] = p.temperature;
    b.top_k[i] = p.top_k;
    b.top_p[i] = p.top_p;
    UniformLookahead stream(p.seed);
    stream.Peek(std::span(b.uniforms).subspan(i * kUniformsPerRequest, kUniformsPerRequest));
  }
  return b;
}

// Per-request outcomes, [bucket] each.
struct Outcomes {
  std::vector<int32_t> accepted, next_token, used;
};

// The CPU's outcomes (sentinels as the device reports them) and each request's decision margin.
Outcomes CpuOutcomes(const SampledBucket& b, std::vector<double>* margins) {
  Outcomes want{.accepted = std::vector<int32_t>(b.bucket, 0),
                .next_token = std::vector<int32_t>(b.bucket, -1),
                .used = std::vector<int32_t>(b.bucket, 0)};
  margins->assign(b.n, kFar);
  const std::span<const float> all_logits(b.logits);
  std::vector<double> probs;
  for (int64_t i = 0; i < b.n; ++i) {
    const int32_t rows = b.k[i];
    const std::span<const float> logits =
        all_logits.subspan(b.offsets[i] * b.vocab, rows * b.vocab);
    const std::span<const int32_t> drafts = std::span(b.tokens).subspan(b.offsets[i] + 1, rows - 1);
    const std::span<const double> uniforms =
        std::span(b.uniforms).subspan(i * kUniformsPerRequest, kUniformsPerRequest);
    VerifyResult r;
    if (b.params[i].greedy()) {
      r = VerifyGreedy(logits, b.vocab, drafts);
    } else {
      int32_t used = 0;
      r = VerifySampled(
          logits, b.vocab, drafts, b.params[i], [&] { return uniforms[used++]; }, &probs);
      EXPECT_EQ(used, UniformsUsed(r, rows)) << "request " << i;
      want.used[i] = used;
      (*margins)[i] = DecisionMargin(logits, b.vocab, drafts, b.params[i], uniforms, r);
    }
    want.accepted[i] = r.accepted;
    want.next_token[i] = r.next_token;
  }
  return want;
}

// A bucket's inputs, outputs and workspace on the device, at fixed addresses.
class DeviceBucket {
 public:
  explicit DeviceBucket(const SampledBucket& b)
      : bucket_(b.bucket),
        rows_(b.capacity),
        vocab_(b.vocab),
        logits_(b.logits.data(), b.logits.size()),
        tokens_(b.tokens.data(), b.tokens.size()),
        k_(b.k.data(), b.k.size()),
        offsets_(b.offsets.data(), b.offsets.size()),
        temperature_(b.temperature.data(), b.temperature.size()),
        top_k_(b.top_k.data(), b.top_k.size()),
        top_p_(b.top_p.data(), b.top_p.size()),
        uniforms_(b.uniforms.data(), b.uniforms.size()),
        accepted_(PoisonedBuffer<int32_t>(b.bucket)),
        next_token_(PoisonedBuffer<int32_t>(b.bucket)),
        used_(PoisonedBuffer<int32_t>(b.bucket)),
        workspace_(cuda::SampleAcceptWorkspaceBytes(b.capacity, b.vocab)) {}

  // Copies another bucket of the same shape into the same addresses.
  void Stage(const SampledBucket& b) {
    DSCALE_CHECK(b.bucket == bucket_ && b.capacity == rows_ && b.vocab == vocab_);
    logits_.CopyFromHost(b.logits.data());
    tokens_.CopyFromHost(b.tokens.data());
    k_.CopyFromHost(b.k.data());
    offsets_.CopyFromHost(b.offsets.data());
    temperature_.CopyFromHost(b.temperature.data());
    top_k_.CopyFromHost(b.top_k.data());
    top_p_.CopyFromHost(b.top_p.data());
    uniforms_.CopyFromHost(b.uniforms.data());
  }

  // Fills the outputs with 0xff bytes (−1) in place, so an output left unwritten shows.
  void PoisonOutputs(cudaStream_t stream) {
    for (cuda::DeviceBuffer<int32_t>* out : {&accepted_, &next_token_, &used_}) {
      DSCALE_CUDA_CHECK(cudaMemsetAsync(out->data(), 0xff, out->bytes(), stream));
    }
  }

  void Enqueue(cudaStream_t stream) {
    cuda::VerifySampledPacked({.logits = logits_.data(),
                               .tokens = tokens_.data(),
                               .k = k_.data(),
                               .offsets = offsets_.data(),
                               .temperature = temperature_.data(),
                               .top_k = top_k_.data(),
                               .top_p = top_p_.data(),
                               .uniforms = uniforms_.data()},
                              bucket_, rows_, vocab_, workspace_.data(), workspace_.bytes(),
                              {.accepted = accepted_.data(),
                               .next_token = next_token_.data(),
                               .uniforms_used = used_.data()},
                              stream);
  }

  Outcomes Read(cudaStream_t stream) const {
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream));
    Outcomes got;
    for (auto [buffer, host] :
         {std::pair{&accepted_, &got.accepted}, std::pair{&next_token_, &got.next_token},
          std::pair{&used_, &got.used}}) {
      host->resize(buffer->size());
      buffer->CopyToHost(host->data());
    }
    return got;
  }

 private:
  int32_t bucket_;
  int64_t rows_, vocab_;
  cuda::DeviceBuffer<float> logits_;
  cuda::DeviceBuffer<int32_t> tokens_, k_, offsets_;
  cuda::DeviceBuffer<float> temperature_;
  cuda::DeviceBuffer<int32_t> top_k_;
  cuda::DeviceBuffer<float> top_p_;
  cuda::DeviceBuffer<double> uniforms_;
  cuda::DeviceBuffer<int32_t> accepted_, next_token_, used_;
  cuda::DeviceBuffer<unsigned char> workspace_;
};

class CudaSampleAcceptTest : public CudaTest {};

struct SampledCase {
  int64_t n;
  int64_t vocab;
};

// Random buckets over odd sizes and one real vocabulary size: the device's outcomes are the
// CPU's for every request whose decisions are clear of float noise, and those within it are
// counted, reported and must be rare.
TEST_F(CudaSampleAcceptTest, MatchesCpuVerifySampledOnPackedRows) {
  std::vector<SampledCase> cases;
  for (const int64_t n : {1, 3, 7, 19, 33}) {
    for (const int64_t vocab : {17, 300, 4160}) cases.push_back({n, vocab});
  }
  cases.push_back({3, 151936});  // Qwen3's vocabulary
  std::mt19937 rng(911);
  int64_t sampled = 0, near_boundary = 0, accepted_some = 0, rejected_some = 0;
  for (const SampledCase& sc : cases) {
    SCOPED_TRACE(::testing::Message() << "n=" << sc.n << " vocab=" << sc.vocab);
    const SampledBucket b = MakeBucket(rng, sc.n, sc.vocab);
    std::vector<double> margins;
    const Outcomes want = CpuOutcomes(b, &margins);
    DeviceBucket device(b);
    device.Enqueue(stream_);
    const Outcomes got = device.Read(stream_);
    for (int32_t i = 0; i < b.bucket; ++i) {
      SCOPED_TRACE(::testing::Message() << "request " << i);
      if (i < b.n && !b.params[i].greedy()) {
        ++sampled;
        if (want.accepted[i] > 0) ++accepted_some;
        if (want.accepted[i] < b.k[i] - 1) ++rejected_some;
        if (margins[i] < kBoundaryNoise) {
          ++near_boundary;
          std::printf("  near a boundary (relative distance %.3g): n=%lld vocab=%lld request %d\n",
                      margins[i], static_cast<long long>(sc.n), static_cast<long long>(sc.vocab),
                      i);
          // Still a well-formed outcome.
          EXPECT_GE(got.accepted[i], 0);
          EXPECT_LT(got.accepted[i], b.k[i]);
          EXPECT_EQ(got.used[i], UniformsUsed({got.accepted[i], got.next_token[i]}, b.k[i]));
          EXPECT_GE(got.next_token[i], 0);
          EXPECT_LT(got.next_token[i], b.vocab);
          continue;
        }
      }
      EXPECT_EQ(got.accepted[i], want.accepted[i]);
      EXPECT_EQ(got.next_token[i], want.next_token[i]);
      EXPECT_EQ(got.used[i], want.used[i]);
    }
  }
  std::printf("  %lld sampled requests, %lld within float noise of a decision boundary\n",
              static_cast<long long>(sampled), static_cast<long long>(near_boundary));
  EXPECT_LE(near_boundary, 1 + sampled / 100) << "boundary cases should be rare";
  // The planted drafts exercised both branches.
  EXPECT_GT(accepted_some, sampled / 10);
  EXPECT_GT(rejected_some, sampled / 10);
}

// With top_k = 1 (or a nucleus that only the top token fills) P is one-hot on the argmax: the
// argmax draft is accepted by every uniform, any other rejected, and every draw is the argmax —
// VerifyGreedy's outcome, with no float noise at any decision.
TEST_F(CudaSampleAcceptTest, OneHotDistributionsGiveTheGreedyOutcome) {
  std::mt19937 rng(912);
  SampledBucket b = MakeBucket(rng, 19, 300);
  for (int64_t i = 0; i < b.n; ++i) {
    b.temperature[i] = kTemperatures[i % 4];
    b.top_k[i] = i % 2 == 0 ? 1 : 0;
    b.top_p[i] = i % 2 == 0 ? 1.0f : 1e-6f;
  }
  const std::span<const float> all_logits(b.logits);
  DeviceBucket device(b);
  device.Enqueue(stream_);
  const Outcomes got = device.Read(stream_);
  for (int64_t i = 0; i < b.n; ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    const int32_t rows = b.k[i];
    const VerifyResult want =
        VerifyGreedy(all_logits.subspan(b.offsets[i] * b.vocab, rows * b.vocab), b.vocab,
                     std::span(b.tokens).subspan(b.offsets[i] + 1, rows - 1));
    EXPECT_EQ(got.accepted[i], want.accepted);
    EXPECT_EQ(got.next_token[i], want.next_token);
    EXPECT_EQ(got.used[i], UniformsUsed(want, rows));
  }
  for (int32_t i = static_cast<int32_t>(b.n); i < b.bucket; ++i) {
    EXPECT_EQ(got.accepted[i], 0);
    EXPECT_EQ(got.next_token[i], -1);
    EXPECT_EQ(got.used[i], 0);
  }
}

// Captured once and replayed on new inputs staged into the same addresses: every replay gives
// eager execution's outcomes, bit for bit.
TEST_F(CudaSampleAcceptTest, GraphReplayEqualsEager) {
  std::mt19937 rng(913);
  std::vector<SampledBucket> steps;
  for (int s = 0; s < 3; ++s) steps.push_back(MakeBucket(rng, 7, 4160));  // one bucket shape
  DeviceBucket device(steps[0]);
  device.Enqueue(stream_);  // eager run first: loads the kernels before the capture
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const cuda::CapturedGraph graph =
      cuda::CapturedGraph::Capture(stream_, [&](cudaStream_t s) { device.Enqueue(s); });
  EXPECT_GT(graph.kernel_nodes(), 0);
  for (size_t s = 0; s < steps.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    device.Stage(steps[s]);
    device.PoisonOutputs(stream_);
    device.Enqueue(stream_);
    const Outcomes eager = device.Read(stream_);
    device.PoisonOutputs(stream_);
    graph.Replay(stream_);
    const Outcomes replay = device.Read(stream_);
    EXPECT_EQ(replay.accepted, eager.accepted);
    EXPECT_EQ(replay.next_token, eager.next_token);
    EXPECT_EQ(replay.used, eager.used);
    // Live requests were decided (the poison, −1, is no request's count of uniforms).
    for (int64_t i = 0; i < steps[s].n; ++i) EXPECT_GE(eager.used[i], 0) << "request " << i;
  }
}

}  // namespace
}  // namespace dscale
