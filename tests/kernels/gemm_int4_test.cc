// The int4 weight format (gemm_int4.h): its quantiser against the format's rounding rule, its
// unpacking (vector and portable) against the packed nibbles, and LinearInt4 against LinearInt8
// on the unpacked values. An int4 matrix is that int8 matrix, and every int8 variant gives the
// same bits (gemm_int8.h), so LinearInt4 must give LinearInt8's bits exactly, in both activation
// modes, at odd sizes (short last groups, partial chunks), for the few-row fused kernel and the
// unpacking path alike.

#include "kernels/cpu/gemm_int4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale {
namespace {

using testing::RandomNormal;

struct Int4Matrix {
  std::vector<uint8_t> packed;  // one leading byte, so the matrix starts unaligned
  std::vector<cpu::Int8Scale> scales;
  const uint8_t* data() const { return packed.data() + 1; }
};

// Random weights with groups of mixed magnitudes and some all-zero ones, quantised.
Int4Matrix Quantized(std::mt19937& rng, int64_t out, int64_t in, bool vector = true) {
  std::vector<float> w = RandomNormal(rng, out * in);
  std::uniform_real_distribution<float> exponent(-4.0f, 1.0f);
  std::bernoulli_distribution zero(0.05);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t g = 0; g < cpu::Int8Groups(in); ++g) {
      const float m = zero(rng) ? 0.0f : std::pow(10.0f, exponent(rng));
      for (int64_t i = g * 32; i < std::min(in, (g + 1) * 32); ++i) w[o * in + i] *= m;
    }
  }
  Int4Matrix m;
  m.packed.resize(static_cast<size_t>(out * cpu::Int4RowBytes(in) + 1));
  m.scales.resize(static_cast<size_t>(out * cpu::Int8Groups(in)));
  cpu::QuantizeInt4Weights(w.data(), out, in, m.packed.data() + 1, m.scales.data(), vector);
  return m;
}

std::vector<int8_t> Unpacked(const Int4Matrix& m, int64_t out, int64_t in, bool vector = true) {
  std::vector<int8_t> q(static_cast<size_t>(out * in));
  cpu::UnpackInt4Rows(m.data(), out, in, q.data(), vector);
  return q;
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "element " << i << ": " << got[i] << " against " << want[i];
  }
}

TEST(QuantizeInt4WeightsTest, RoundsEachGroupToItsScaleAndPadsWithZero) {
  std::mt19937 rng(7);
  for (const int64_t in : {1, 5, 31, 32, 33, 64, 100, 257}) {
    SCOPED_TRACE(::testing::Message() << "in " << in);
    const int64_t out = 5, groups = cpu::Int8Groups(in);
    std::vector<float> w = RandomNormal(rng, out * in);
    w[0] = 0.0f;  // a value that must stay exactly zero
    std::vector<uint8_t> packed(static_cast<size_t>(out * cpu::Int4RowBytes(in)));
    std::vector<cpu::Int8Scale> scales(static_cast<size_t>(out * groups));
    cpu::QuantizeInt4Weights(w.data(), out, in, packed.data(), scales.data());
    std::vector<float> back(static_cast<size_t>(out * in));
    cpu::DequantizeInt4Rows(packed.data(), scales.data(), out, in, back.data());
    const std::vector<int8_t> q = [&] {
      std::vector<int8_t> v(static_cast<size_t>(out * in));
      cpu::UnpackInt4Rows(packed.data(), out, in, v.data());
      return v;
    }();
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t g = 0; g < groups; ++g) {
        float largest = 0.0f;
        for (int64_t i = g * 32; i < std::min(in, (g + 1) * 32); ++i) {
          largest = std::max(largest, std::fabs(w[o * in + i]));
        }
        const cpu::Int8Scale scale = scales[o * groups + g];
        ASSERT_EQ(scale, cpu::Int8ScaleAtLeast(largest / cpu::kInt4Max));
        const float s = cpu::Int8ScaleValue(scale);
        for (int64_t i = g * 32; i < std::min(in, (g + 1) * 32); ++i) {
          const int64_t at = o * in + i;
          ASSERT_LE(std::abs(q[at]), cpu::kInt4Max);
          const float want = s == 0.0f ? 0.0f : std::nearbyint(w[at] / s);
          ASSERT_EQ(q[at], static_cast<int8_t>(want)) << "weight " << at;
          ASSERT_EQ(back[at], q[at] * s);
          // Within half a step of the weight, plus the division's rounding.
          ASSERT_LE(std::fabs(back[at] - w[at]), 0.5f * s * (1.0f + 1e-6f) + 1e-30f);
        }
        // A short last group's padding holds q = 0: nibbles 8.
        const uint8_t* group = packed.data() + o * cpu::Int4RowBytes(in) + g * 16;
        for (int64_t i = in - g * 32; i < 32 && g == groups - 1; ++i) {
          const uint8_t nibble = i < 16 ? group[i] & 0x0f : group[i - 16] >> 4;
          ASSERT_EQ(nibble, 8) << "padding " << i;
        }
      }
    }
    EXPECT_EQ(back[0], 0.0f);
  }
}

TEST(QuantizeInt4WeightsTest, VectorAndPortableLoopsGiveTheSameBytes) {
  for (const int64_t in : {1, 31, 32, 33, 96, 200}) {
    std::mt19937 a(in), b(in);
    const Int4Matrix vector = Quantized(a, 7, in, true);
    const Int4Matrix portable = Quantized(b, 7, in, false);
    EXPECT_EQ(vector.packed, portable.packed) << "in " << in;
    EXPECT_EQ(vector.scales, portable.scales) << "in " << in;
    EXPECT_EQ(Unpacked(vector, 7, in, true), Unpacked(vector, 7, in, false)) << "in " << in;
  }
}

TEST(QuantizeInt4WeightsTest, AllZeroGroupHasScaleZero) {
  const std::vector<float> w(40, 0.0f);
  std::vector<uint8_t> packed(static_cast<size_t>(cpu::Int4RowBytes(40)));
  std::vector<cpu::Int8Scale> scales(2, 1);
  cpu::QuantizeInt4Weights(w.data(), 1, 40, packed.data(), scales.data());
  EXPECT_EQ(scales, (std::vector<cpu::Int8Scale>{0, 0}));
  for (const uint8_t byte : packed) EXPECT_EQ(byte, 0x88);
}

// m's outputs in the panel layout, the first `first` of them only filling lanes before the view.
struct Panels {
  std::vector<uint8_t> values;
  std::vector<cpu::Int8Scale> scales;
};
Panels PackedPanels(const Int4Matrix& m, int64_t rows, int64_t in) {
  Panels p;
  p.values.resize(static_cast<size_t>(cpu::QuantPanels(0, rows) * cpu::Int4PanelBytes(in)));
  p.scales.resize(static_cast<size_t>(cpu::QuantPanels(0, rows) * cpu::QuantPanelScales(in)));
  cpu::PackInt4Panels(m.data(), m.scales.data(), rows, in, p.values.data(), p.scales.data());
  return p;
}

// How a case lays its matrix out: rows, or panels viewed from lane `first`.
struct Layout {
  cpu::QuantLayout layout = cpu::QuantLayout::kRows;
  int64_t first = 0;
};

// LinearInt4 (or one kernel of it) against LinearInt8 over the unpacked values: the same bits.
void ExpectInt8Bits(std::mt19937& rng, int64_t rows, int64_t in, int64_t out,
                    cpu::Int8Activations activations, bool accumulate, int64_t ldy,
                    std::optional<cpu::Int4Kernel> kernel = std::nullopt, Layout layout = {}) {
  SCOPED_TRACE(::testing::Message()
               << rows << " rows, in " << in << ", out " << out << ", "
               << cpu::Int8ActivationsName(activations) << (accumulate ? ", accumulate" : "")
               << ", ldy " << ldy << ", kernel "
               << (kernel ? cpu::Int4KernelName(*kernel) : std::string_view("dispatched")) << ", "
               << cpu::QuantLayoutName(layout.layout) << " from lane " << layout.first);
  const int64_t first = layout.first;
  const Int4Matrix m = Quantized(rng, first + out, in);
  const std::vector<int8_t> all = Unpacked(m, first + out, in);
  const std::vector<int8_t> q(all.begin() + first * in, all.end());
  const Panels panels = PackedPanels(m, first + out, in);
  const cpu::Int4Matrix w = layout.layout == cpu::QuantLayout::kRows
                                ? cpu::Int4Matrix{.values = m.data(), .scales = m.scales.data()}
                                : cpu::Int4Matrix{.values = panels.values.data(),
                                                  .scales = panels.scales.data(),
                                                  .layout = cpu::QuantLayout::kPanels,
                                                  .first = first};
  std::vector<float> x = RandomNormal(rng, rows * in);
  if (rows > 1) std::fill(x.begin() + in, x.begin() + 2 * in, 0.0f);  // an all-zero row
  const std::vector<float> y0 = RandomNormal(rng, rows * ldy);
  std::vector<float> got = y0, want = y0;
  if (kernel) {
    cpu::LinearInt4Via(*kernel, x.data(), w, got.data(), rows, in, out, accumulate, ldy,
                       activations);
  } else {
    cpu::LinearInt4(x.data(), w, got.data(), rows, in, out, accumulate, ldy, activations);
  }
  cpu::LinearInt8(x.data(), q.data(), m.scales.data() + first * cpu::Int8Groups(in), want.data(),
                  rows, in, out, accumulate, ldy, activations);
  ExpectSameBits(got, want);
}

// Matrices in the panel layout from each of these lanes.
constexpr int64_t kPanelFirsts[] = {0, 5, 15};

TEST(LinearInt4Test, GivesLinearInt8sBitsOnTheUnpackedValues) {
  std::mt19937 rng(11);
  for (const cpu::Int8Activations activations :
       {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
    for (const int64_t rows : {1, 2, 3, 5, 6, 7, 8, 9, 17}) {
      for (const int64_t in : {1, 31, 33, 100, 257, 520}) {
        for (const int64_t out : {1, 7, 17, 40}) {
          ExpectInt8Bits(rng, rows, in, out, activations, /*accumulate=*/false, out);
        }
      }
    }
  }
}

// Each kernel this CPU runs, for any row count (in passes where it takes fewer rows at once):
// whole panels and tiles of 16 outputs and the outputs after them, short last groups, several
// passes and row tiles. (The kernels are named by SupportedInt4Kernels; a CPU without one checks
// the others, and the op table's parity test names the ones it skips.)
TEST(LinearInt4Test, EveryKernelGivesLinearInt8sBits) {
  std::mt19937 rng(29);
  for (const cpu::Int4Kernel kernel : cpu::SupportedInt4Kernels()) {
    for (const int64_t rows : {1, 2, 7, 8, 15, 16, 17, 33}) {
      for (const int64_t in : {31, 257, 520}) {
        for (const int64_t out : {1, 16, 40}) {
          for (const Layout layout : {Layout{}, Layout{cpu::QuantLayout::kPanels, 0},
                                      Layout{cpu::QuantLayout::kPanels, 15}}) {
            if (!cpu::Int4KernelReads(kernel, layout.layout)) continue;
            ExpectInt8Bits(rng, rows, in, out, cpu::Int8Activations::kInt8, /*accumulate=*/false,
                           out, kernel, layout);
          }
        }
      }
      for (const Layout layout : {Layout{}, Layout{cpu::QuantLayout::kPanels, 5}}) {
        if (!cpu::Int4KernelReads(kernel, layout.layout)) continue;
        ExpectInt8Bits(rng, rows, 96, 37, cpu::Int8Activations::kInt8, /*accumulate=*/true, 45,
                       kernel, layout);
      }
    }
  }
}

// Many rows against long panels, through each kernel that reads the panel layout: the AMX tiles
// take a panel's groups in chunks and the rows in blocks of row tiles (gemm_int4_amx.cc), so these
// cross several chunks (the last one short), several blocks (the last one short), and end in
// whole tiles, a last row taken by AVX512-VNNI, or a last tile of 10 rows.
TEST(LinearInt4Test, PanelKernelsAcrossChunksAndRowBlocks) {
  std::mt19937 rng(41);
  for (const cpu::Int4Kernel kernel : cpu::SupportedInt4Kernels()) {
    if (!cpu::Int4KernelReads(kernel, cpu::QuantLayout::kPanels)) continue;
    for (const int64_t rows : {64, 81, 90}) {
      for (const bool accumulate : {false, true}) {
        ExpectInt8Bits(rng, rows, 1100, 37, cpu::Int8Activations::kInt8, accumulate, 41, kernel,
                       {cpu::QuantLayout::kPanels, 5});
      }
    }
  }
}

// The panel layout through LinearInt4's own choice, in both activation modes, from several
// lanes of the first panel and across threads: every CPU reads it (unpacked chunks where it has
// no panel kernel).
TEST(LinearInt4Test, PanelLayoutGivesLinearInt8sBits) {
  std::mt19937 rng(31);
  for (const cpu::Int8Activations activations :
       {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
    for (const int64_t first : kPanelFirsts) {
      for (const int64_t rows : {1, 3, 16, 17, 40}) {
        for (const int64_t out : {1, 11, 16, 33}) {
          ExpectInt8Bits(rng, rows, 100, out, activations, /*accumulate=*/false, out, std::nullopt,
                         {cpu::QuantLayout::kPanels, first});
        }
      }
      ExpectInt8Bits(rng, 2, 2048, 300, activations, /*accumulate=*/true, 301, std::nullopt,
                     {cpu::QuantLayout::kPanels, first});
    }
  }
}

TEST(Int4PanelsTest, RowsAndUnpackedOutputsComeBackFromEveryLane) {
  std::mt19937 rng(37);
  for (const int64_t in : {1, 31, 32, 33, 100, 257}) {
    const int64_t rows = 37, groups = cpu::Int8Groups(in);
    const Int4Matrix m = Quantized(rng, rows, in);
    const Panels p = PackedPanels(m, rows, in);
    // Spare lanes of the last panel: q = 0, scale 0.
    const std::vector<int8_t> want = Unpacked(m, rows, in);
    for (const int64_t first : kPanelFirsts) {
      if (first >= rows) continue;
      const cpu::Int4Matrix w{.values = p.values.data(),
                              .scales = p.scales.data(),
                              .layout = cpu::QuantLayout::kPanels,
                              .first = first};
      for (const bool vector : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << "in " << in << ", lane " << first << (vector ? ", vector" : ", portable"));
        const int64_t n = rows - first;
        std::vector<int8_t> q(static_cast<size_t>(n * in));
        std::vector<cpu::Int8Scale> scales(static_cast<size_t>(n * groups));
        cpu::UnpackInt4Outputs(w, in, 0, n, q.data(), scales.data(), vector);
        EXPECT_TRUE(std::equal(q.begin(), q.end(), want.begin() + first * in));
        EXPECT_TRUE(std::equal(scales.begin(), scales.end(), m.scales.begin() + first * groups));
        // A range inside one panel, and one across two.
        for (const auto& [o0, count] : {std::pair<int64_t, int64_t>{1, 3}, {2, 17}}) {
          if (o0 + count > n) continue;
          std::vector<int8_t> part(static_cast<size_t>(count * in));
          std::vector<cpu::Int8Scale> part_scales(static_cast<size_t>(count * groups));
          cpu::UnpackInt4Outputs(w, in, o0, count, part.data(), part_scales.data(), vector);
          EXPECT_TRUE(std::equal(part.begin(), part.end(), want.begin() + (first + o0) * in));
        }
      }
      std::vector<uint8_t> row(static_cast<size_t>(cpu::Int4RowBytes(in)));
      std::vector<cpu::Int8Scale> row_scales(static_cast<size_t>(groups));
      for (int64_t o = 0; o + first < rows; o += 7) {
        cpu::Int4RowOf(w, in, o, row.data(), row_scales.data());
        const uint8_t* source = m.data() + (first + o) * cpu::Int4RowBytes(in);
        EXPECT_TRUE(std::equal(row.begin(), row.end(), source)) << "row " << o;
        EXPECT_TRUE(std::equal(row_scales.begin(), row_scales.end(),
                               m.scales.begin() + (first + o) * groups));
      }
    }
    // The last panel's spare lanes hold q = 0 and scale 0.
    const cpu::Int4Matrix last{
        .values = p.values.data(), .scales = p.scales.data(), .layout = cpu::QuantLayout::kPanels};
    std::vector<uint8_t> row(static_cast<size_t>(cpu::Int4RowBytes(in)));
    std::vector<cpu::Int8Scale> row_scales(static_cast<size_t>(groups));
    cpu::Int4RowOf(last, in, rows, row.data(), row_scales.data());
    for (const uint8_t byte : row) ASSERT_EQ(byte, 0x88);
    for (const cpu::Int8Scale scale : row_scales) ASSERT_EQ(scale, 0);
  }
}

TEST(LinearInt4Test, KernelsReadTheirLayoutsOnly) {
  std::vector<float> x(32, 1.0f), y(1);
  std::vector<uint8_t> w(cpu::Int4PanelBytes(32), 0x88);
  std::vector<cpu::Int8Scale> scales(cpu::QuantPanelScales(32), 0);
  for (const cpu::Int4Kernel kernel : cpu::SupportedInt4Kernels()) {
    for (const cpu::QuantLayout layout : {cpu::QuantLayout::kRows, cpu::QuantLayout::kPanels}) {
      if (cpu::Int4KernelReads(kernel, layout)) continue;
      EXPECT_DEATH(cpu::LinearInt4Via(kernel, x.data(), {w.data(), scales.data(), layout}, y.data(),
                                      1, 32, 1, false),
                   "does not read this layout");
    }
  }
}

TEST(LinearInt4Test, OnlyUnpackedChunksTakeF32Activations) {
  const std::vector<cpu::Int4Kernel> kernels = cpu::SupportedInt4Kernels();
  ASSERT_EQ(kernels.front(), cpu::Int4Kernel::kUnpacked);
  std::vector<float> x(32, 1.0f), y(1);
  std::vector<uint8_t> w(16, 0x88);
  std::vector<cpu::Int8Scale> scales(1, 0);
  for (size_t k = 1; k < kernels.size(); ++k) {
    const cpu::QuantLayout layout = cpu::Int4KernelReads(kernels[k], cpu::QuantLayout::kRows)
                                        ? cpu::QuantLayout::kRows
                                        : cpu::QuantLayout::kPanels;
    std::vector<uint8_t> panel(cpu::Int4PanelBytes(32), 0x88);
    std::vector<cpu::Int8Scale> panel_scales(cpu::QuantPanelScales(32), 0);
    const cpu::Int4Matrix m = layout == cpu::QuantLayout::kRows
                                  ? cpu::Int4Matrix{w.data(), scales.data()}
                                  : cpu::Int4Matrix{panel.data(), panel_scales.data(), layout};
    EXPECT_DEATH(cpu::LinearInt4Via(kernels[k], x.data(), m, y.data(), 1, 32, 1, false, 0,
                                    cpu::Int8Activations::kF32),
                 "f32 activations");
  }
}

TEST(LinearInt4Test, AccumulatesIntoAColumnBlockOfAWiderY) {
  std::mt19937 rng(13);
  for (const cpu::Int8Activations activations :
       {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
    for (const int64_t rows : {1, 4, 8}) {
      ExpectInt8Bits(rng, rows, 96, 23, activations, /*accumulate=*/true, 31);
      ExpectInt8Bits(rng, rows, 96, 23, activations, /*accumulate=*/false, 31);
    }
  }
}

// Enough weights for the threads and several chunks of outputs (2048 inputs: 32 outputs a chunk).
TEST(LinearInt4Test, ManyOutputsAcrossThreadsAndChunks) {
  std::mt19937 rng(17);
  for (const int64_t rows : {1, 5, 16}) {
    ExpectInt8Bits(rng, rows, 2048, 300, cpu::Int8Activations::kInt8, false, 300);
  }
  ExpectInt8Bits(rng, 3, 2048, 300, cpu::Int8Activations::kF32, false, 300);
}

// Past every tile row limit: f32 activations go to LinearInt8's sgemm panels in wide chunks.
TEST(LinearInt4Test, ManyRowsInBothModes) {
  std::mt19937 rng(23);
  for (const cpu::Int8Activations activations :
       {cpu::Int8Activations::kInt8, cpu::Int8Activations::kF32}) {
    ExpectInt8Bits(rng, 150, 100, 70, activations, /*accumulate=*/true, 75);
  }
}

TEST(LinearInt4Test, NonFiniteActivationsTurnTheirRowNaN) {
  std::mt19937 rng(19);
  const int64_t rows = 2, in = 64, out = 9;
  const Int4Matrix m = Quantized(rng, out, in);
  std::vector<float> x = RandomNormal(rng, rows * in);
  x[in + 3] = std::numeric_limits<float>::infinity();
  std::vector<float> y(static_cast<size_t>(rows * out));
  cpu::LinearInt4(x.data(), m.data(), m.scales.data(), y.data(), rows, in, out, false, 0,
                  cpu::Int8Activations::kInt8);
  for (int64_t o = 0; o < out; ++o) {
    EXPECT_TRUE(std::isfinite(y[o])) << o;
    EXPECT_TRUE(std::isnan(y[out + o])) << o;
  }
}

TEST(LinearInt4Test, EmptyShapes) {
  std::vector<float> y = {1.0f, 2.0f};
  cpu::LinearInt4(nullptr, nullptr, nullptr, y.data(), 2, 0, 1);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f}));
  y = {1.0f, 2.0f};
  cpu::LinearInt4(nullptr, nullptr, nullptr, y.data(), 2, 0, 1, /*accumulate=*/true);
  EXPECT_EQ(y, (std::vector<float>{1.0f, 2.0f}));
  cpu::LinearInt4(nullptr, nullptr, nullptr, y.data(), 0, 5, 1);
  cpu::LinearInt4(nullptr, nullptr, nullptr, y.data(), 2, 5, 0);
  EXPECT_EQ(y, (std::vector<float>{1.0f, 2.0f}));
}

}  // namespace
}  // namespace dscale
