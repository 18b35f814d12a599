#pragma once
// The op table: every op the model's forward runs, each as one OpSpec row with its weight
// formats, its odd test shapes and its model shapes, its stated error bound, a reference run
// (kernels/reference) and the CPU variants that compute it. The parity test
// (op_parity_test.cc) checks every (op, format, variant, shape) cell against the reference;
// the CUDA sibling (tests/cuda/op_parity_cuda_test.cc) checks the device kernels on the same
// calls and bounds; bench/op_table_bench.cc times the same cells at model shapes. A new op
// joins all three by adding one row to OpTable() (op_table.cc).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/rope_spec.h"

namespace dscale::testing {

// How an op's operands are stored. Linear: the weights, and after the underscore how the
// activations are taken; attention: the K/V rows; elementwise ops: kF32 only.
enum class OpFormat {
  kF32,          // f32 weights (attention: f32 K/V)
  kBf16,         // BF16 weights, f32 activations (attention: BF16 K/V)
  kBf16Bf16Act,  // BF16 weights, activations rounded to BF16
  kInt8,         // int8 weights with BF16 scales per 32, f32 activations
  kInt8Int8Act,  // int8 weights, activations quantised per 32
  kInt4,         // 4-bit weights, f32 activations
  kInt4Int8Act,  // 4-bit weights, activations quantised per 32
};
std::string_view OpFormatName(OpFormat format);

// One call's dimensions; each op states what its fields mean (op_table.cc).
struct OpShape {
  int64_t rows = 1;         // token rows (attention: query rows of each span)
  int64_t in = 0;           // the reduced or normalised width: in-features, hidden, head_dim
  int64_t out = 0;          // out-features, intermediate, vocab; attention: positions before a span
  int32_t heads = 1;        // RoPE, attention
  int32_t kv_heads = 1;     // attention
  int32_t spans = 1;        // attention: spans in the batch
  bool accumulate = false;  // linear: y += x · wᵀ
  bool normalize = false;   // route_top_k: the k weights renormalised (norm_topk_prob)
};
// "r17_i131_o67" and the fields that differ from their defaults: part of a test's name.
std::string OpShapeName(const OpShape& shape);

// One generated call: inputs, and the output buffer's initial contents (y0). The fields an op
// leaves empty it does not use; every op documents its own use in op_table.cc.
struct OpCall {
  OpShape shape;
  OpFormat format = OpFormat::kF32;
  std::vector<float> x;          // activations, [rows, in] unless the op says otherwise
  std::vector<float> w;          // f32 weights or parameters (norm weight, embedding table, K)
  std::vector<float> v;          // a second f32 operand (attention: V; GRU: gates_h)
  std::vector<uint16_t> w_bf16;  // BF16 bits (weights; attention: K then V)
  std::vector<int8_t> w_int8;    // int8 weights [out, in]
  std::vector<uint8_t> w_int4;   // packed 4-bit weights [out, Int4RowBytes(in)]
  std::vector<uint16_t> scales;  // BF16 weight scales [out, Int8Groups(in)]
  std::vector<int32_t> ids;      // token ids, positions, or attention's page tables
  RopeSpec rope;
  std::vector<float> y0;  // the output before the call (NaN where the op must write)
};

// The work a call implies, for the benchmark's roofline: bytes it must move to or from memory
// (weights, K/V, activations and outputs once each) and multiply-adds.
struct OpCost {
  double bytes = 0;
  double madds = 0;
};

// A CPU variant of one format: `id` is the op's own (an ISA enum's value, a tile height and an
// ISA, ...); `supported` says whether this CPU, under DSCALE_CPU_ISA's cap, can run it.
struct OpVariant {
  std::string name;
  int id = 0;
  bool supported = true;
};

struct OpSpec {
  std::string_view name;
  std::vector<OpFormat> formats;
  std::vector<OpShape> test_shapes;   // small and odd: crossing the kernels' tile edges
  std::vector<OpShape> model_shapes;  // Qwen3-1.7B's (the benchmark)
  std::string_view bound;             // the error bound, stated
  OpCall (*make)(const OpShape& shape, OpFormat format, uint32_t seed);
  // out starts as call.y0 and ends as the op's result, [call.y0.size()].
  void (*run_reference)(const OpCall& call, float* out);
  // Per element: how far a variant's result may lie from the reference's `want`.
  std::vector<double> (*tolerance)(const OpCall& call, const std::vector<float>& want);
  // Every variant of `format`, supported or not, in a fixed order (so the cells' names are the
  // same on every machine).
  std::vector<OpVariant> (*variants)(OpFormat format);
  void (*run_variant)(const OpCall& call, const OpVariant& variant, float* out);
  OpCost (*cost)(const OpShape& shape, OpFormat format);
};

// The table, in the forward's order.
const std::vector<OpSpec>& OpTable();

// A result within tolerance of the reference: |got − want| ≤ tolerance, NaN only where want is
// NaN. Empty when it is, else the first element that is not, with both values and the bound.
std::string FirstOutOfBound(const std::vector<float>& got, const std::vector<float>& want,
                            const std::vector<double>& tolerance);

// ---- Pieces the rows share (op_table.cc).

// The variant every model call reaches: the kernel's own dispatch.
inline constexpr int kDispatchVariant = -1;
OpVariant DispatchVariant();
// The Bf16Isa variants (portable, avx2, avx512), each marked supported or not.
std::vector<OpVariant> Bf16IsaVariants();
// Every element's tolerance rel·|want| + abs.
std::vector<double> RelativeTolerance(const std::vector<float>& want, double rel, double abs);

}  // namespace dscale::testing
