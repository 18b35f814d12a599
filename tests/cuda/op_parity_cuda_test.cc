// The op table's CUDA rows (tests/kernels/op_table.h): each (op, format) with a device kernel is
// run on the same generated calls as the CPU variants, at the same test shapes, and compared with
// the same reference. The bound is twice the op's CPU bound: the device's reductions, exp and
// rsqrt round differently from the CPU's, and each side is within the bound of the exact value.
// A new op with a CUDA kernel joins by adding one line to kCudaRows.
//
// Not here: attention (tests/cuda/attention_test.cc checks the device kernel against the CPU's
// on device-resident page tables) and the formats without a device kernel (int8, int4, BF16
// weights with f32 activations).

#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_bf16.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/softmax.h"
#include "kernels/kernel_test_util.h"
#include "kernels/op_table.h"

namespace dscale::testing {
namespace {

// What a device row's run needs: the test's stream and a cuBLAS context bound to it.
struct CudaEnv {
  cudaStream_t stream = nullptr;
  const cuda::GemmContext* gemm = nullptr;
};

template <typename T>
cuda::DeviceBuffer<T> Device(const std::vector<T>& host) {
  return cuda::DeviceBuffer<T>(host.data(), host.size());
}

// out[0, n) = the device buffer's values, after the stream's work.
void ToHost(const CudaEnv& env, const cuda::DeviceBuffer<float>& device, float* out) {
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(env.stream));
  device.CopyToHost(out);
}

void LinearF32(const OpCall& c, const CudaEnv& env, float* out) {
  const OpShape& s = c.shape;
  auto x = Device(c.x), w = Device(c.w), y = Device(c.y0);
  cuda::Linear(env.gemm->BindTo(env.stream), x.data(), w.data(), y.data(), s.rows, s.in, s.out,
               s.accumulate, env.stream);
  ToHost(env, y, out);
}

// The device's BF16 product takes BF16 activations: the rounding happens on the device.
void LinearBf16Bf16Act(const OpCall& c, const CudaEnv& env, float* out) {
  const OpShape& s = c.shape;
  auto x = Device(c.x), y = Device(c.y0);
  cuda::DeviceBuffer<cuda::Bf16> x16(c.x.size()), w16(c.w_bf16.size());
  w16.CopyFromHost(reinterpret_cast<const cuda::Bf16*>(c.w_bf16.data()));
  cuda::ConvertToBf16(x.data(), x16.data(), static_cast<int64_t>(c.x.size()), env.stream);
  cuda::LinearBf16(*env.gemm, x16.data(), w16.data(), y.data(), s.rows, s.in, s.out, s.accumulate,
                   env.stream);
  ToHost(env, y, out);
}

void RmsNorm(const OpCall& c, const CudaEnv& env, float* out) {
  auto x = Device(c.x), w = Device(c.w), y = Device(c.y0);
  cuda::RmsNorm(x.data(), w.data(), y.data(), c.shape.rows, c.shape.in, kRmsEps, env.stream);
  ToHost(env, y, out);
}

void HeadRmsNorm(const OpCall& c, const CudaEnv& env, float* out) {
  const OpShape& s = c.shape;
  auto x = Device(c.y0), w = Device(c.w);
  cuda::HeadRmsNorm(x.data(), w.data(), s.rows, s.heads, s.in, s.heads * s.in, kRmsEps, env.stream);
  ToHost(env, x, out);
}

void Rope(const OpCall& c, const CudaEnv& env, float* out) {
  const OpShape& s = c.shape;
  auto x = Device(c.y0);
  auto positions = Device(c.ids);
  cuda::ApplyRope(x.data(), positions.data(), s.rows, s.heads, s.in, s.heads * s.in, c.rope,
                  env.stream);
  ToHost(env, x, out);
}

void SwiGlu(const OpCall& c, const CudaEnv& env, float* out) {
  auto gate_up = Device(c.x), y = Device(c.y0);
  cuda::SwiGlu(gate_up.data(), y.data(), c.shape.rows, c.shape.in, env.stream);
  ToHost(env, y, out);
}

void Embedding(const OpCall& c, const CudaEnv& env, float* out) {
  const OpShape& s = c.shape;
  auto table = Device(c.w), y = Device(c.y0);
  auto ids = Device(c.ids);
  cuda::EmbeddingGather(table.data(), s.out, s.in, ids.data(), s.rows, y.data(), env.stream);
  ToHost(env, y, out);
}

void Softmax(const OpCall& c, const CudaEnv& env, float* out) {
  auto x = Device(c.y0);
  cuda::SoftmaxRows(x.data(), c.shape.rows, c.shape.in, env.stream);
  ToHost(env, x, out);
}

void Argmax(const OpCall& c, const CudaEnv& env, float* out) {
  auto x = Device(c.x);
  cuda::DeviceBuffer<int32_t> index(c.shape.rows);
  cuda::ArgmaxRows(x.data(), c.shape.rows, c.shape.in, index.data(), env.stream);
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(env.stream));
  std::vector<int32_t> host(c.shape.rows);
  index.CopyToHost(host.data());
  for (size_t r = 0; r < host.size(); ++r) out[r] = static_cast<float>(host[r]);
}

struct CudaRow {
  std::string_view op;  // an OpSpec's name
  OpFormat format;
  void (*run)(const OpCall& call, const CudaEnv& env, float* out);
};

const CudaRow kCudaRows[] = {
    {"linear", OpFormat::kF32, LinearF32},    {"linear", OpFormat::kBf16Bf16Act, LinearBf16Bf16Act},
    {"rms_norm", OpFormat::kF32, RmsNorm},    {"head_rms_norm", OpFormat::kF32, HeadRmsNorm},
    {"rope", OpFormat::kF32, Rope},           {"swiglu", OpFormat::kF32, SwiGlu},
    {"embedding", OpFormat::kF32, Embedding}, {"softmax", OpFormat::kF32, Softmax},
    {"argmax", OpFormat::kF32, Argmax},
};

struct CudaCell {
  const OpSpec* op = nullptr;
  const CudaRow* row = nullptr;
  OpShape shape;
};

std::string CellName(const CudaCell& cell) {
  std::string name = std::string(cell.op->name) + "_" +
                     std::string(OpFormatName(cell.row->format)) + "_cuda_" +
                     OpShapeName(cell.shape);
  for (char& ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch)) == 0) ch = '_';
  }
  return name;
}

void PrintTo(const CudaCell& cell, std::ostream* os) { *os << CellName(cell); }

std::vector<CudaCell> AllCells() {
  std::vector<CudaCell> cells;
  for (const CudaRow& row : kCudaRows) {
    for (const OpSpec& op : OpTable()) {
      if (op.name != row.op) continue;
      for (const OpShape& shape : op.test_shapes) cells.push_back({&op, &row, shape});
    }
  }
  return cells;
}

class OpParityCudaTest : public CudaTest, public ::testing::WithParamInterface<CudaCell> {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    gemm_ = std::make_unique<cuda::GemmContext>();
  }

  std::unique_ptr<cuda::GemmContext> gemm_;
};

TEST_P(OpParityCudaTest, MatchesTheReference) {
  const CudaCell& cell = GetParam();
  const OpCall call = cell.op->make(cell.shape, cell.row->format, 7001);
  std::vector<float> want = call.y0, got = call.y0;
  cell.op->run_reference(call, want.data());
  cell.row->run(call, CudaEnv{stream_, gemm_.get()}, got.data());
  std::vector<double> tolerance = cell.op->tolerance(call, want);
  for (double& t : tolerance) t *= 2;
  EXPECT_EQ(FirstOutOfBound(got, want, tolerance), "") << "bound: 2 × " << cell.op->bound;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpParityCudaTest, ::testing::ValuesIn(AllCells()),
                         [](const ::testing::TestParamInfo<CudaCell>& info) {
                           return CellName(info.param);
                         });

// Every row names an op and format the CPU table has, so it runs somewhere.
TEST(OpTableCudaTest, EveryRowNamesATableOpAndFormat) {
  for (const CudaRow& row : kCudaRows) {
    bool found = false;
    for (const OpSpec& op : OpTable()) {
      if (op.name != row.op) continue;
      for (const OpFormat format : op.formats) found = found || format == row.format;
    }
    EXPECT_TRUE(found) << row.op << " " << OpFormatName(row.format);
  }
}

}  // namespace
}  // namespace dscale::testing
