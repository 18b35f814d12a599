// The op table (op_table.h) as one parameterised test: every (op, format, variant, shape) cell
// runs the variant on a generated call and compares its result with the reference kernel's,
// element by element, within the op's stated bound. The cells are the same on every machine; a
// variant this CPU cannot run under DSCALE_CPU_ISA's cap reports itself skipped, so an AVX2-only
// EPYC, an AVX-512 Zen 4 and an AMX Xeon each check what they run and name what they do not.

#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa_cap.h"
#include "op_table.h"

namespace dscale::testing {
namespace {

struct OpCell {
  const OpSpec* op = nullptr;
  OpFormat format = OpFormat::kF32;
  OpVariant variant;
  OpShape shape;
};

std::string CellName(const OpCell& cell);

// What a failure prints for its parameter.
void PrintTo(const OpCell& cell, std::ostream* os) { *os << CellName(cell); }

std::string CellName(const OpCell& cell) {
  std::string name = std::string(cell.op->name) + "_" + std::string(OpFormatName(cell.format)) +
                     "_" + cell.variant.name + "_" + OpShapeName(cell.shape);
  for (char& ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch)) == 0) ch = '_';
  }
  return name;
}

std::vector<OpCell> AllCells() {
  std::vector<OpCell> cells;
  for (const OpSpec& op : OpTable()) {
    for (const OpFormat format : op.formats) {
      for (const OpVariant& variant : op.variants(format)) {
        for (const OpShape& shape : op.test_shapes) cells.push_back({&op, format, variant, shape});
      }
    }
  }
  return cells;
}

// A seed per cell's call (not per variant: every variant of a format sees the same inputs).
uint32_t Seed(const OpCell& cell) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (const char ch : std::string(cell.op->name) + std::string(OpFormatName(cell.format)) +
                           OpShapeName(cell.shape)) {
    hash = (hash ^ static_cast<unsigned char>(ch)) * 16777619u;
  }
  return hash;
}

class OpParityTest : public ::testing::TestWithParam<OpCell> {};

TEST_P(OpParityTest, MatchesTheReference) {
  const OpCell& cell = GetParam();
  if (!cell.variant.supported) {
    GTEST_SKIP() << "this CPU under DSCALE_CPU_ISA="
                 << cpu::CpuIsaCapName(cpu::CpuIsaCapFromEnvironment()) << " cannot run "
                 << cell.variant.name;
  }
  const OpCall call = cell.op->make(cell.shape, cell.format, Seed(cell));
  std::vector<float> want = call.y0, got = call.y0;
  cell.op->run_reference(call, want.data());
  cell.op->run_variant(call, cell.variant, got.data());
  EXPECT_EQ(FirstOutOfBound(got, want, cell.op->tolerance(call, want)), "")
      << "bound: " << cell.op->bound;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpParityTest, ::testing::ValuesIn(AllCells()),
                         [](const ::testing::TestParamInfo<OpCell>& info) {
                           return CellName(info.param);
                         });

// Every row can be checked somewhere: each format has a variant every x86-64 CPU runs, and
// shapes to run it at, here and in the benchmark.
TEST(OpTableTest, EveryFormatHasAVariantEveryCpuRuns) {
  for (const OpSpec& op : OpTable()) {
    EXPECT_FALSE(op.test_shapes.empty()) << op.name;
    EXPECT_FALSE(op.model_shapes.empty()) << op.name;
    EXPECT_FALSE(op.bound.empty()) << op.name;
    for (const OpFormat format : op.formats) {
      bool portable = false;
      for (const OpVariant& variant : op.variants(format)) {
        portable = portable || variant.name == "portable" || variant.id == kDispatchVariant;
      }
      EXPECT_TRUE(portable) << op.name << " " << OpFormatName(format);
    }
  }
}

}  // namespace
}  // namespace dscale::testing
