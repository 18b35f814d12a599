#include "model/domino_head.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/check.h"
#include "io/safetensors.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/recurrent.h"
#include "model/decoder_layer.h"

namespace dscale {
namespace {

constexpr const char* kGruInputName = "gru.weight_ih_l0";
constexpr const char* kGruStateName = "gru.weight_hh_l0";
constexpr const char* kCorrectionInName = "correction.proj_in.weight";
constexpr const char* kCorrectionOutName = "correction.proj_out.weight";

}  // namespace

Result<DrafterHead> ParseDrafterHead(std::string_view text) {
  if (text == "none") return DrafterHead::kNone;
  if (text == "domino") return DrafterHead::kDomino;
  return InvalidArgument("--drafter-head: expected none or domino, got \"" + std::string(text) +
                         "\"");
}

std::string_view DrafterHeadName(DrafterHead head) {
  return head == DrafterHead::kDomino ? "domino" : "none";
}

TensorShapes DominoHeadTensorShapes(const DominoHeadConfig& c, int64_t hidden, int64_t vocab) {
  const int64_t g = c.gru_hidden_size, b = c.bottleneck_size;
  return {{kGruInputName, {3 * g, hidden}},
          {kGruStateName, {3 * g, g}},
          {kCorrectionInName, {b, hidden + g}},
          {kCorrectionOutName, {vocab, b}}};
}

Result<DominoHeadWeights> LoadDominoHeadWeights(const DominoHeadConfig& c, int64_t hidden,
                                                int64_t vocab, const TensorReader& read) {
  const TensorShapes shapes = DominoHeadTensorShapes(c, hidden, vocab);
  DominoHeadWeights w;
  WeightMatrix* targets[] = {&w.gru_input, &w.gru_state, &w.correction_in, &w.correction_out};
  for (size_t i = 0; i < shapes.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(*targets[i], read(shapes[i].first, shapes[i].second));
  }
  return w;
}

Result<DominoHeadWeights> LoadDominoHeadFile(const std::string& drafter_dir,
                                             const DominoHeadConfig& config, int64_t hidden,
                                             int64_t vocab) {
  DSCALE_ASSIGN_OR_RETURN(Checkpoint file,
                          Checkpoint::OpenFile(drafter_dir + "/" + config.head_file));
  const TensorReader read =
      CheckpointTensorReader(std::make_shared<const Checkpoint>(std::move(file)));
  return LoadDominoHeadWeights(config, hidden, vocab, read);
}

DominoHead::DominoHead(DominoHeadConfig config, DominoHeadWeights weights,
                       const WeightMatrix& embedding)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      embedding_(&embedding),
      hidden_(embedding.cols()),
      vocab_(embedding.rows()) {
  const int64_t g = config_.gru_hidden_size, b = config_.bottleneck_size;
  DSCALE_CHECK(weights_.gru_input.rows() == 3 * g && weights_.gru_input.cols() == hidden_);
  DSCALE_CHECK(weights_.gru_state.rows() == 3 * g && weights_.gru_state.cols() == g);
  DSCALE_CHECK(weights_.correction_in.rows() == b && weights_.correction_in.cols() == hidden_ + g);
  DSCALE_CHECK(weights_.correction_out.rows() == vocab_ && weights_.correction_out.cols() == b);
}

void DominoHead::RestrictVocab(std::span<const int32_t> token_ids) {
  DSCALE_CHECK_MSG(token_ids_.empty(), "the head's vocabulary is restricted once");
  weights_.correction_out = weights_.correction_out.SelectRows(token_ids);
  token_ids_.assign(token_ids.begin(), token_ids.end());
  vocab_ = static_cast<int64_t>(token_ids.size());
}

int32_t DominoHead::ChooseToken(const float* logits, const DraftChoice& choice,
                                int32_t candidate) {
  const int32_t column = choice.Column(logits, vocab_, candidate, &draw_);
  return token_ids_.empty() ? column : token_ids_[static_cast<size_t>(column)];
}

void DominoHead::AdvanceState(int64_t requests) {
  const int64_t g = config_.gru_hidden_size;
  float* x = GrowBuffer(embedded_, requests * hidden_);
  GatherRows(*embedding_, step_tokens_.data(), requests, x);
  float* gx = GrowBuffer(gates_x_, requests * 3 * g);
  float* gh = GrowBuffer(gates_h_, requests * 3 * g);
  Project(x, weights_.gru_input, gx, requests);
  Project(state_.data(), weights_.gru_state, gh, requests);
  cpu::GruUpdate(gx, gh, state_.data(), requests, g);
}

void DominoHead::ComputeCorrection(int64_t requests, int32_t candidates, int32_t column,
                                   std::span<const float> hidden) {
  const int64_t g = config_.gru_hidden_size, b = config_.bottleneck_size;
  const int64_t in = hidden_ + g;
  // [z_i; s_i] per request: the backbone row of this column, then the GRU state.
  float* mlp_in = GrowBuffer(mlp_in_, requests * in);
  for (int64_t r = 0; r < requests; ++r) {
    std::memcpy(mlp_in + r * in, hidden.data() + (r * candidates + column) * hidden_,
                hidden_ * sizeof(float));
    std::memcpy(mlp_in + r * in + hidden_, state_.data() + r * g, g * sizeof(float));
  }
  float* mid = GrowBuffer(mlp_mid_, requests * b);
  Project(mlp_in, weights_.correction_in, mid, requests);
  cpu::SiluInPlace(mid, requests * b);
  Project(mid, weights_.correction_out, GrowBuffer(correction_, requests * vocab_), requests);
}

void DominoHead::Refine(std::span<const int32_t> anchors, int32_t candidates,
                        std::span<const float> hidden, std::span<float> logits,
                        std::span<int32_t> tokens, std::span<const DraftChoice> choices) {
  const auto requests = static_cast<int64_t>(anchors.size());
  DSCALE_CHECK(choices.empty() || static_cast<int64_t>(choices.size()) == requests);
  const auto choice = [&](int64_t r) { return choices.empty() ? DraftChoice{} : choices[r]; };
  DSCALE_CHECK(static_cast<int64_t>(hidden.size()) == requests * candidates * hidden_);
  DSCALE_CHECK(static_cast<int64_t>(logits.size()) == requests * candidates * vocab_);
  DSCALE_CHECK(static_cast<int64_t>(tokens.size()) == requests * candidates);
  if (requests == 0 || candidates == 0) return;
  step_tokens_.assign(anchors.begin(), anchors.end());
  state_.assign(requests * config_.gru_hidden_size, 0.0f);
  AdvanceState(requests);  // s ← GRU(embed(anchor), 0)
  for (int64_t r = 0; r < requests; ++r) {
    tokens[r * candidates] = ChooseToken(logits.data() + r * candidates * vocab_, choice(r), 0);
  }
  for (int32_t column = 1; column < candidates; ++column) {
    for (int64_t r = 0; r < requests; ++r) step_tokens_[r] = tokens[r * candidates + column - 1];
    AdvanceState(requests);
    ComputeCorrection(requests, candidates, column, hidden);
    for (int64_t r = 0; r < requests; ++r) {
      float* row = logits.data() + (r * candidates + column) * vocab_;
      const float* correction = correction_.data() + r * vocab_;
      for (int64_t v = 0; v < vocab_; ++v) row[v] += correction[v];
      tokens[r * candidates + column] = ChooseToken(row, choice(r), column);
    }
  }
}

}  // namespace dscale
