#pragma once
// The heads of a DSpark drafter (DeepSpec's Qwen3DSparkModel; config in io/dspark_config.h) on
// top of its DFlash-style backbone's B rows: a Markov head that makes the block's proposals
// sequential, and a confidence head that scores each proposal.
//
// Walk of one request's block, h_j its backbone's final-normed row j (the LM head's
// input), base_j that row's logits, W1[t] row t of the Markov embedding [vocab, r]:
//   prev_0 = anchor
//   for j = 0 .. B−1:
//     x_j    = vanilla: W1[prev_j]
//              gated:   σ(gate_proj · [h_j ; W1[prev_j]] + b) ⊙ W1[prev_j]
//              rnn:     (g, c, o) = thirds of joint_proj · [s ; W1[prev_j] ; h_j] + b,
//                       s ← σ(g) ⊙ s + (1 − σ(g)) ⊙ tanh(c) (s = 0 at the block's start),
//                       x_j = tanh(o)
//     logits_j = base_j + W2 · x_j          (W2 = markov_w2 [vocab, r]; no head: base_j)
//     token_j  = argmax logits_j            (ties to the lowest id, as torch.argmax), or under
//                --draft-sampling distribution a draw from softmax(logits_j / T), as DeepSpec's
//                sample_block_tokens draws (model/draft_choice.h)
//     confidence_j = proj · [h_j ; W1[prev_j]] + b   (or proj · h_j + b without the Markov input)
//     prev_{j+1} = token_j
// The walk goes position by position over all the requests at once: a position's bias products
// are one product over the requests' rows, and a row's bits do not depend on the rows beside it
// (the products are row-invariant), so each request's walk is the one it would have alone.
// Products run on the stored weights (WeightMatrix's Project) with f32 activations; σ, tanh and
// the sums are f32.

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "io/dspark_config.h"
#include "model/decoder_weights.h"
#include "model/draft_choice.h"
#include "model/weight_matrix.h"

namespace dscale {

// DeepSpec's tensor names, at the top level of the drafter checkpoint.
inline constexpr const char* kDSparkW1Name = "markov_head.markov_w1.weight";
inline constexpr const char* kDSparkW2Name = "markov_head.markov_w2.weight";
inline constexpr const char* kDSparkGateName = "markov_head.gate_proj.weight";
inline constexpr const char* kDSparkGateBiasName = "markov_head.gate_proj.bias";
inline constexpr const char* kDSparkJointName = "markov_head.joint_proj.weight";
inline constexpr const char* kDSparkJointBiasName = "markov_head.joint_proj.bias";
inline constexpr const char* kDSparkConfidenceName = "confidence_head.proj.weight";
inline constexpr const char* kDSparkConfidenceBiasName = "confidence_head.proj.bias";
// The frozen copies of the target's embedding and LM head [vocab, target hidden] DeepSpec saves
// with a drafter (dscale reads the target's own and leaves these unread).
inline constexpr const char* kDSparkEmbedCopyName = "embed_tokens.weight";
inline constexpr const char* kDSparkLmHeadCopyName = "lm_head.weight";

// Tensors by the names above; only those the config declares are present (empty otherwise).
struct DSparkHeadWeights {
  WeightMatrix markov_w1;         // "markov_head.markov_w1.weight" [vocab, r] (an embedding)
  WeightMatrix markov_w2;         // "markov_head.markov_w2.weight" [vocab, r] (Linear r → vocab)
  WeightMatrix gate_proj;         // gated: "markov_head.gate_proj.weight" [r, hidden + r]
  std::vector<float> gate_bias;   // gated: "markov_head.gate_proj.bias" [r]
  WeightMatrix joint_proj;        // rnn: "markov_head.joint_proj.weight" [3r, 2r + hidden]
  std::vector<float> joint_bias;  // rnn: "markov_head.joint_proj.bias" [3r]
  WeightMatrix confidence;        // "confidence_head.proj.weight" [1, hidden (+ r)]
  float confidence_bias = 0.0f;   // "confidence_head.proj.bias" [1]
};

// (name, shape) of every head tensor `config` declares, for a drafter of `hidden` over `vocab`.
TensorShapes DSparkHeadTensorShapes(const DSparkHeadConfig& config, int64_t hidden, int64_t vocab);
// Reads them through `read` (errors name the tensor and the shape expected).
Result<DSparkHeadWeights> LoadDSparkHeadWeights(const DSparkHeadConfig& config, int64_t hidden,
                                                int64_t vocab, const TensorReader& read);

// Not thread-safe: one walk at a time (it reuses its scratch).
class DSparkHead {
 public:
  DSparkHead(DSparkHeadConfig config, DSparkHeadWeights weights, int64_t hidden, int64_t vocab);

  const DSparkHeadConfig& config() const { return config_; }
  const DSparkHeadWeights& weights() const { return weights_; }

  // The walk above for anchors.size() requests of `candidates` rows each, request-major:
  // hidden [requests · candidates, hidden], logits [requests · candidates, vocab] the backbone's
  // on entry and the corrected ones (the drafter's q) on return, tokens [requests · candidates]
  // the tokens chosen from them (choices: one per request; empty: the argmax for all),
  // confidence [requests · candidates] the confidence logits (empty span: no confidence head).
  void Walk(std::span<const int32_t> anchors, int32_t candidates, std::span<const float> hidden,
            std::span<float> logits, std::span<int32_t> tokens, std::span<float> confidence,
            std::span<const DraftChoice> choices = {});

 private:
  // x [r] of one row (above), from prev's embedding e [r] and the row h [hidden]; advances the
  // request's rnn state [r].
  void MarkovInput(const float* h, const float* e, float* state, float* x);
  // The confidence logit of one row.
  float Confidence(const float* h, const float* e);

  DSparkHeadConfig config_;
  DSparkHeadWeights weights_;
  int64_t hidden_ = 0, vocab_ = 0;
  // Scratch: per request e [r], x [r], the rnn state [r] and the bias [vocab]; one row's
  // concatenated inputs and a product's output; the requests' previous tokens.
  std::vector<float> embedded_, input_, state_, concat_, projected_, bias_;
  std::vector<int32_t> previous_;
  std::vector<double> draw_;  // Q while a choice draws
};

}  // namespace dscale
