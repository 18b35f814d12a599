// WeightMatrix: stacking and row ranges without copies, widening, and Project over blocks of
// mixed storage against the reference Linear on the widened matrix (bound: γ_(in+1)·Σ|terms|,
// float_bounds.h); and checkpoints whose BF16 tensors load in place.

#include "model/weight_matrix.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "float_bounds.h"
#include "kernels/reference/reference_kernels.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

std::vector<float> Normal(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<uint16_t> ToBf16Bits(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = F32ToBf16(values[i]);
  return bits;
}

// Rows 0-2 BF16, rows 3-6 f32, rows 7-11 BF16: the stacked layouts a layer uses.
WeightMatrix MixedMatrix(std::mt19937& rng, int64_t cols) {
  return WeightMatrix::Stack({WeightMatrix::FromBf16(ToBf16Bits(Normal(rng, 3 * cols)), 3, cols),
                              WeightMatrix::FromF32(Normal(rng, 4 * cols), 4, cols),
                              WeightMatrix::FromBf16(ToBf16Bits(Normal(rng, 5 * cols)), 5, cols)});
}

TEST(WeightMatrixTest, StackAndRowRangeShareStorage) {
  std::mt19937 rng(1);
  const WeightMatrix m = MixedMatrix(rng, 7);
  EXPECT_EQ(m.rows(), 12);
  EXPECT_EQ(m.cols(), 7);
  EXPECT_EQ(m.size(), 84u);
  EXPECT_EQ(m.bytes(), (3 + 5) * 7 * 2 + 4 * 7 * 4);
  const std::vector<float> all = m.ToF32();
  const WeightMatrix middle = m.RowRange(2, 7);  // crosses all three blocks
  ASSERT_EQ(middle.blocks().size(), 3u);
  EXPECT_EQ(middle.rows(), 7);
  const std::vector<float> part = middle.ToF32();
  EXPECT_EQ(part, std::vector<float>(all.begin() + 2 * 7, all.begin() + 9 * 7));
  // Widening and rounding back are exact for the BF16 rows, nearest-even for the f32 ones.
  const std::vector<uint16_t> bits = m.ToBf16();
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(bits[i], F32ToBf16(all[i])) << i;
}

TEST(WeightMatrixTest, ProjectMatchesTheReferenceOverMixedBlocks) {
  std::mt19937 rng(2);
  for (const int64_t rows : {1, 3, 17, 40}) {
    for (const int64_t in : {5, 33, 130}) {
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "rows=" << rows << " in=" << in << " accumulate=" << accumulate);
        const WeightMatrix w = MixedMatrix(rng, in);
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
                      testing::FloatGamma(in + 1) * mass + 1e-30)
                << "row " << r << " output " << o;
          }
        }
      }
    }
  }
}

TEST(WeightMatrixTest, GatherRowsWidensTheNamedRows) {
  std::mt19937 rng(3);
  const WeightMatrix table = MixedMatrix(rng, 9);
  const std::vector<float> all = table.ToF32();
  const int32_t tokens[] = {11, 0, 4, 4, 7};
  std::vector<float> x(5 * 9);
  GatherRows(table, tokens, 5, x.data());
  for (int i = 0; i < 5; ++i) {
    for (int c = 0; c < 9; ++c) EXPECT_EQ(x[i * 9 + c], all[tokens[i] * 9 + c]);
  }
}

// BF16 checkpoints load as BF16 (copied onto huge pages, or with --weights mapped read in place),
// F32 and F16 ones as f32, every way with the checkpoint's values.
TEST(WeightMatrixTest, Bf16CheckpointsLoadAsBf16AndF32OnesAsF32) {
  const DecoderConfig config = testing::OddTinyConfig();
  for (const auto& [dtype, mode] : {std::pair{DType::kBF16, WeightsMode::kAsStored},
                                    std::pair{DType::kBF16, WeightsMode::kMapped},
                                    std::pair{DType::kF32, WeightsMode::kAsStored},
                                    std::pair{DType::kF16, WeightsMode::kAsStored}}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + std::string(WeightsModeName(mode)));
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("dscale_weights_" + std::to_string(::getpid())))
            .string();
    ASSERT_TRUE(WriteRandomCheckpoint(dir, config, 5, dtype).ok());
    const Result<DecoderModel> model = DecoderModel::Load(dir, mode);
    std::filesystem::remove_all(dir);  // the mapping keeps the data readable
    ASSERT_TRUE(model.ok()) << model.status().message();
    const WeightMatrix& qkv = model->weights().layers[0].qkv;
    // Copied BF16: q, k and v in one block (resident_weights.h); otherwise stacked without a copy.
    const bool copied = dtype == DType::kBF16 && mode == WeightsMode::kAsStored;
    ASSERT_EQ(qkv.blocks().size(), copied ? 1u : 3u);
    const WeightFormat held = dtype == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
    for (const WeightMatrix::Block& b : qkv.blocks()) EXPECT_EQ(b.format, held);
    EXPECT_EQ(model->weights().embed.bytes(),
              config.vocab_size * config.hidden_size * (dtype == DType::kBF16 ? 2 : 4));
    // The same values as the in-memory weights of that dtype.
    const DecoderWeights in_memory = RandomDecoderWeights(config, 5, dtype);
    EXPECT_EQ(qkv.ToF32(), in_memory.layers[0].qkv.ToF32());
    EXPECT_EQ(model->weights().embed.ToF32(), in_memory.embed.ToF32());
  }
}

}  // namespace
}  // namespace dscale
