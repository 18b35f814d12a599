#pragma once
// The Domino head (Huang et al., "Domino: Decoupling Causal Modeling from Autoregressive
// Drafting in Speculative Decoding"): a small causal corrector on top of the DFlash backbone's
// parallel drafts. The backbone drafts every block position at once from the same context, so
// position i cannot see which tokens were proposed before it; the head adds that causal signal
// back in logit space. File layout and training: docs/DOMINO.md.
//
// Rollout for one block (block − 1 candidates):
//   proposal 1 = choice from the backbone's logits, unchanged;
//   s = 0; s ← GRU(embed(anchor), s)
//   for i = 2 .. block − 1:  s ← GRU(embed(proposal i−1), s)
//                        logits_i ← logits_i + W_out · silu(W_in · [z_i; s])
//                        proposal i = choice from logits_i
// where the choice is the argmax, or a draw from softmax(logits_i / T) under --draft-sampling
// distribution (model/draft_choice.h); the GRU reads the proposal chosen either way.
// z_i is the backbone's final-normed hidden row of position i, embed the target's embedding
// table. The GRU is one bias-free layer; the MLP is bias-free. So the head runs block − 1 GRU steps
// (15 for a 16-token block) and block − 2 corrections, each batched across the step's requests.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/domino_config.h"
#include "model/decoder_weights.h"
#include "model/draft_choice.h"
#include "model/weight_matrix.h"

namespace dscale {

// Which head runs on top of the drafter's backbone (--drafter-head).
enum class DrafterHead { kNone, kDomino };
// "none" or "domino"; errors name --drafter-head and the choices.
Result<DrafterHead> ParseDrafterHead(std::string_view text);
std::string_view DrafterHeadName(DrafterHead head);

struct DominoHeadWeights {
  WeightMatrix gru_input;       // "gru.weight_ih_l0"           [3·G, hidden], gate rows r, z, n
  WeightMatrix gru_state;       // "gru.weight_hh_l0"           [3·G, G]
  WeightMatrix correction_in;   // "correction.proj_in.weight"  [B, hidden + G], input [z; s]
  WeightMatrix correction_out;  // "correction.proj_out.weight" [vocab, B]
};

// (name, shape) of every tensor a head file holds.
TensorShapes DominoHeadTensorShapes(const DominoHeadConfig& config, int64_t hidden, int64_t vocab);
Result<DominoHeadWeights> LoadDominoHeadWeights(const DominoHeadConfig& config, int64_t hidden,
                                                int64_t vocab, const TensorReader& read);
// Reads `drafter_dir`/config.head_file; errors name the file, the tensor and the shape expected.
Result<DominoHeadWeights> LoadDominoHeadFile(const std::string& drafter_dir,
                                             const DominoHeadConfig& config, int64_t hidden,
                                             int64_t vocab);

// Not thread-safe: one rollout at a time (it reuses its scratch).
class DominoHead {
 public:
  // `embedding` [vocab, hidden] is the target's table; it must outlive the head.
  DominoHead(DominoHeadConfig config, DominoHeadWeights weights, const WeightMatrix& embedding);

  const DominoHeadConfig& config() const { return config_; }
  const DominoHeadWeights& weights() const { return weights_; }

  // Corrects logits over the target tokens `token_ids` only (a reduced draft vocabulary,
  // model/draft_vocab.h): correction_out keeps those rows (copied once, as stored), the logits
  // Refine takes have token_ids.size() columns, and its proposals are mapped back to target ids
  // (the GRU reads their target embeddings). Once, before any Refine.
  void RestrictVocab(std::span<const int32_t> token_ids);
  // Columns of the logits Refine corrects: the target's vocabulary, or the restricted one.
  int64_t vocab() const { return vocab_; }

  // The rollout above for anchors.size() requests of `candidates` candidates each, request-major:
  // hidden [requests · candidates, hidden] (the backbone's final-normed rows), logits
  // [requests · candidates, vocab()] the backbone's on entry and the corrected ones on return,
  // tokens [requests · candidates] the proposals as target ids (chosen from the corrected logits;
  // column 0 from the backbone's). choices: one per request (empty: the argmax for all).
  void Refine(std::span<const int32_t> anchors, int32_t candidates, std::span<const float> hidden,
              std::span<float> logits, std::span<int32_t> tokens,
              std::span<const DraftChoice> choices = {});

 private:
  // state ← GRU(embed(step_tokens_), state) for every request.
  void AdvanceState(int64_t requests);
  // correction_ [requests, vocab] for candidate column `column`.
  void ComputeCorrection(int64_t requests, int32_t candidates, int32_t column,
                         std::span<const float> hidden);
  // The target id `choice` takes for candidate `candidate` from `logits`' vocab_ columns.
  int32_t ChooseToken(const float* logits, const DraftChoice& choice, int32_t candidate);

  DominoHeadConfig config_;
  DominoHeadWeights weights_;
  const WeightMatrix* embedding_;
  int64_t hidden_ = 0, vocab_ = 0;
  std::vector<int32_t> token_ids_;  // column → target id; empty: the identity
  // Scratch, grown on demand: [requests, ·] each.
  std::vector<int32_t> step_tokens_;
  std::vector<float> state_, embedded_, gates_x_, gates_h_, mlp_in_, mlp_mid_, correction_;
  std::vector<double> draw_;  // Q while a choice draws
};

}  // namespace dscale
