#pragma once
// Trains the DVL acceptance predictor on logged traces (paper §DVL, "Position j is labeled 1
// if full-width verification accepts at least j new tokens").
//
//   labels   t_j = [y ≥ j], j = 1..15
//   loss     per record: (1/15) Σ_j BCE(σ(z_j), t_j) + mse_weight · (Σ_j σ(z_j) − y)²,
//            with the raw sigmoids (before the cumulative minimum); averaged over a minibatch
//   split    prompt-disjoint: a prompt id is held out when
//            SplitMix64Mix(seed ^ SplitMix64Mix(prompt_id)) / 2^64 < holdout_fraction;
//            if that leaves either side empty, the prompt with the smallest hash is moved
//   features standardised with the training split's mean/std (stored in the predictor)
//   optimiser Adam on minibatches shuffled each epoch; early stopping keeps the weights of
//            the epoch with the lowest holdout loss and stops after `patience` epochs without
//            improvement
// Reported holdout R² uses ℓ̂ = Σ_j q_j after the cumulative minimum (see predictor_eval.h).
// Single-threaded and driven only by `seed`, so a run is reproducible bit for bit.

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "dvl/predictor.h"
#include "train/trace_file.h"

namespace dscale::train {

struct TrainerConfig {
  int max_epochs = 60;
  int batch_size = 256;
  float learning_rate = 1e-3f;
  float adam_beta1 = 0.9f;
  float adam_beta2 = 0.999f;
  float adam_epsilon = 1e-8f;
  float mse_weight = 0.02f;
  int patience = 5;
  double holdout_fraction = 0.1;
  uint64_t seed = 1;

  Status Validate() const;
};

struct Split {
  std::vector<size_t> train;    // record indices
  std::vector<size_t> holdout;  // record indices; no prompt id appears on both sides
  int64_t train_prompts = 0;
  int64_t holdout_prompts = 0;
};

// The prompt-disjoint split described above; InvalidArgument with fewer than two prompt ids.
Result<Split> SplitByPrompt(const std::vector<TraceMeta>& meta, uint64_t seed, double fraction);

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0.0;
  double holdout_loss = 0.0;
  double holdout_r2 = 0.0;
  bool improved = false;  // lowest holdout loss so far
};

struct TrainResult {
  dvl::PredictorWeights weights;  // best epoch's weights with the normalisation statistics
  Split split;
  int best_epoch = 0;
  int epochs_run = 0;
  double holdout_loss = 0.0;  // at the best epoch
  double holdout_r2 = 0.0;    // at the best epoch
};

// Trains on `traces`; `progress` (may be empty) is called after every epoch.
Result<TrainResult> TrainPredictor(const TraceSet& traces, const TrainerConfig& config,
                                   const std::function<void(const EpochReport&)>& progress = {});

// Per-record loss and its gradient with respect to the logits (exposed for gradient tests):
// logits [15], y accepted count, dlogits [15] receives dLoss/dz (unscaled by batch size).
double RecordLoss(const float* logits, uint32_t accepted, float mse_weight, float* dlogits);

}  // namespace dscale::train
