#include "model_options.h"

#include <CLI/CLI.hpp>

namespace dscale::cli {

void AddModelOptions(CLI::App* cmd, ModelOptions* options, const ModelFlags& flags) {
  CLI::Option* target =
      cmd->add_option("--target", options->target,
                      flags.target_required ? "Target checkpoint directory"
                                            : "Target checkpoint directory (in-process runs)");
  if (flags.target_required) target->required();
  CLI::Option* drafter =
      cmd->add_option("--drafter", options->drafter, "DFlash drafter checkpoint directory");
  if (flags.drafter_required) drafter->required();
  if (flags.predictor) {
    cmd->add_option("--predictor", options->predictor,
                    "DVL predictor file (the dscale and dspark policies; default: the drafter "
                    "folder's predictor.bin, or predictor-domino.bin for its Domino head)");
    cmd->add_option("--confidence-calibration", options->confidence_calibration,
                    "Sequential temperature scaling of a DSpark drafter's confidence head "
                    "(--spec dspark; default: the drafter folder's confidence_calibration.json "
                    "when it has one; written by calibrate-confidence)");
  }
  cmd->add_option("--tokenizer", options->tokenizer, "Tokenizer folder (default: the target's)");
  if (flags.device) AddDeviceOption(cmd, &options->device);
  AddWeightsOption(cmd, &options->weights);
  AddDrafterWeightsOption(cmd, &options->drafter_weights);
  AddActivationsOption(cmd, &options->activations);
  AddInt8ActivationsOption(cmd, &options->int8_activations);
  if (flags.drafter_head) AddDrafterHeadOption(cmd, &options->drafter_head);
  if (flags.draft_sampling) AddDraftSamplingOption(cmd, &options->draft_sampling);
  AddDraftVocabOption(cmd, &options->draft_vocab);
  AddThreadsOption(cmd);
}

}  // namespace dscale::cli
