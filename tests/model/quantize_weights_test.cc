// --weights int8 and int4: the quantiser's rounding bound per group, int8 and int4 matrices in
// WeightMatrix (row ranges, stacking, row selection, Project against the reference Linear on
// their dequantised values, and int4 blocks against the int8 blocks of their values), and
// checkpoints loaded as int8 or int4 (projections quantised, the LM head int8, the embedding as
// stored, the forward against the float64 reference forward over the dequantised weights).

#include "model/quantize_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "float_bounds.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/reference/reference_kernels.h"
#include "logit_bounds.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "reference_forward.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using cpu::Int8Groups;
using cpu::kInt8GroupSize;

std::vector<float> Normal(std::mt19937& rng, size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<uint16_t> ToBf16Bits(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = F32ToBf16(values[i]);
  return bits;
}

// Quantising: q = round(fl(w / s)) with fl(w / s) within u·|w / s| ≤ 128u of w / s, so
// |q·s − w| ≤ s·(1/2 + 128u); the dequantised value fl(q·s) adds at most u·|q·s| ≤ 127u·s.
constexpr double kRoundingSlack = 256 * testing::kFloatUnitRoundoff;

TEST(QuantizeInt8Test, EveryGroupRoundsOntoItsOwnScale) {
  std::mt19937 rng(1);
  for (const int64_t cols : {1, 5, 31, 32, 33, 64, 100}) {
    SCOPED_TRACE(::testing::Message() << "cols=" << cols);
    const int64_t rows = 4, groups = Int8Groups(cols);
    std::vector<float> w = Normal(rng, rows * cols, 0.05f);
    // Row 1: a zero group first; row 2: a last group 1000× smaller than the rest, so its own
    // scale is needed to keep it from rounding to zero.
    std::fill(w.begin() + cols, w.begin() + cols + std::min(cols, kInt8GroupSize), 0.0f);
    for (int64_t k = (groups - 1) * kInt8GroupSize; k < cols; ++k) w[2 * cols + k] *= 1e-3f;
    std::vector<int8_t> q(rows * cols);
    std::vector<cpu::Int8Scale> scales(rows * groups);
    cpu::QuantizeInt8Weights(w.data(), rows, cols, q.data(), scales.data());
    std::vector<float> back(rows * cols);
    cpu::DequantizeInt8Rows(q.data(), scales.data(), rows, cols, back.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t begin = r * cols + g * kInt8GroupSize;
        const int64_t end = r * cols + std::min(cols, (g + 1) * kInt8GroupSize);
        float largest = 0.0f;
        int largest_q = 0;
        for (int64_t i = begin; i < end; ++i) {
          largest = std::max(largest, std::fabs(w[i]));
          largest_q = std::max(largest_q, std::abs(int{q[i]}));
        }
        // The smallest BF16 value at least largest / 127: it holds the group within ±127 steps,
        // and its 8 significant bits put the largest weight at 126.5 steps or more.
        const float s = cpu::Int8ScaleValue(scales[r * groups + g]);
        const float exact = largest / 127.0f;
        ASSERT_GE(s, exact) << "row " << r << " group " << g;
        ASSERT_LE(s, exact * (1.0f + 0x1p-7f)) << "row " << r << " group " << g;
        ASSERT_EQ(scales[r * groups + g], cpu::Int8ScaleAtLeast(exact));
        if (s == 0.0f) {
          EXPECT_EQ(largest_q, 0) << "row " << r << " group " << g;
        } else {
          EXPECT_GE(largest_q, 126) << "row " << r << " group " << g;
          EXPECT_LE(largest_q, 127) << "row " << r << " group " << g;
        }
        for (int64_t i = begin; i < end; ++i) {
          ASSERT_LE(std::fabs(double{back[i]} - w[i]), s * (0.5 + kRoundingSlack))
              << "row " << r << " element " << i - r * cols;
        }
      }
    }
  }
}

// Rows 0-2 BF16, rows 3-6 f32, rows 7-11 BF16, as a stacked layer matrix.
WeightMatrix MixedMatrix(std::mt19937& rng, int64_t cols) {
  return WeightMatrix::Stack({WeightMatrix::FromBf16(ToBf16Bits(Normal(rng, 3 * cols)), 3, cols),
                              WeightMatrix::FromF32(Normal(rng, 4 * cols), 4, cols),
                              WeightMatrix::FromBf16(ToBf16Bits(Normal(rng, 5 * cols)), 5, cols)});
}

constexpr cpu::QuantLayout kLayouts[] = {cpu::QuantLayout::kRows, cpu::QuantLayout::kPanels};

TEST(QuantizeInt8Test, LoadsInTheLayoutThisCpuReadsFastest) {
  std::mt19937 rng(2);
  for (const cpu::Int8Activations activations :
       {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
    const WeightMatrix m = QuantizeInt8(MixedMatrix(rng, 45), activations);
    ASSERT_EQ(m.blocks().size(), 1u);
    EXPECT_EQ(m.blocks()[0].layout, cpu::PreferredInt8Layout(activations));
  }
  EXPECT_EQ(cpu::PreferredInt8Layout(cpu::Int8Activations::kF32), cpu::QuantLayout::kRows);
}

// `m`, the 12 × cols quantised copy of `source` in `format` and `layout`, holds `want` (the
// values quantising the widened rows directly gives), and its row ranges (of ranges: lanes 5
// and 7 of a panel), stacks and selections keep values and scales paired; ranges and stacks
// share the storage, selections copy rows out in the same layout.
void ExpectQuantisedMatrix(const WeightMatrix& m, const WeightMatrix& source, WeightFormat format,
                           cpu::QuantLayout layout, const std::vector<float>& want) {
  const int64_t cols = source.cols();
  ASSERT_EQ(m.blocks().size(), 1u);
  EXPECT_EQ(m.blocks()[0].format, format);
  EXPECT_EQ(m.blocks()[0].layout, layout);
  EXPECT_EQ(m.rows(), 12);
  EXPECT_EQ(m.cols(), cols);
  const std::vector<float> all = m.ToF32();
  EXPECT_EQ(all, want);
  const WeightMatrix middle = m.RowRange(5, 4);
  EXPECT_EQ(middle.ToF32(), std::vector<float>(all.begin() + 5 * cols, all.begin() + 9 * cols));
  EXPECT_EQ(middle.RowRange(2, 2).ToF32(),
            std::vector<float>(all.begin() + 7 * cols, all.begin() + 9 * cols));
  const WeightMatrix stacked = WeightMatrix::Stack({source.RowRange(0, 2), middle});
  ASSERT_EQ(stacked.blocks().size(), source.RowRange(0, 2).blocks().size() + 1);
  std::vector<float> row(cols);
  stacked.RowToF32(5, row.data());
  EXPECT_EQ(row, std::vector<float>(all.begin() + 8 * cols, all.begin() + 9 * cols));
  const std::vector<int32_t> picked = {11, 0, 6};
  const WeightMatrix selected = m.SelectRows(picked);
  ASSERT_EQ(selected.blocks().size(), 1u);
  EXPECT_EQ(selected.blocks()[0].format, format);
  EXPECT_EQ(selected.blocks()[0].layout, layout);
  for (size_t i = 0; i < picked.size(); ++i) {
    selected.RowToF32(static_cast<int64_t>(i), row.data());
    EXPECT_EQ(row, std::vector<float>(all.begin() + picked[i] * cols,
                                      all.begin() + (picked[i] + 1) * cols));
  }
  // BF16 rounding of the dequantised values, for uploads.
  const std::vector<uint16_t> bits = m.ToBf16();
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(bits[i], F32ToBf16(all[i])) << i;
}

TEST(QuantizeInt8Test, MatrixBecomesOneOwnedInt8BlockWithRowRangesAndSelections) {
  for (const cpu::QuantLayout layout : kLayouts) {
    SCOPED_TRACE(cpu::QuantLayoutName(layout));
    std::mt19937 rng(2);
    const int64_t cols = 45;
    const WeightMatrix source = MixedMatrix(rng, cols);
    const WeightMatrix m = QuantizeInt8(source, layout);
    const int64_t scale_bytes = int64_t{sizeof(cpu::Int8Scale)};
    EXPECT_EQ(m.bytes(),
              layout == cpu::QuantLayout::kRows
                  ? 12 * cols + 12 * Int8Groups(cols) * scale_bytes
                  : cpu::Int8PanelBytes(cols) + cpu::QuantPanelScales(cols) * scale_bytes);
    const std::vector<float> wide = source.ToF32();
    std::vector<int8_t> q(wide.size());
    std::vector<cpu::Int8Scale> scales(12 * Int8Groups(cols));
    std::vector<float> want(wide.size());
    cpu::QuantizeInt8Weights(wide.data(), 12, cols, q.data(), scales.data());
    cpu::DequantizeInt8Rows(q.data(), scales.data(), 12, cols, want.data());
    ExpectQuantisedMatrix(m, source, WeightFormat::kInt8, layout, want);
  }
}

// An int4 block's matrix as the kernels take it.
cpu::Int4Matrix Int4Of(const WeightMatrix::Block& b) {
  return {static_cast<const uint8_t*>(b.data), b.scales, b.layout, b.first};
}

TEST(QuantizeInt4Test, LoadsInTheLayoutThisCpuReadsFastest) {
  std::mt19937 rng(4);
  const WeightMatrix m = QuantizeInt4(MixedMatrix(rng, 45));
  ASSERT_EQ(m.blocks().size(), 1u);
  EXPECT_EQ(m.blocks()[0].layout, cpu::PreferredInt4Layout());
}

TEST(QuantizeInt4Test, MatrixBecomesOneOwnedInt4BlockWithRowRangesAndSelections) {
  for (const cpu::QuantLayout layout : kLayouts) {
    SCOPED_TRACE(cpu::QuantLayoutName(layout));
    std::mt19937 rng(4);
    const int64_t cols = 45;
    const WeightMatrix source = MixedMatrix(rng, cols);
    const WeightMatrix m = QuantizeInt4(source, layout);
    const int64_t scale_bytes = int64_t{sizeof(cpu::Int8Scale)};
    EXPECT_EQ(m.bytes(),
              layout == cpu::QuantLayout::kRows
                  ? 12 * cpu::Int4RowBytes(cols) + 12 * Int8Groups(cols) * scale_bytes
                  : cpu::Int4PanelBytes(cols) + cpu::QuantPanelScales(cols) * scale_bytes);
    const std::vector<float> wide = source.ToF32();
    std::vector<uint8_t> packed(static_cast<size_t>(12 * cpu::Int4RowBytes(cols)));
    std::vector<cpu::Int8Scale> scales(12 * Int8Groups(cols));
    std::vector<float> want(wide.size());
    cpu::QuantizeInt4Weights(wide.data(), 12, cols, packed.data(), scales.data());
    cpu::DequantizeInt4Rows(packed.data(), scales.data(), 12, cols, want.data());
    ExpectQuantisedMatrix(m, source, WeightFormat::kInt4, layout, want);
  }
}

// An int4 block computes what the int8 block of its values does, bit for bit (gemm_int4.h), in
// either layout, whole or as a row range from inside a panel, in a stack beside BF16 rows, in
// both activation modes.
TEST(QuantizeInt4Test, ProjectGivesTheInt8BlockOfTheSameValuesBits) {
  std::mt19937 rng(5);
  for (const cpu::QuantLayout layout : kLayouts) {
    for (const cpu::Int8Activations activations :
         {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
      for (const int64_t rows : {1, 4, 16, 40}) {
        for (const int64_t in : {5, 33, 130}) {
          SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in << " "
                                            << cpu::Int8ActivationsName(activations) << " "
                                            << cpu::QuantLayoutName(layout));
          const WeightMatrix source = MixedMatrix(rng, in);
          const WeightMatrix int4 = QuantizeInt4(source, layout).RowRange(1, 9);
          std::vector<int8_t> values(static_cast<size_t>(9 * in));
          std::vector<cpu::Int8Scale> scales(9 * Int8Groups(in));
          cpu::UnpackInt4Outputs(Int4Of(int4.blocks()[0]), in, 0, 9, values.data(), scales.data());
          const WeightMatrix int8 =
              WeightMatrix::FromInt8(std::move(values), std::move(scales), 9, in);
          const WeightMatrix w4 = WeightMatrix::Stack({source.RowRange(0, 3), int4});
          const WeightMatrix w8 = WeightMatrix::Stack({source.RowRange(0, 3), int8});
          const std::vector<float> x = Normal(rng, rows * in);
          std::vector<float> got(static_cast<size_t>(rows * 12)), want(got.size());
          Project(x.data(), w4, got.data(), rows, false, {.int8 = activations});
          Project(x.data(), w8, want.data(), rows, false, {.int8 = activations});
          ASSERT_EQ(got, want);
        }
      }
    }
  }
}

// An int8 block in panels computes what the rows layout does, bit for bit (gemm_int8.h), whole or
// as a row range from inside a panel, in a stack beside BF16 rows, in both activation modes, at
// row counts within one tile and past it.
TEST(QuantizeInt8Test, ProjectGivesTheRowsLayoutsBitsFromPanels) {
  std::mt19937 rng(6);
  for (const cpu::Int8Activations activations :
       {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
    for (const int64_t rows : {1, 4, 16, 17, 40}) {
      for (const int64_t in : {5, 33, 130}) {
        for (const bool accumulate : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "rows=" << rows << " in=" << in << " "
                       << cpu::Int8ActivationsName(activations) << " accumulate=" << accumulate);
          const WeightMatrix source = MixedMatrix(rng, in);
          const WeightMatrix panels =
              QuantizeInt8(source, cpu::QuantLayout::kPanels).RowRange(1, 9);
          const WeightMatrix by_rows = QuantizeInt8(source, cpu::QuantLayout::kRows).RowRange(1, 9);
          const WeightMatrix w_panels = WeightMatrix::Stack({source.RowRange(0, 3), panels});
          const WeightMatrix w_rows = WeightMatrix::Stack({source.RowRange(0, 3), by_rows});
          const std::vector<float> x = Normal(rng, rows * in);
          std::vector<float> got = Normal(rng, rows * 12), want = got;
          Project(x.data(), w_panels, got.data(), rows, accumulate, {.int8 = activations});
          Project(x.data(), w_rows, want.data(), rows, accumulate, {.int8 = activations});
          ASSERT_EQ(got, want);
        }
      }
    }
  }
}

// Project over BF16, f32 and int8 blocks against the reference Linear on ToF32(): f32 kernels are
// within γ_(in+1)·Σ|terms| (float_bounds.h); int8 rows form each term with up to two roundings
// (gemm_int8.h) and ToF32 rounds their weights once more, so they are within γ_(in+3)·Σ|terms|.
TEST(QuantizeInt8Test, ProjectMatchesTheReferenceOnTheDequantisedValues) {
  std::mt19937 rng(3);
  for (const int64_t rows : {1, 3, 17, 40, 150}) {  // 150: past every tile row limit
    for (const int64_t in : {5, 33, 130}) {
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "rows=" << rows << " in=" << in << " accumulate=" << accumulate);
        const WeightMatrix source = MixedMatrix(rng, in);
        // Int8 rows between BF16 and f32 ones: every kind of block in one product.
        const WeightMatrix w = WeightMatrix::Stack(
            {source.RowRange(0, 3), QuantizeInt8(source.RowRange(3, 9), cpu::QuantLayout::kRows)});
        const std::vector<float> wide = w.ToF32(), x = Normal(rng, rows * in);
        const std::vector<float> y0 = Normal(rng, rows * w.rows());
        std::vector<float> got = y0, want = y0;
        Project(x.data(), w, got.data(), rows, accumulate);
        ref::Linear(x.data(), wide.data(), want.data(), rows, in, w.rows(), accumulate);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t o = 0; o < w.rows(); ++o) {
            double mass = accumulate ? std::fabs(y0[r * w.rows() + o]) : 0.0;
            for (int64_t k = 0; k < in; ++k) mass += std::fabs(x[r * in + k] * wide[o * in + k]);
            ASSERT_LE(std::fabs(double{got[r * w.rows() + o]} - want[r * w.rows() + o]),
                      testing::FloatGamma(in + 3) * mass + 1e-30)
                << "row " << r << " output " << o;
          }
        }
      }
    }
  }
}

std::string TempDir(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("dscale_" + name + "_" + std::to_string(::getpid())))
      .string();
}

// A BF16 checkpoint loaded with --weights int8 or int4: projections int8 or int4 and the LM
// head int8, with the values QuantizeProjections gives the in-memory weights, the embedding still
// BF16 in place (and readable after its pages left resident memory, when tied).
TEST(QuantizeInt8Test, CheckpointsLoadWithQuantisedProjectionsAndTheEmbeddingAsStored) {
  for (const auto& [mode, tie] :
       {std::pair{WeightsMode::kInt8, false}, std::pair{WeightsMode::kInt8, true},
        std::pair{WeightsMode::kInt4, false}, std::pair{WeightsMode::kInt4, true}}) {
    SCOPED_TRACE(::testing::Message() << WeightsModeName(mode) << " tie=" << tie);
    const WeightFormat projections =
        mode == WeightsMode::kInt4 ? WeightFormat::kInt4 : WeightFormat::kInt8;
    DecoderConfig config = testing::OddTinyConfig();
    config.tie_word_embeddings = tie;
    const std::string dir = TempDir("int8_load");
    ASSERT_TRUE(WriteRandomCheckpoint(dir, config, 5, DType::kBF16).ok());
    const Result<DecoderModel> model = DecoderModel::Load(dir, mode);
    std::filesystem::remove_all(dir);  // the mapping keeps the data readable
    ASSERT_TRUE(model.ok()) << model.status().message();
    const DecoderWeights& w = model->weights();
    DecoderWeights want = RandomDecoderWeights(config, 5, DType::kBF16);
    QuantizeProjections(&want, mode);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      for (const WeightMatrix* m :
           {&w.layers[l].qkv, &w.layers[l].o_proj, &w.layers[l].gate_up, &w.layers[l].down}) {
        for (const WeightMatrix::Block& b : m->blocks()) EXPECT_EQ(b.format, projections);
      }
      EXPECT_EQ(w.layers[l].qkv.ToF32(), want.layers[l].qkv.ToF32()) << "layer " << l;
      EXPECT_EQ(w.layers[l].down.ToF32(), want.layers[l].down.ToF32()) << "layer " << l;
    }
    ASSERT_FALSE(w.lm_head.empty());
    EXPECT_EQ(w.lm_head.blocks()[0].format, WeightFormat::kInt8);
    EXPECT_EQ(w.lm_head.ToF32(), want.lm_head.ToF32());
    ASSERT_EQ(w.embed.blocks().size(), 1u);
    EXPECT_EQ(w.embed.blocks()[0].format, WeightFormat::kBF16);
    EXPECT_EQ(w.embed.ToF32(), want.embed.ToF32());
  }
}

// The int8 and int4 models' forwards against the float64 reference forward over their
// dequantised weights, within the int8 order bound (logit_bounds.h; int4 runs the int8 kernels).
class QuantizedForwardTest : public ::testing::TestWithParam<WeightsMode> {};

TEST_P(QuantizedForwardTest, MatchesTheReferenceForwardOnTheDequantisedWeights) {
  const DecoderConfig config = testing::OddTinyConfig();
  DecoderWeights weights = RandomDecoderWeights(config, 7, DType::kF32);
  QuantizeProjections(&weights, GetParam());
  DecoderModel model(config, std::move(weights));
  const std::vector<int32_t> tokens = testing::RandomTokens(37, config.vocab_size, 1);
  const testing::ReferenceOutput expected =
      testing::ReferenceForward(config, model.weights(), tokens);
  PagedKvCache cache(model.KvShape(16, 3).WithDtype(KvDtype::kF32));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 37).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, tokens, cache, /*all_logits=*/true);
  ForwardOutput out;
  ASSERT_TRUE(model.Forward(batch, cache, &out).ok());
  const std::vector<double> bounds = testing::Int8TargetLogitBounds(model, 37, KvDtype::kF32);
  ASSERT_EQ(out.logits.size(), expected.logits.size());
  for (size_t i = 0; i < out.logits.size(); ++i) {
    ASSERT_LE(std::fabs(double{out.logits[i]} - expected.logits[i]),
              2.0 * bounds[i % bounds.size()])
        << "logit " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, QuantizedForwardTest,
                         ::testing::Values(WeightsMode::kInt8, WeightsMode::kInt4),
                         [](const ::testing::TestParamInfo<WeightsMode>& info) {
                           return std::string(WeightsModeName(info.param));
                         });

TEST(QuantizeInt8Test, WeightsModeSpellings) {
  for (const WeightsMode mode :
       {WeightsMode::kAsStored, WeightsMode::kMapped, WeightsMode::kInt8, WeightsMode::kInt4}) {
    EXPECT_EQ(ParseWeightsMode(WeightsModeName(mode)).value(), mode);
    EXPECT_EQ(IsQuantized(mode), mode == WeightsMode::kInt8 || mode == WeightsMode::kInt4);
  }
  EXPECT_EQ(WeightsModeName(WeightsMode::kMapped), "mapped");
  EXPECT_EQ(WeightsModeName(WeightsMode::kInt4), "int4");
  const Result<WeightsMode> bad = ParseWeightsMode("int3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--weights"), std::string::npos);
  EXPECT_NE(bad.status().message().find("int3"), std::string::npos);
  EXPECT_NE(bad.status().message().find("int4"), std::string::npos);  // the accepted values
}

}  // namespace
}  // namespace dscale
