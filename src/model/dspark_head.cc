#include "model/dspark_head.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/activation.h"
#include "model/decoder_layer.h"

namespace dscale {
namespace {

int64_t ConfidenceInputs(const DSparkHeadConfig& c, int64_t hidden) {
  return hidden + (c.confidence_with_markov ? c.markov_rank : 0);
}

// y = w · x + bias for one row x.
void Affine(const WeightMatrix& w, const std::vector<float>& bias, const float* x, float* y) {
  Project(x, w, y, /*rows=*/1);
  for (size_t i = 0; i < bias.size(); ++i) y[i] += bias[i];
}

}  // namespace

TensorShapes DSparkHeadTensorShapes(const DSparkHeadConfig& c, int64_t hidden, int64_t vocab) {
  const int64_t r = c.markov_rank;
  TensorShapes shapes;
  if (c.has_markov_head()) {
    shapes.emplace_back(kDSparkW1Name, std::vector<int64_t>{vocab, r});
    shapes.emplace_back(kDSparkW2Name, std::vector<int64_t>{vocab, r});
    if (c.markov_head_type == MarkovHeadType::kGated) {
      shapes.emplace_back(kDSparkGateName, std::vector<int64_t>{r, hidden + r});
      shapes.emplace_back(kDSparkGateBiasName, std::vector<int64_t>{r});
    } else if (c.markov_head_type == MarkovHeadType::kRnn) {
      shapes.emplace_back(kDSparkJointName, std::vector<int64_t>{3 * r, 2 * r + hidden});
      shapes.emplace_back(kDSparkJointBiasName, std::vector<int64_t>{3 * r});
    }
  }
  if (c.confidence_head) {
    shapes.emplace_back(kDSparkConfidenceName,
                        std::vector<int64_t>{1, ConfidenceInputs(c, hidden)});
    shapes.emplace_back(kDSparkConfidenceBiasName, std::vector<int64_t>{1});
  }
  return shapes;
}

Result<DSparkHeadWeights> LoadDSparkHeadWeights(const DSparkHeadConfig& c, int64_t hidden,
                                                int64_t vocab, const TensorReader& read) {
  DSparkHeadWeights w;
  for (const auto& [name, shape] : DSparkHeadTensorShapes(c, hidden, vocab)) {
    DSCALE_ASSIGN_OR_RETURN(WeightMatrix m, read(name, shape));
    if (name == kDSparkW1Name) {
      w.markov_w1 = std::move(m);
    } else if (name == kDSparkW2Name) {
      w.markov_w2 = std::move(m);
    } else if (name == kDSparkGateName) {
      w.gate_proj = std::move(m);
    } else if (name == kDSparkGateBiasName) {
      w.gate_bias = m.ToF32();
    } else if (name == kDSparkJointName) {
      w.joint_proj = std::move(m);
    } else if (name == kDSparkJointBiasName) {
      w.joint_bias = m.ToF32();
    } else if (name == kDSparkConfidenceName) {
      w.confidence = std::move(m);
    } else {
      w.confidence_bias = m.ToF32()[0];
    }
  }
  return w;
}

DSparkHead::DSparkHead(DSparkHeadConfig config, DSparkHeadWeights weights, int64_t hidden,
                       int64_t vocab)
    : config_(config), weights_(std::move(weights)), hidden_(hidden), vocab_(vocab) {
  const int64_t r = config_.markov_rank;
  if (config_.has_markov_head()) {
    DSCALE_CHECK(weights_.markov_w1.rows() == vocab && weights_.markov_w1.cols() == r);
    DSCALE_CHECK(weights_.markov_w2.rows() == vocab && weights_.markov_w2.cols() == r);
    if (config_.markov_head_type == MarkovHeadType::kGated) {
      DSCALE_CHECK(weights_.gate_proj.rows() == r && weights_.gate_proj.cols() == hidden + r);
      DSCALE_CHECK(static_cast<int64_t>(weights_.gate_bias.size()) == r);
    } else if (config_.markov_head_type == MarkovHeadType::kRnn) {
      DSCALE_CHECK(weights_.joint_proj.rows() == 3 * r &&
                   weights_.joint_proj.cols() == 2 * r + hidden);
      DSCALE_CHECK(static_cast<int64_t>(weights_.joint_bias.size()) == 3 * r);
    }
  }
  if (config_.confidence_head) {
    DSCALE_CHECK(weights_.confidence.rows() == 1 &&
                 weights_.confidence.cols() == ConfidenceInputs(config_, hidden));
  }
}

void DSparkHead::MarkovInput(const float* h, const float* e, float* state, float* x) {
  const int64_t r = config_.markov_rank;
  switch (config_.markov_head_type) {
    case MarkovHeadType::kVanilla:
      std::memcpy(x, e, static_cast<size_t>(r) * sizeof(float));
      return;
    case MarkovHeadType::kGated: {
      // [h ; e], hidden first, as DeepSpec concatenates them.
      float* in = GrowBuffer(concat_, static_cast<size_t>(hidden_ + r));
      std::memcpy(in, h, static_cast<size_t>(hidden_) * sizeof(float));
      std::memcpy(in + hidden_, e, static_cast<size_t>(r) * sizeof(float));
      float* gate = GrowBuffer(projected_, static_cast<size_t>(r));
      Affine(weights_.gate_proj, weights_.gate_bias, in, gate);
      for (int64_t i = 0; i < r; ++i) x[i] = cpu::Sigmoid(gate[i]) * e[i];
      return;
    }
    case MarkovHeadType::kRnn: {
      // [s ; e ; h] → (gate, candidate, output) thirds.
      float* in = GrowBuffer(concat_, static_cast<size_t>(2 * r + hidden_));
      std::memcpy(in, state, static_cast<size_t>(r) * sizeof(float));
      std::memcpy(in + r, e, static_cast<size_t>(r) * sizeof(float));
      std::memcpy(in + 2 * r, h, static_cast<size_t>(hidden_) * sizeof(float));
      float* p = GrowBuffer(projected_, static_cast<size_t>(3 * r));
      Affine(weights_.joint_proj, weights_.joint_bias, in, p);
      for (int64_t i = 0; i < r; ++i) {
        const float gate = cpu::Sigmoid(p[i]);
        state[i] = gate * state[i] + (1.0f - gate) * std::tanh(p[r + i]);
        x[i] = std::tanh(p[2 * r + i]);
      }
      return;
    }
  }
}

float DSparkHead::Confidence(const float* h, const float* e) {
  const int64_t in = ConfidenceInputs(config_, hidden_);
  float* z = GrowBuffer(concat_, static_cast<size_t>(in));
  std::memcpy(z, h, static_cast<size_t>(hidden_) * sizeof(float));
  if (config_.confidence_with_markov) {
    std::memcpy(z + hidden_, e, static_cast<size_t>(config_.markov_rank) * sizeof(float));
  }
  float logit = 0.0f;
  Project(z, weights_.confidence, &logit, /*rows=*/1);
  return logit + weights_.confidence_bias;
}

void DSparkHead::Walk(std::span<const int32_t> anchors, int32_t candidates,
                      std::span<const float> hidden, std::span<float> logits,
                      std::span<int32_t> tokens, std::span<float> confidence,
                      std::span<const DraftChoice> choices) {
  const auto requests = static_cast<int64_t>(anchors.size());
  DSCALE_CHECK(choices.empty() || static_cast<int64_t>(choices.size()) == requests);
  const int64_t rows = requests * candidates, r = config_.markov_rank;
  DSCALE_CHECK(static_cast<int64_t>(hidden.size()) == rows * hidden_);
  DSCALE_CHECK(static_cast<int64_t>(logits.size()) == rows * vocab_);
  DSCALE_CHECK(static_cast<int64_t>(tokens.size()) == rows);
  DSCALE_CHECK(static_cast<int64_t>(confidence.size()) == (config_.confidence_head ? rows : 0));
  // Position by position across the requests (the header says why each walk stays its own).
  float* e = GrowBuffer(embedded_, static_cast<size_t>(requests * r));
  float* x = GrowBuffer(input_, static_cast<size_t>(requests * r));
  float* bias = GrowBuffer(bias_, static_cast<size_t>(requests * vocab_));
  state_.assign(static_cast<size_t>(requests * r), 0.0f);
  previous_.assign(anchors.begin(), anchors.end());
  for (int32_t k = 0; k < candidates; ++k) {
    // Row k of request q is row q · candidates + k of the block.
    const auto row_of = [&](int64_t q) { return q * candidates + k; };
    if (config_.has_markov_head()) {
      GatherRows(weights_.markov_w1, previous_.data(), requests, e);
      for (int64_t q = 0; q < requests; ++q) {
        MarkovInput(hidden.data() + row_of(q) * hidden_, e + q * r, state_.data() + q * r,
                    x + q * r);
      }
      Project(x, weights_.markov_w2, bias, /*rows=*/requests);
    }
    for (int64_t q = 0; q < requests; ++q) {
      const int64_t j = row_of(q);
      float* row = logits.data() + j * vocab_;
      if (config_.has_markov_head()) {
        const float* b = bias + q * vocab_;
        for (int64_t v = 0; v < vocab_; ++v) row[v] += b[v];
      }
      if (config_.confidence_head) {
        confidence[static_cast<size_t>(j)] = Confidence(hidden.data() + j * hidden_, e + q * r);
      }
      // The next row's bias follows the token chosen here, drawn or not.
      const DraftChoice choice = choices.empty() ? DraftChoice{} : choices[static_cast<size_t>(q)];
      previous_[static_cast<size_t>(q)] = choice.Column(row, vocab_, k, &draw_);
      tokens[static_cast<size_t>(j)] = previous_[static_cast<size_t>(q)];
    }
  }
}

}  // namespace dscale
