#include "op_table.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/cpu/bf16_isa.h"
#include "op_rows.h"

namespace dscale::testing {

std::string_view OpFormatName(OpFormat format) {
  switch (format) {
    case OpFormat::kF32:
      return "f32";
    case OpFormat::kBf16:
      return "bf16";
    case OpFormat::kBf16Bf16Act:
      return "bf16_bf16act";
    case OpFormat::kInt8:
      return "int8";
    case OpFormat::kInt8Int8Act:
      return "int8_int8act";
    case OpFormat::kInt4:
      return "int4";
    case OpFormat::kInt4Int8Act:
      return "int4_int8act";
  }
  return "?";
}

std::string OpShapeName(const OpShape& shape) {
  std::ostringstream name;
  name << "r" << shape.rows << "_i" << shape.in;
  if (shape.out != 0) name << "_o" << shape.out;
  if (shape.heads != 1) name << "_h" << shape.heads;
  if (shape.kv_heads != 1) name << "_kv" << shape.kv_heads;
  if (shape.spans != 1) name << "_s" << shape.spans;
  if (shape.accumulate) name << "_acc";
  if (shape.normalize) name << "_norm";
  return name.str();
}

const std::vector<OpSpec>& OpTable() {
  static const std::vector<OpSpec> table = {
      EmbeddingOp(),
      RmsNormOp(),
      LinearOp(),
      HeadRmsNormOp(),
      RopeOp(),
      AttentionOp(),
      SwiGluOp(),
      SiluOp(),
      GruUpdateOp(),
      QuantizeInt8ActivationsOp(),
      SoftmaxOp(),
      ArgmaxOp(),
      // A mixture of experts' router (Qwen3-MoE).
      RouteTopKOp(),
      // A hybrid target's (Qwen3.5) own ops.
      PartialRopeOp(),
      SigmoidGateOp(),
      CausalConv1dOp(),
      GatedDeltaRuleOp(),
      GatedRmsNormOp(),
  };
  return table;
}

std::string FirstOutOfBound(const std::vector<float>& got, const std::vector<float>& want,
                            const std::vector<double>& tolerance) {
  if (got.size() != want.size() || tolerance.size() != want.size()) {
    return "sizes differ: " + std::to_string(got.size()) + " results, " +
           std::to_string(want.size()) + " expected";
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                        : std::fabs(double{got[i]} - want[i]) <= tolerance[i];
    if (ok) continue;
    std::ostringstream message;
    message.precision(9);
    message << "element " << i << ": " << got[i] << ", reference " << want[i] << ", bound "
            << tolerance[i];
    return message.str();
  }
  return "";
}

OpVariant DispatchVariant() { return {"dispatch", kDispatchVariant, true}; }

std::vector<OpVariant> Bf16IsaVariants() {
  const std::vector<cpu::Bf16Isa> supported = cpu::SupportedBf16Isas();
  std::vector<OpVariant> variants;
  for (const cpu::Bf16Isa isa :
       {cpu::Bf16Isa::kPortable, cpu::Bf16Isa::kAvx2, cpu::Bf16Isa::kAvx512}) {
    const bool ok = std::find(supported.begin(), supported.end(), isa) != supported.end();
    variants.push_back({std::string(cpu::Bf16IsaName(isa)), static_cast<int>(isa), ok});
  }
  return variants;
}

std::vector<double> RelativeTolerance(const std::vector<float>& want, double rel, double abs) {
  std::vector<double> tolerance(want.size());
  for (size_t i = 0; i < want.size(); ++i) tolerance[i] = rel * std::fabs(want[i]) + abs;
  return tolerance;
}

}  // namespace dscale::testing
