#include "predictor_loading.h"

#include <filesystem>
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

Result<dvl::Predictor> LoadDvlPredictor(const std::string& flag_value,
                                        const std::string& drafter_dir,
                                        const DFlashDrafter& drafter, int64_t target_vocab) {
  const DrafterHead head = drafter.head() != nullptr ? DrafterHead::kDomino : DrafterHead::kNone;
  DSCALE_ASSIGN_OR_RETURN(const std::string path,
                          ResolvePredictorPath(flag_value, "--predictor", drafter_dir, head));
  const dvl::DrafterDims dims{.hidden_size = drafter.config().draft.hidden_size,
                              .vocab_size = target_vocab};
  return dvl::Predictor::Load(path, dims);
}

}  // namespace dscale::cli
