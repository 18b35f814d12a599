#include "predictor_loading.h"

namespace dscale::cli {

Result<dvl::Predictor> LoadDvlPredictor(const std::string& path, const DFlashDrafter& drafter,
                                        int64_t target_vocab) {
  if (path.empty()) return InvalidArgument("--spec dscale needs --predictor FILE");
  const dvl::DrafterDims dims{.hidden_size = drafter.config().draft.hidden_size,
                              .vocab_size = target_vocab};
  return dvl::Predictor::Load(path, dims);
}

}  // namespace dscale::cli
