#include "runtime.h"

#include <utility>

#include "backend/backend.h"
#include "predictor_loading.h"
#include "prompt_input.h"

namespace dscale::cli {
namespace {

// TokenizerNeed::kRequired: the folder's tokenizer, fitted to the target's vocabulary, its errors
// naming the folder and the flag that picks another.
Result<Tokenizer> LoadRequiredTokenizer(const ModelOptions& options, int64_t vocab_size) {
  const std::string dir = options.tokenizer.empty() ? options.target : options.tokenizer;
  Result<Tokenizer> tokenizer = Tokenizer::Load(dir);
  if (tokenizer.ok()) {
    if (Status fits = tokenizer->CheckFitsVocabulary(vocab_size); !fits.ok()) tokenizer = fits;
  }
  if (!tokenizer.ok()) {
    return tokenizer.status().WithContext("tokenizer (" + dir +
                                          "; --tokenizer DIR names another folder)");
  }
  return tokenizer;
}

Result<std::optional<Tokenizer>> LoadTokenizer(const ModelOptions& options, TokenizerNeed need,
                                               int64_t vocab_size) {
  if (need == TokenizerNeed::kIfFound) {
    return LoadOptionalTokenizer(options.tokenizer, options.target, vocab_size);
  }
  DSCALE_ASSIGN_OR_RETURN(Tokenizer tokenizer, LoadRequiredTokenizer(options, vocab_size));
  return std::optional<Tokenizer>(std::move(tokenizer));
}

// The one predictor loader: the file `flag_value` names, else the drafter folder's bundled one
// for the drafter's head (a missing one an error naming `flag_name`), checked against the drafts
// it will read (LoadPredictorFor). `load_context`, when not empty, names the flag in the errors of
// a file that does not load.
Status LoadPredictor(const std::string& flag_value, const std::string& flag_name,
                     const std::string& load_context, const std::string& drafter_dir,
                     Drafting& drafting) {
  const DrafterHead head =
      drafting.drafter->head() != nullptr ? DrafterHead::kDomino : DrafterHead::kNone;
  DSCALE_ASSIGN_OR_RETURN(drafting.predictor_path,
                          ResolvePredictorPath(flag_value, flag_name, drafter_dir, head));
  Result<dvl::Predictor> loaded = LoadPredictorFor(drafting.predictor_path, *drafting.drafter);
  if (!loaded.ok()) {
    return load_context.empty() ? loaded.status() : loaded.status().WithContext(load_context);
  }
  drafting.predictor.emplace(std::move(loaded).value());
  return Status::Ok();
}

Status LoadMainDrafting(const ModelOptions& options, const RuntimeParts& parts, Runtime& runtime) {
  // Without --drafter nothing is loaded; the engine's policy check names the flag
  // (CheckPolicyInputs, plan/planner_config.h).
  if (!parts.drafter || options.drafter.empty()) return Status::Ok();
  DSCALE_ASSIGN_OR_RETURN(
      runtime.main.drafter,
      DFlashDrafter::Load(options.drafter, *runtime.target, options.drafter_head,
                          options.draft_vocab, options.drafter_weights));
  const bool confidence_head = runtime.main.drafter->has_confidence_head();
  if (confidence_head) {
    DSCALE_ASSIGN_OR_RETURN(runtime.main.confidence_calibration,
                            LoadConfidenceCalibrationFor(options.confidence_calibration,
                                                         options.drafter, *runtime.main.drafter));
  }
  if (!parts.predictor || (parts.confidence_replaces_predictor && confidence_head)) {
    return Status::Ok();
  }
  return LoadPredictor(options.predictor, "--predictor", /*load_context=*/"", options.drafter,
                       runtime.main);
}

Status LoadVariantDrafting(const ModelOptions& options, const DrafterVariantParts& parts,
                           const DecoderModel& target, Drafting& variant) {
  const std::string& dir = parts.drafter_dir.empty() ? options.drafter : parts.drafter_dir;
  DSCALE_ASSIGN_OR_RETURN(
      variant.drafter,
      DFlashDrafter::Load(dir, target, parts.head, options.draft_vocab, options.drafter_weights));
  if (variant.drafter->has_confidence_head()) {
    DSCALE_ASSIGN_OR_RETURN(variant.confidence_calibration,
                            LoadConfidenceCalibrationFor("", dir, *variant.drafter));
  }
  if (!parts.predictor) return Status::Ok();
  return LoadPredictor(parts.predictor_file, parts.predictor_flag, parts.predictor_flag, dir,
                       variant);
}

Result<std::unique_ptr<StepBackend>> BackendFor(std::string_view device, Runtime& runtime,
                                                Drafting& drafting) {
  return MakeBackend(device, *runtime.target, drafting.drafter ? &*drafting.drafter : nullptr);
}

}  // namespace

RuntimeParts PartsFor(const LengthPolicy& policy, TokenizerNeed tokenizer) {
  return {.tokenizer = tokenizer,
          .drafter = policy.UsesDrafter(),
          .predictor = policy.UsesPredictor(),
          .confidence_replaces_predictor = policy.RanksByConfidenceHead()};
}

Result<std::unique_ptr<Runtime>> LoadRuntime(const ModelOptions& options,
                                             const RuntimeParts& parts) {
  DSCALE_RETURN_IF_ERROR(CheckWeightsForDevice(options.device, options.weights));
  DSCALE_RETURN_IF_ERROR(
      CheckWeightsForDevice(options.device, options.drafter_weights, "--drafter-weights"));
  DSCALE_RETURN_IF_ERROR(CheckDraftSamplingForDevice(options.device, options.draft_sampling));
  auto runtime = std::make_unique<Runtime>();
  DSCALE_ASSIGN_OR_RETURN(runtime->target, DecoderModel::Load(options.target, options.weights,
                                                              {.bf16 = options.activations,
                                                               .int8 = options.int8_activations}));
  DSCALE_ASSIGN_OR_RETURN(runtime->tokenizer, LoadTokenizer(options, parts.tokenizer,
                                                            runtime->target->config().vocab_size));
  DSCALE_RETURN_IF_ERROR(LoadMainDrafting(options, parts, *runtime));
  DSCALE_ASSIGN_OR_RETURN(runtime->main.backend,
                          BackendFor(options.device, *runtime, runtime->main));
  // The variants run on the CPU only (the Domino head and the DSpark drafter have no device
  // forward).
  for (auto [variant_parts, variant] : {std::pair{&parts.variant, &runtime->variant},
                                        std::pair{&parts.dspark, &runtime->dspark}}) {
    if (!variant_parts->has_value()) continue;
    DSCALE_RETURN_IF_ERROR(
        LoadVariantDrafting(options, **variant_parts, *runtime->target, variant->emplace()));
    DSCALE_ASSIGN_OR_RETURN((*variant)->backend, BackendFor("cpu", *runtime, **variant));
  }
  return runtime;
}

Status PrepareSpsTable(Runtime& runtime, const BudgetFlags& budget, bool needed, int64_t max_rows) {
  StepBackend& backend = *runtime.main.backend;
  DSCALE_ASSIGN_OR_RETURN(runtime.sps_table, SpsTableFor(budget, needed, backend.target(),
                                                         backend.drafter(), max_rows));
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> MakeEngine(Runtime& runtime, EngineConfig config,
                                           const EngineInputs& inputs) {
  config.inputs.predictor = runtime.main.predictor_or_null();
  config.inputs.confidence_calibration = runtime.main.confidence_calibration_or_null();
  if (inputs.budget != nullptr) {
    // Not profiled without a drafter: Engine::Create refuses the policy first.
    DSCALE_RETURN_IF_ERROR(PrepareSpsTable(
        runtime, *inputs.budget, config.policy.UsesSpsTable() && runtime.main.drafter.has_value(),
        int64_t{runtime.main.block_size()} * config.max_running));
    DSCALE_ASSIGN_OR_RETURN(config.inputs.verify_budget, inputs.budget->VerifyBudget());
    config.inputs.sps_table = runtime.sps_table ? &*runtime.sps_table : nullptr;
  }
  if (inputs.token_text_of != nullptr && runtime.tokenizer) {
    config.token_text = [text_of = inputs.token_text_of, &tokenizer = *runtime.tokenizer](
                            int32_t id) { return text_of(tokenizer, id); };
  }
  return Engine::Create(*runtime.main.backend, std::move(config));
}

}  // namespace dscale::cli
