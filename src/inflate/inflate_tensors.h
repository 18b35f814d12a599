#pragma once
// The tensors of an inflated target and drafter, in the Hugging Face layout and order, each with
// the recipe that makes its values from the source checkpoint a block of rows at a time (so an
// 8B-shaped tensor never needs to be in memory whole).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "inflate/inflate_plan.h"
#include "io/safetensors.h"

namespace dscale {

// Writes rows [first, first + count) of a tensor, row-major f32, to out [count, cols].
using RowFiller = std::function<void(int64_t first, int64_t count, float* out)>;

struct InflatedTensor {
  std::string name;
  // Matrices keep the source's BF16 (or F32) unless scaled by other than a power of two (F32);
  // a norm's gains are BF16 when the source's are and every compensated value is exact in BF16,
  // else F32.
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;  // [rows, cols], or [n] (one row of n)
  // Reads what the tensor needs from the source; the filler it returns holds it.
  std::function<Result<RowFiller>()> prepare;

  int64_t rows() const { return shape.size() == 2 ? shape[0] : 1; }
  int64_t cols() const { return shape.back(); }
};

// The large target's tensors, from the source target (names "model.…").
Result<std::vector<InflatedTensor>> InflatedTargetTensors(const InflatePlan& plan,
                                                          std::shared_ptr<const Checkpoint> source);

// The large target's embedding and LM head (the embedding again when tied), named as DeepSpec
// ships a DSpark drafter's copies of them (embed_tokens.weight, lm_head.weight), from the source
// target: the same tensors as InflatedTargetTensors writes.
Result<std::vector<InflatedTensor>> InflatedTargetCopies(
    const InflatePlan& plan, std::shared_ptr<const Checkpoint> source_target);

// The large drafter's tensors (written without a prefix), from the source drafter whose names
// carry `source_prefix`.
Result<std::vector<InflatedTensor>> InflatedDrafterTensors(const InflatePlan& plan,
                                                           std::shared_ptr<const Checkpoint> source,
                                                           const std::string& source_prefix);

// The large drafter's Domino head (docs/INFLATE.md, "The Domino head"), from the source head
// file (names as written, no prefix). Empty when the plan's drafter declares no head.
//   gru.weight_ih_l0 [3G, D]: small columns at the hidden map, divided by λ (the GRU reads λ·e);
//   gru.weight_hh_l0 [3G, G]: copied;
//   correction.proj_in.weight [B, D + G]: z columns at the hidden map (times λ when the LM head
//     is tied, as the drafter's final rows then come out as z/λ), s columns at D + j;
//   correction.proj_out.weight [V', B]: real rows copied, pad rows zero.
Result<std::vector<InflatedTensor>> InflatedDominoHeadTensors(
    const InflatePlan& plan, std::shared_ptr<const Checkpoint> source);

// A DSpark drafter's heads (docs/INFLATE.md, "The DSpark heads"), from the source drafter whose
// names carry `source_prefix`; empty when the plan's drafter is not a DSpark one. Rank r is kept;
// h, the drafter's final-normed row, is read through AppendFinalRowColumns:
//   markov_head.markov_w1.weight [V', r]: real rows copied, pad rows zero (never gathered);
//   markov_head.markov_w2.weight [V', r]: real rows copied, pad rows zero (no bias on a pad logit);
//   markov_head.gate_proj.weight [r, D + r]: h columns, then the e columns at D + j;
//   markov_head.joint_proj.weight [3r, 2r + D]: the s and e columns kept, then h columns;
//   confidence_head.proj.weight [1, D (+ r)]: h columns (then e at D + j);
//   the biases copied.
Result<std::vector<InflatedTensor>> InflatedDSparkHeadTensors(
    const InflatePlan& plan, std::shared_ptr<const Checkpoint> source,
    const std::string& source_prefix);

}  // namespace dscale
