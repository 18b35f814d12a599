#pragma once
// Start-up shared by generate, serve, bench and collect: the models ModelOptions names, loaded
// once into a Runtime (LoadRuntime), and an engine over it (MakeEngine).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "backend/step_backend.h"
#include "budget/confidence_survival.h"
#include "budget/sps_table.h"
#include "budget_options.h"
#include "core/status.h"
#include "dvl/predictor.h"
#include "engine/engine.h"
#include "io/tokenizer/tokenizer.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "model_options.h"
#include "spec/length_policy.h"

namespace dscale::cli {

enum class TokenizerNeed {
  // --tokenizer, else the target folder's when it has tokenizer files, else none.
  kIfFound,
  // --tokenizer, else the target folder's; an error naming the folder when it cannot be loaded.
  kRequired,
};

// A drafter beside the runtime's own, on the CPU: the --drafter folder's with another head
// (bench's domino modes) or another folder's (bench's dspark-drafter modes). `predictor_flag`
// names the flag `predictor` came from in errors.
struct DrafterVariantParts {
  std::string drafter_dir;  // empty: --drafter's folder
  DrafterHead head = DrafterHead::kDomino;
  bool predictor = false;      // load the predictor trained on this head's drafts
  std::string predictor_file;  // the flag's value; empty: the drafter folder's bundled file
  std::string predictor_flag;  // e.g. "--domino-predictor"
};

// What LoadRuntime loads beside the target.
struct RuntimeParts {
  TokenizerNeed tokenizer = TokenizerNeed::kIfFound;
  bool drafter = false;    // --drafter's, when given (the engine refuses a policy that lacks one)
  bool predictor = false;  // the drafter's DVL predictor (needs `drafter`)
  // Skip the predictor when the drafter has a confidence head: every policy wanting the
  // predictor ranks by the head instead (LengthPolicy::RanksByConfidenceHead).
  bool confidence_replaces_predictor = false;
  std::optional<DrafterVariantParts> variant;  // bench's domino modes
  std::optional<DrafterVariantParts> dspark;   // bench's dspark-drafter modes
};

// The parts `policy` runs with (LengthPolicy::UsesDrafter, UsesPredictor).
RuntimeParts PartsFor(const LengthPolicy& policy, TokenizerNeed tokenizer);

// A drafter over the runtime's target, the DVL predictor trained on its drafts, and the step
// backend that runs the pair. `drafter` empty: the backend runs the target alone.
struct Drafting {
  std::optional<DFlashDrafter> drafter;
  std::optional<dvl::Predictor> predictor;
  std::string predictor_path;  // the file `predictor` came from (the flag's, or the bundled one)
  // A confidence head's STS temperatures (LoadConfidenceCalibrationFor); none: uncalibrated.
  std::optional<budget::ConfidenceCalibration> confidence_calibration;
  std::unique_ptr<StepBackend> backend;

  int32_t block_size() const { return drafter ? drafter->block_size() : 1; }  // 1: no drafter
  const dvl::Predictor* predictor_or_null() const { return predictor ? &*predictor : nullptr; }
  const budget::ConfidenceCalibration* confidence_calibration_or_null() const {
    return confidence_calibration ? &*confidence_calibration : nullptr;
  }
};

// The loaded models. Members refer to each other (the drafters share the target's embedding and LM
// head, the backends hold both, an engine holds the backend and the tables), so a Runtime is never
// moved.
struct Runtime {
  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  std::optional<DecoderModel> target;  // always set once loaded
  std::optional<Tokenizer> tokenizer;
  Drafting main;                              // the drafter with --drafter-head, on --device
  std::optional<Drafting> variant;            // RuntimeParts::variant's, on the CPU
  std::optional<Drafting> dspark;             // RuntimeParts::dspark's, on the CPU
  std::optional<budget::SpsTable> sps_table;  // dspark's (PrepareSpsTable)

  const Tokenizer* tokenizer_or_null() const { return tokenizer ? &*tokenizer : nullptr; }
};

// Loads, in this order (the first failure is the error): --weights and --drafter-weights checked
// against --device, the
// target, the tokenizer, the drafter and its predictor, the variant drafter and its predictor,
// then the backends.
Result<std::unique_ptr<Runtime>> LoadRuntime(const ModelOptions& options,
                                             const RuntimeParts& parts);

// Sets runtime.sps_table with SpsTableFor: dspark's steps-per-second table when `needed`,
// profiled on the main backend up to `max_rows` verified rows unless --sps-table gives one.
Status PrepareSpsTable(Runtime& runtime, const BudgetFlags& budget, bool needed, int64_t max_rows);

// How stop strings read the output: the bytes token `id` adds to its text under `tokenizer`.
using TokenTextOf = std::string_view (*)(const Tokenizer& tokenizer, int32_t id);

// What MakeEngine adds to a command's EngineConfig from the command line and the runtime.
struct EngineInputs {
  const BudgetFlags* budget = nullptr;  // the verify budget and dspark's table; null: defaults
  // The bytes a token adds to the text stop strings are found in (EngineConfig::token_text), with
  // the runtime's tokenizer; null: stop strings are refused.
  TokenTextOf token_text_of = nullptr;
};

// An engine on the runtime's main backend: `config` as the command sets it, the policy's inputs
// (EngineConfig::inputs) taken from the runtime (its predictor) and `inputs.budget` (the verify
// budget; dspark's table from PrepareSpsTable, up to block · max_running rows). The runtime must
// outlive the engine.
Result<std::unique_ptr<Engine>> MakeEngine(Runtime& runtime, EngineConfig config,
                                           const EngineInputs& inputs = {});

}  // namespace dscale::cli
