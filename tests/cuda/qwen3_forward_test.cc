// The device Qwen3 forward against DecoderModel::Forward on the same random BF16 checkpoint:
// logits, captured residual streams and the K/V rows written into the paged cache, for a
// prefill batch (tile 128) and then a verification-shaped batch (tile 16) that attends to the
// prefill's keys. Tolerances and their reasons: cuda/device_model_test_util.h. Every test skips
// where no CUDA device is usable.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/device_model_test_util.h"
#include "model/cuda/device_batch.h"
#include "model/cuda/device_forward.h"

namespace dscale {
namespace {

using testing::CopyFloats;
using testing::CudaTest;
using testing::ExpectWithinBf16Tolerance;
using testing::RandomTokens;
using testing::TwinModels;

class CudaQwen3ForwardTest : public CudaTest {
 protected:
  // The K (or V) rows of `layer` at `slots` from both caches.
  void ExpectSameKv(TwinModels& m, int32_t layer, std::span<const int32_t> slots) {
    const int64_t row = m.device_cache.row_floats();
    const cpu::PagedKvLayer cpu_layer = m.cpu_cache.Layer(layer);
    const std::vector<float> device_k = CopyFloats(
        m.device_cache.k(layer), static_cast<size_t>(m.device_cache.num_slots() * row), stream_);
    const std::vector<float> device_v = CopyFloats(
        m.device_cache.v(layer), static_cast<size_t>(m.device_cache.num_slots() * row), stream_);
    std::vector<float> got_k, got_v, want_k, want_v;
    for (const int64_t slot : slots) {
      for (int64_t e = slot * row; e < (slot + 1) * row; ++e) {
        got_k.push_back(device_k[e]);
        got_v.push_back(device_v[e]);
        want_k.push_back(cpu_layer.k[e]);
        want_v.push_back(cpu_layer.v[e]);
      }
    }
    ExpectWithinBf16Tolerance(got_k, want_k, "K rows");
    ExpectWithinBf16Tolerance(got_v, want_v, "V rows");
  }

  // Runs `batch` on both models with the residual streams after the layers in `capture` taken
  // out, and compares logits, those streams and every layer's K/V at the batch's slots.
  void CompareForward(TwinModels& m, StepBatch& batch, int tile_rows,
                      const std::vector<int32_t>& capture) {
    batch.tile_rows = tile_rows;
    batch.capture_layers = capture;
    ForwardOutput cpu_out;
    ASSERT_TRUE(m.cpu.Forward(batch, m.cpu_cache, &cpu_out).ok());
    const int64_t vocab = m.cpu.config().vocab_size;
    const int64_t hidden = m.cpu.config().hidden_size;
    const cuda::DeviceBatch device_batch(batch, m.cpu_cache);
    cuda::DeviceForwardScratch scratch(m.device.dims(), batch.rows());
    cuda::DeviceBuffer<float> logits(static_cast<size_t>(batch.rows() * vocab));
    cuda::DeviceBuffer<float> features(
        static_cast<size_t>(batch.rows() * hidden * static_cast<int64_t>(capture.size())));
    m.device.Forward(device_batch.view(), capture, m.device_cache, scratch,
                     {.logits = logits.data(), .features = features.data()}, stream_);

    // DecoderModel computes logits only for logit_rows; every batch here asks for all rows.
    ASSERT_EQ(batch.logit_rows().size(), static_cast<size_t>(batch.rows()));
    ExpectWithinBf16Tolerance(CopyFloats(logits.data(), logits.size(), stream_), cpu_out.logits,
                              "logits");
    ExpectWithinBf16Tolerance(CopyFloats(features.data(), features.size(), stream_),
                              cpu_out.features, "captured residual streams");
    for (int32_t layer = 0; layer < m.cpu.config().num_hidden_layers; ++layer) {
      SCOPED_TRACE(::testing::Message() << "layer " << layer);
      ExpectSameKv(m, layer, batch.kv_slots());
    }
  }

  // A prefill of three prompts of odd lengths spanning several pages, then one
  // verification-shaped batch (q_len 16, 3, 9) attending to the prefill's K/V through the pages.
  void RunPrefillThenVerify(TwinModels& m, std::mt19937& rng) {
    const int64_t vocab = m.cpu.config().vocab_size;
    const std::vector<int32_t> prompt_lens = {37, 5, 20};
    const std::vector<int32_t> block_lens = {16, 3, 9};
    StepBatch prefill;
    std::vector<int32_t> seqs;
    for (const int32_t len : prompt_lens) {
      const int32_t seq = m.cpu_cache.AddSequence();
      ASSERT_TRUE(m.cpu_cache.Reserve(seq, len + 16).ok());
      AddRequestRows(prefill, seq, 0, RandomTokens(rng, static_cast<size_t>(len), vocab),
                     m.cpu_cache,
                     /*all_logits=*/true);
      seqs.push_back(seq);
    }
    {
      SCOPED_TRACE("prefill, tile 128");
      CompareForward(m, prefill, 128, {0, 2});
    }
    StepBatch verify;
    for (size_t i = 0; i < seqs.size(); ++i) {
      AddRequestRows(verify, seqs[i], prompt_lens[i],
                     RandomTokens(rng, static_cast<size_t>(block_lens[i]), vocab), m.cpu_cache,
                     /*all_logits=*/true);
    }
    SCOPED_TRACE("verification rows, tile 16");
    CompareForward(m, verify, 16, {1});
  }
};

TEST_F(CudaQwen3ForwardTest, MatchesCpuForwardWithUntiedLmHead) {
  TwinModels m(testing::TinyDeviceConfig(/*tie=*/false), 41, 32);
  std::mt19937 rng(401);
  RunPrefillThenVerify(m, rng);
}

TEST_F(CudaQwen3ForwardTest, MatchesCpuForwardWithTiedEmbedding) {
  TwinModels m(testing::TinyDeviceConfig(/*tie=*/true), 42, 32);
  std::mt19937 rng(402);
  RunPrefillThenVerify(m, rng);
}

// With out.logit_rows the LM head runs on the named rows only, in their order: the CPU's logits
// for those rows within the BF16 bounds, and the full forward's rows up to GEMM accumulation
// order (the same BF16 inputs; cuBLAS may pick another kernel for another row count), bounded
// by 1e-4 of the logits' RMS.
TEST_F(CudaQwen3ForwardTest, SelectedLogitRowsAreTheFullForwardsRows) {
  TwinModels m(testing::TinyDeviceConfig(/*tie=*/false), 43, 16);
  std::mt19937 rng(403);
  const int64_t vocab = m.cpu.config().vocab_size;
  StepBatch batch;
  for (const int32_t len : {29, 7, 18}) {
    const int32_t seq = m.cpu_cache.AddSequence();
    ASSERT_TRUE(m.cpu_cache.Reserve(seq, len).ok());
    AddRequestRows(batch, seq, 0, RandomTokens(rng, static_cast<size_t>(len), vocab), m.cpu_cache,
                   /*all_logits=*/false);
  }
  const auto n = static_cast<int32_t>(batch.logit_rows().size());
  std::reverse(batch.logit_row_storage().begin(),
               batch.logit_row_storage().begin() + n);  // any order is kept
  ForwardOutput cpu_out;
  ASSERT_TRUE(m.cpu.Forward(batch, m.cpu_cache, &cpu_out).ok());

  const cuda::DeviceBatch device_batch(batch, m.cpu_cache);
  cuda::DeviceForwardScratch scratch(m.device.dims(), batch.rows());
  cuda::DeviceBuffer<float> all(static_cast<size_t>(batch.rows() * vocab));
  cuda::DeviceBuffer<float> selected(static_cast<size_t>(n * vocab));
  const cuda::DeviceBuffer<int32_t> rows =
      ToDevice(std::vector<int32_t>(batch.logit_rows().begin(), batch.logit_rows().end()));
  m.device.Forward(device_batch.view(), {}, m.device_cache, scratch, {.logits = all.data()},
                   stream_);
  m.device.Forward(device_batch.view(), {}, m.device_cache, scratch,
                   {.logits = selected.data(), .logit_rows = rows.data(), .num_logit_rows = n},
                   stream_);
  const std::vector<float> got = CopyFloats(selected.data(), selected.size(), stream_);
  ExpectWithinBf16Tolerance(got, cpu_out.logits, "selected logits against the CPU");
  const std::vector<float> full = CopyFloats(all.data(), all.size(), stream_);
  std::vector<float> want;
  for (const int32_t r : batch.logit_rows()) {
    want.insert(want.end(), full.begin() + r * vocab, full.begin() + (r + 1) * vocab);
  }
  const double bound = 1e-4 * testing::Rms(want);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], bound) << "selected row " << i / vocab;
  }
}

}  // namespace
}  // namespace dscale
