#pragma once
// The model flags generate, serve, bench and collect share: which checkpoints to load and how
// (ModelOptions), and one place that registers them on a command (AddModelOptions).

#include <string>

#include "backend/backend.h"
#include "cli_util.h"
#include "model/decoder_weights.h"
#include "model/domino_head.h"
#include "model/draft_vocab.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dscale::cli {

// What a command loads: the target, and the drafter, predictor and tokenizer beside it.
struct ModelOptions {
  std::string target;     // --target folder
  std::string drafter;    // --drafter folder; empty: none given
  std::string predictor;  // --predictor file; empty: the drafter folder's (BundledPredictorPath)
  // --confidence-calibration file; empty: the drafter folder's confidence_calibration.json if any
  std::string confidence_calibration;
  std::string tokenizer;  // --tokenizer folder; empty: the target folder's
  std::string device{kDefaultDevice};  // --device: where the step backend runs the models
  WeightsMode weights = WeightsMode::kAsStored;
  WeightsMode drafter_weights = WeightsMode::kAsStored;  // --drafter-weights
  cpu::Bf16Activations activations = DefaultActivations();
  cpu::Int8Activations int8_activations = kDefaultInt8Activations;
  DrafterHead drafter_head = DrafterHead::kNone;
  DraftVocabChoice draft_vocab = kDefaultDraftVocab;
  // --draft-sampling: how requests at temperature > 0 draft (the commands that run an engine set
  // EngineConfig::draft_sampling from it; LoadRuntime refuses what --device cannot run).
  DraftSampling draft_sampling = DraftSampling::kArgmax;
};

// Which of the shared flags a command takes beyond the ones every command has (--target,
// --drafter, --tokenizer, --weights, --drafter-weights, --activations, --int8-activations,
// --draft-vocab, --threads), and which it requires.
struct ModelFlags {
  bool target_required = true;
  bool drafter_required = false;
  bool predictor = true;     // --predictor, --confidence-calibration
  bool device = true;        // --device
  bool drafter_head = true;  // --drafter-head
  bool draft_sampling = true;  // --draft-sampling
};

// Registers the flags `flags` selects on `cmd`, into `options`.
void AddModelOptions(CLI::App* cmd, ModelOptions* options, const ModelFlags& flags);

}  // namespace dscale::cli
