#pragma once
// The rows of the op table (op_table.h), one function per op, each in the file that holds the
// op's generator, reference call, bound and variants.

#include "op_table.h"

namespace dscale::testing {

OpSpec LinearOp();   // op_table_linear.cc
OpSpec RmsNormOp();  // op_table_elementwise.cc
OpSpec HeadRmsNormOp();
OpSpec RopeOp();
OpSpec SwiGluOp();
OpSpec SiluOp();
OpSpec GruUpdateOp();
OpSpec EmbeddingOp();
OpSpec SoftmaxOp();
OpSpec ArgmaxOp();
OpSpec QuantizeInt8ActivationsOp();
OpSpec RouteTopKOp();
OpSpec AttentionOp();     // op_table_attention.cc
OpSpec CausalConv1dOp();  // op_table_linear_attention.cc
OpSpec GatedDeltaRuleOp();
OpSpec GatedRmsNormOp();
OpSpec SigmoidGateOp();
OpSpec PartialRopeOp();

}  // namespace dscale::testing
