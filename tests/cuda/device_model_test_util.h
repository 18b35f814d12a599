#pragma once
// Shared pieces of the device-model tests: a tiny random Qwen3 on both backends, prefill of the
// same prompts into both KV caches, and the tolerances the device forward is held to.
//
// Why the tolerances are what they are: the device feeds every GEMM BF16-rounded activations
// (kernels/cuda/gemm_bf16.h), the CPU f32 ones. Rounding moves each GEMM input by at most 2⁻⁸
// of itself with independent signs, so each projection's output moves by about 10⁻³ of its
// typical size; over a few layers and the LM head the logits end up within ~0.5% of their RMS
// typically and a few times that at worst. The bounds below — max |Δ| ≤ 10% of the reference's
// RMS, mean |Δ| ≤ 2% of it — leave several times that margin, while a wrong layout, a skipped
// norm, a wrong RoPE position or a K/V row at the wrong slot moves values by their own size.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/step_batch.h"
#include "kv/paged_kv_cache.h"
#include "model/cuda/device_batch.h"
#include "model/cuda/device_forward.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale::testing {

inline constexpr double kMaxErrorOfRms = 0.10;
inline constexpr double kMeanErrorOfRms = 0.02;
inline constexpr int32_t kPageSize = 16;

inline double Rms(const std::vector<float>& v) {
  double sum = 0.0;
  for (const float x : v) sum += double{x} * x;
  return v.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(v.size()));
}

// The device values `got` against the CPU's `want` under the bounds above.
inline void ExpectWithinBf16Tolerance(const std::vector<float>& got, const std::vector<float>& want,
                                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double rms = Rms(want);
  double worst = 0.0, total = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double{got[i]} - want[i]);
    ASSERT_FALSE(std::isnan(d)) << what << " element " << i;
    worst = std::max(worst, d);
    total += d;
  }
  EXPECT_LE(worst, kMaxErrorOfRms * rms) << what << ": worst |Δ| against RMS " << rms;
  EXPECT_LE(total / static_cast<double>(got.size()), kMeanErrorOfRms * rms)
      << what << ": mean |Δ| against RMS " << rms;
}

// Index of the largest value of row[0, n) (lowest on ties) and its lead over the runner-up.
struct TopTwo {
  int32_t index = 0;
  double margin = 0.0;
};
inline TopTwo TopOf(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  double second = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (i != best) second = std::max(second, double{row[i]});
  }
  return {static_cast<int32_t>(best), double{row[best]} - second};
}

// The largest |got − want| over row r of two [rows, n] arrays.
inline double RowError(const std::vector<float>& got, const std::vector<float>& want, int64_t r,
                       int64_t n) {
  double worst = 0.0;
  for (int64_t i = r * n; i < (r + 1) * n; ++i) {
    worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
  }
  return worst;
}

inline std::vector<int32_t> RandomTokens(std::mt19937& rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = token(rng);
  return ids;
}

// The same BF16 checkpoint on the CPU (f32 values that are exactly the BF16 ones) and on the
// device, with KV caches of the same geometry, both f32 (the device cache's only dtype).
struct TwinModels {
  explicit TwinModels(const DecoderConfig& config, uint64_t seed, int32_t num_pages)
      : cpu(config, RandomDecoderWeights(config, seed, DType::kBF16)),
        device(config, cuda::UploadDecoderWeights(config, cpu.weights())),
        cpu_cache(cpu.KvShape(kPageSize, num_pages).WithDtype(KvDtype::kF32)),
        device_cache(cpu.KvShape(kPageSize, num_pages)) {}

  DecoderModel cpu;
  cuda::DeviceDecoderModel device;
  PagedKvCache cpu_cache;
  cuda::DeviceKvCache device_cache;
};

// Device rows [0, count) of a float buffer, after waiting for `stream`.
inline std::vector<float> CopyFloats(const float* device, size_t count, cudaStream_t stream) {
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> host(count);
  if (count > 0) {
    DSCALE_CUDA_CHECK(
        cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return host;
}

// Runs `batch` on both backends with all logits; returns (device, CPU) logits.
struct BothLogits {
  std::vector<float> device, cpu;
};
inline BothLogits ForwardBoth(TwinModels& m, StepBatch& batch, int tile_rows, cudaStream_t stream) {
  batch.tile_rows = tile_rows;
  batch.capture_layers.clear();
  ForwardOutput cpu_out;
  const Status status = m.cpu.Forward(batch, m.cpu_cache, &cpu_out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  const int64_t vocab = m.cpu.config().vocab_size;
  const cuda::DeviceBatch device_batch(batch, m.cpu_cache);
  cuda::DeviceForwardScratch scratch(m.device.dims(), std::max(batch.rows(), 1));
  cuda::DeviceBuffer<float> logits(static_cast<size_t>(batch.rows() * vocab));
  m.device.Forward(device_batch.view(), {}, m.device_cache, scratch,
                   {.logits = logits.data(), .features = nullptr}, stream);
  return {CopyFloats(logits.data(), logits.size(), stream), cpu_out.logits};
}

// Adds one sequence per prompt to both caches' bookkeeping (the CPU cache's page tables serve
// both) and runs all prompts as one prefill batch on both backends.
inline std::vector<int32_t> PrefillBoth(TwinModels& m,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        cudaStream_t stream) {
  StepBatch batch;
  std::vector<int32_t> seqs;
  for (const std::vector<int32_t>& prompt : prompts) {
    const int32_t seq = m.cpu_cache.AddSequence();
    EXPECT_TRUE(m.cpu_cache.Reserve(seq, static_cast<int32_t>(prompt.size())).ok());
    AddRequestRows(batch, seq, 0, prompt, m.cpu_cache, /*all_logits=*/true);
    seqs.push_back(seq);
  }
  ForwardBoth(m, batch, 128, stream);
  return seqs;
}

}  // namespace dscale::testing
