#include "train/predictor_trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "dvl/deterministic_random.h"
#include "train/predictor_eval.h"

namespace dscale::train {
namespace {

using dvl::kDraftPositions;
using dvl::kFeatureCount;
using dvl::kPredictorHidden;
using dvl::PredictorWeights;

constexpr double kMinStd = 1e-6;

double HoldoutHash(uint32_t prompt_id, uint64_t seed) {
  const uint64_t h = dvl::SplitMix64Mix(seed ^ dvl::SplitMix64Mix(prompt_id));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// The four trainable arrays of a PredictorWeights, in a fixed order.
template <typename W>
auto MlpArrays(W& w) {
  return std::array{&w.w1, &w.b1, &w.w2, &w.b2};
}

// Mean and std of each feature over the training records; std < kMinStd becomes 1.
void ComputeNormalisation(const TraceSet& traces, const std::vector<size_t>& rows,
                          PredictorWeights* w) {
  std::vector<double> sum(kFeatureCount, 0.0);
  std::vector<double> sum_sq(kFeatureCount, 0.0);
  for (size_t r : rows) {
    const float* x = traces.features_of(r);
    for (int d = 0; d < kFeatureCount; ++d) sum[d] += x[d];
  }
  const double n = static_cast<double>(rows.size());
  for (int d = 0; d < kFeatureCount; ++d) sum[d] /= n;  // now the mean
  for (size_t r : rows) {
    const float* x = traces.features_of(r);
    for (int d = 0; d < kFeatureCount; ++d) sum_sq[d] += (x[d] - sum[d]) * (x[d] - sum[d]);
  }
  for (int d = 0; d < kFeatureCount; ++d) {
    const double std = std::sqrt(sum_sq[d] / n);
    w->feature_mean[d] = static_cast<float>(sum[d]);
    w->feature_std[d] = std > kMinStd ? static_cast<float>(std) : 1.0f;
  }
}

// Standardised features of `rows`: [rows.size(), 1735].
std::vector<float> Normalise(const TraceSet& traces, const std::vector<size_t>& rows,
                             const PredictorWeights& w) {
  std::vector<float> out(rows.size() * kFeatureCount);
  for (size_t r = 0; r < rows.size(); ++r) {
    const float* x = traces.features_of(rows[r]);
    float* o = out.data() + r * kFeatureCount;
    for (int d = 0; d < kFeatureCount; ++d) {
      o[d] = (x[d] - w.feature_mean[d]) / w.feature_std[d];
    }
  }
  return out;
}

// Uniform(−1/√in, 1/√in) for each layer's weights and biases (in = fan-in).
void InitialiseMlp(uint64_t seed, PredictorWeights* w) {
  dvl::DeterministicRandom rng(dvl::SplitMix64Mix(seed ^ 0x5EED'1A17'0000'0001ULL));
  auto fill = [&rng](std::vector<float>& v, int fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (float& x : v) x = static_cast<float>((2.0 * rng.NextUniform() - 1.0) * bound);
  };
  fill(w->w1, kFeatureCount);
  fill(w->b1, kFeatureCount);
  fill(w->w2, kPredictorHidden);
  fill(w->b2, kPredictorHidden);
}

// Accumulates one record's parameter gradients into `grad` given x̂, the post-ReLU hidden
// activations and dLoss/dlogits (already scaled by 1/batch).
void Backward(const PredictorWeights& w, const float* x, const float* hidden, const float* dz,
              PredictorWeights* grad) {
  std::array<float, kPredictorHidden> dh{};
  for (int h = 0; h < kPredictorHidden; ++h) {
    const float* w2_row = w.w2.data() + static_cast<size_t>(h) * kDraftPositions;
    float* g2_row = grad->w2.data() + static_cast<size_t>(h) * kDraftPositions;
    float sum = 0.0f;
    for (int o = 0; o < kDraftPositions; ++o) {
      g2_row[o] += hidden[h] * dz[o];
      sum += w2_row[o] * dz[o];
    }
    dh[h] = hidden[h] > 0.0f ? sum : 0.0f;
  }
  for (int o = 0; o < kDraftPositions; ++o) grad->b2[o] += dz[o];
  for (int h = 0; h < kPredictorHidden; ++h) grad->b1[h] += dh[h];
  for (int d = 0; d < kFeatureCount; ++d) {
    const float xd = x[d];  // hoisted: the stores below may not alias it
    if (xd == 0.0f) continue;
    float* g1_row = grad->w1.data() + static_cast<size_t>(d) * kPredictorHidden;
    for (int h = 0; h < kPredictorHidden; ++h) g1_row[h] += xd * dh[h];
  }
}

class AdamState {
 public:
  explicit AdamState(const TrainerConfig& c)
      : config_(c), m_(PredictorWeights::Zeros()), v_(PredictorWeights::Zeros()) {}

  void Step(const PredictorWeights& grad, PredictorWeights* w) {
    ++t_;
    const double c1 = 1.0 - std::pow(static_cast<double>(config_.adam_beta1), t_);
    const double c2 = 1.0 - std::pow(static_cast<double>(config_.adam_beta2), t_);
    const float step = static_cast<float>(config_.learning_rate / c1);
    const float inv_c2 = static_cast<float>(1.0 / c2);
    const auto params = MlpArrays(*w);
    const auto grads = MlpArrays(grad);
    const auto ms = MlpArrays(m_);
    const auto vs = MlpArrays(v_);
    for (size_t a = 0; a < params.size(); ++a) {
      float* p = params[a]->data();
      const float* g = grads[a]->data();
      float* m = ms[a]->data();
      float* v = vs[a]->data();
      for (size_t i = 0; i < params[a]->size(); ++i) {
        m[i] = config_.adam_beta1 * m[i] + (1.0f - config_.adam_beta1) * g[i];
        v[i] = config_.adam_beta2 * v[i] + (1.0f - config_.adam_beta2) * g[i] * g[i];
        p[i] -= step * m[i] / (std::sqrt(v[i] * inv_c2) + config_.adam_epsilon);
      }
    }
  }

 private:
  TrainerConfig config_;
  PredictorWeights m_, v_;
  int t_ = 0;
};

void ZeroMlp(PredictorWeights* w) {
  for (std::vector<float>* a : MlpArrays(*w)) std::fill(a->begin(), a->end(), 0.0f);
}

// One epoch of minibatch Adam over `x` (normalised training rows) in a shuffled order;
// returns the mean training loss.
double TrainEpoch(const std::vector<float>& x, const std::vector<uint32_t>& y,
                  const TrainerConfig& config, dvl::DeterministicRandom& rng, AdamState& adam,
                  PredictorWeights* w, PredictorWeights* grad) {
  const size_t n = y.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.NextBelow(i)]);
  std::array<float, kPredictorHidden> hidden;
  std::array<float, kDraftPositions> logits;
  std::array<float, kDraftPositions> dz;
  double total = 0.0;
  for (size_t start = 0; start < n; start += config.batch_size) {
    const size_t end = std::min(n, start + static_cast<size_t>(config.batch_size));
    const float scale = 1.0f / static_cast<float>(end - start);
    ZeroMlp(grad);
    for (size_t b = start; b < end; ++b) {
      const float* xr = x.data() + order[b] * kFeatureCount;
      dvl::PredictorMlpForward(*w, xr, hidden.data(), logits.data());
      total += RecordLoss(logits.data(), y[order[b]], config.mse_weight, dz.data());
      for (float& g : dz) g *= scale;
      Backward(*w, xr, hidden.data(), dz.data(), grad);
    }
    adam.Step(*grad, w);
  }
  return total / static_cast<double>(n);
}

struct HoldoutMetrics {
  double loss = 0.0;
  double r2 = 0.0;
};

HoldoutMetrics EvaluateHoldout(const std::vector<float>& x, const std::vector<uint32_t>& y,
                               const TrainerConfig& config, const PredictorWeights& w) {
  std::array<float, kPredictorHidden> hidden;
  std::array<float, kDraftPositions> logits;
  std::array<float, kDraftPositions> dz;
  std::vector<double> predicted(y.size());
  std::vector<double> actual(y.size());
  double loss = 0.0;
  for (size_t r = 0; r < y.size(); ++r) {
    dvl::PredictorMlpForward(w, x.data() + r * kFeatureCount, hidden.data(), logits.data());
    loss += RecordLoss(logits.data(), y[r], config.mse_weight, dz.data());
    predicted[r] = PredictedAcceptedCount(logits.data());
    actual[r] = y[r];
  }
  return {loss / static_cast<double>(y.size()), RSquared(predicted, actual)};
}

std::vector<uint32_t> Labels(const TraceSet& traces, const std::vector<size_t>& rows) {
  std::vector<uint32_t> y(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) y[r] = traces.meta[rows[r]].accepted;
  return y;
}

}  // namespace

Status TrainerConfig::Validate() const {
  if (max_epochs < 1) return InvalidArgument("epochs must be >= 1");
  if (batch_size < 1) return InvalidArgument("batch size must be >= 1");
  if (!(learning_rate > 0.0f) || !std::isfinite(learning_rate)) {
    return InvalidArgument("learning rate must be a positive number");
  }
  if (patience < 1) return InvalidArgument("patience must be >= 1");
  if (!(holdout_fraction > 0.0 && holdout_fraction < 1.0)) {
    return InvalidArgument("holdout fraction must be in (0, 1), got " +
                           std::to_string(holdout_fraction));
  }
  if (!(mse_weight >= 0.0f)) return InvalidArgument("MSE weight must be >= 0");
  return Status::Ok();
}

double RecordLoss(const float* logits, uint32_t accepted, float mse_weight, float* dlogits) {
  double bce = 0.0;
  double sigmoid_sum = 0.0;
  std::array<double, kDraftPositions> p;
  for (int j = 0; j < kDraftPositions; ++j) {
    const double z = logits[j];
    const double t = accepted >= static_cast<uint32_t>(j + 1) ? 1.0 : 0.0;
    bce += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::abs(z)));
    p[j] = 1.0 / (1.0 + std::exp(-z));
    sigmoid_sum += p[j];
  }
  const double err = sigmoid_sum - accepted;
  for (int j = 0; j < kDraftPositions; ++j) {
    const double t = accepted >= static_cast<uint32_t>(j + 1) ? 1.0 : 0.0;
    dlogits[j] = static_cast<float>((p[j] - t) / kDraftPositions +
                                    2.0 * mse_weight * err * p[j] * (1.0 - p[j]));
  }
  return bce / kDraftPositions + mse_weight * err * err;
}

Result<Split> SplitByPrompt(const std::vector<TraceMeta>& meta, uint64_t seed, double fraction) {
  std::map<uint32_t, double> hash;  // prompt id → hash, ordered for determinism
  for (const TraceMeta& m : meta) hash.emplace(m.prompt_id, HoldoutHash(m.prompt_id, seed));
  if (hash.size() < 2) {
    return InvalidArgument(
        "a prompt-disjoint holdout needs at least two distinct prompt ids, got " +
        std::to_string(hash.size()));
  }
  std::map<uint32_t, bool> held;
  int64_t held_count = 0;
  for (const auto& [id, h] : hash) {
    held[id] = h < fraction;
    held_count += held[id] ? 1 : 0;
  }
  const int64_t total = static_cast<int64_t>(hash.size());
  const auto by_hash = [](const auto& a, const auto& b) { return a.second < b.second; };
  if (held_count == 0) {
    held[std::min_element(hash.begin(), hash.end(), by_hash)->first] = true;
    held_count = 1;
  } else if (held_count == total) {
    held[std::max_element(hash.begin(), hash.end(), by_hash)->first] = false;
    held_count = total - 1;
  }
  Split split;
  split.holdout_prompts = held_count;
  split.train_prompts = total - held_count;
  for (size_t r = 0; r < meta.size(); ++r) {
    (held[meta[r].prompt_id] ? split.holdout : split.train).push_back(r);
  }
  return split;
}

Result<TrainResult> TrainPredictor(const TraceSet& traces, const TrainerConfig& config,
                                   const std::function<void(const EpochReport&)>& progress) {
  DSCALE_RETURN_IF_ERROR(config.Validate());
  TrainResult result;
  DSCALE_ASSIGN_OR_RETURN(result.split,
                          SplitByPrompt(traces.meta, config.seed, config.holdout_fraction));
  PredictorWeights w = PredictorWeights::Zeros();
  ComputeNormalisation(traces, result.split.train, &w);
  InitialiseMlp(config.seed, &w);
  const std::vector<float> train_x = Normalise(traces, result.split.train, w);
  const std::vector<float> holdout_x = Normalise(traces, result.split.holdout, w);
  const std::vector<uint32_t> train_y = Labels(traces, result.split.train);
  const std::vector<uint32_t> holdout_y = Labels(traces, result.split.holdout);

  dvl::DeterministicRandom rng(dvl::SplitMix64Mix(config.seed ^ 0x5EED'5A0F'0000'0002ULL));
  AdamState adam(config);
  PredictorWeights grad = PredictorWeights::Zeros();
  double best_loss = std::numeric_limits<double>::infinity();
  int since_best = 0;
  for (int epoch = 1; epoch <= config.max_epochs && since_best < config.patience; ++epoch) {
    EpochReport report{.epoch = epoch};
    report.train_loss = TrainEpoch(train_x, train_y, config, rng, adam, &w, &grad);
    const HoldoutMetrics metrics = EvaluateHoldout(holdout_x, holdout_y, config, w);
    report.holdout_loss = metrics.loss;
    report.holdout_r2 = metrics.r2;
    report.improved = metrics.loss < best_loss;
    if (report.improved) {
      best_loss = metrics.loss;
      since_best = 0;
      result.weights = w;
      result.best_epoch = epoch;
      result.holdout_loss = metrics.loss;
      result.holdout_r2 = metrics.r2;
    } else {
      ++since_best;
    }
    result.epochs_run = epoch;
    if (progress) progress(report);
  }
  if (!std::isfinite(result.holdout_loss) || result.best_epoch == 0) {
    return InvalidArgument("training diverged: holdout loss is not finite (try a smaller --lr)");
  }
  return result;
}

}  // namespace dscale::train
