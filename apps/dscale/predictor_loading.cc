#include "predictor_loading.h"

#include <filesystem>
#include <optional>
#include <system_error>

namespace dscale::cli {

std::string BundledPredictorPath(const std::string& drafter_dir, DrafterHead head) {
  const char* name = head == DrafterHead::kDomino ? "predictor-domino.bin" : "predictor.bin";
  return (std::filesystem::path(drafter_dir) / name).string();
}

Result<std::string> ResolvePredictorPath(const std::string& flag_value,
                                         const std::string& flag_name,
                                         const std::string& drafter_dir, DrafterHead head) {
  if (!flag_value.empty()) return flag_value;
  const std::string bundled = BundledPredictorPath(drafter_dir, head);
  std::error_code error;
  if (!drafter_dir.empty() && std::filesystem::is_regular_file(bundled, error)) return bundled;
  return InvalidArgument("the dscale and dspark policies need " + flag_name +
                         " FILE: none was given and the drafter folder has no " + bundled);
}

dvl::DrafterDims PredictorDimsFor(const DFlashDrafter& drafter) {
  return {.hidden_size = drafter.config().draft.hidden_size,
          .vocab_size = drafter.draft_vocab_size()};
}

Result<dvl::Predictor> LoadPredictorFor(const std::string& path, const DFlashDrafter& drafter) {
  const dvl::DrafterDims dims = PredictorDimsFor(drafter);
  DSCALE_ASSIGN_OR_RETURN(dvl::Predictor predictor,
                          dvl::Predictor::Load(path, {.hidden_size = dims.hidden_size}));
  const int64_t built_for = predictor.projections().vocab_size;
  if (built_for == dims.vocab_size) {
    if (const std::optional<dvl::HeadRows> rows = LinearHeadRows(drafter)) {
      predictor.FoldLogitProjection(*rows);
    }
    return predictor;
  }
  const DraftVocab* subset = drafter.draft_vocab();
  const std::string drafts_over =
      subset != nullptr
          ? "the " + std::to_string(subset->size()) + " tokens of its " + kDraftVocabFileName +
                " (a subset of " + std::to_string(subset->target_vocab_size) + ")"
          : "the target's whole vocabulary of " + std::to_string(dims.vocab_size);
  return InvalidArgument("predictor file " + path + ": built for drafter vocabulary size " +
                         std::to_string(built_for) + ", but the running drafter drafts over " +
                         drafts_over +
                         " (--draft-vocab full|subset chooses; a predictor is trained on traces "
                         "collected with the same choice)");
}

std::optional<dvl::HeadRows> LinearHeadRows(const DFlashDrafter& drafter) {
  const WeightMatrix& head = drafter.lm_head();
  if (drafter.conditions_on_candidates() || head.rows() != drafter.draft_vocab_size() ||
      head.cols() != drafter.config().draft.hidden_size) {
    return std::nullopt;
  }
  return [&head](int64_t first, int64_t count, float* out) {
    for (int64_t r = 0; r < count; ++r) head.RowToF32(first + r, out + r * head.cols());
  };
}

Result<std::optional<budget::ConfidenceCalibration>> LoadConfidenceCalibrationFor(
    const std::string& flag_value, const std::string& drafter_dir, const Drafter& drafter) {
  std::string path = flag_value;
  if (path.empty()) {
    const std::string bundled =
        (std::filesystem::path(drafter_dir) / budget::kConfidenceCalibrationFile).string();
    std::error_code error;
    if (drafter_dir.empty() || !std::filesystem::is_regular_file(bundled, error)) {
      return std::optional<budget::ConfidenceCalibration>();
    }
    path = bundled;
  }
  Result<budget::ConfidenceCalibration> loaded =
      budget::LoadConfidenceCalibration(path, drafter.block_size() - 1);
  if (!loaded.ok()) return loaded.status().WithContext("--confidence-calibration");
  return std::optional<budget::ConfidenceCalibration>(std::move(loaded).value());
}

}  // namespace dscale::cli
