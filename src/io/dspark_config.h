#pragma once
// The heads a DSpark drafter (DeepSpec's `Qwen3DSparkModel`) declares at the top level of its
// `config.json`, beside the DFlash-style backbone's fields (io/dflash_config.h reads those):
//
//   "markov_rank": r                      0: no Markov head
//   "markov_head_type": "vanilla" | "gated" | "rnn"   required when r > 0 (any letter case, as
//                                         DeepSpec lower-cases it)
//   "enable_confidence_head": bool        required
//   "confidence_head_with_markov": bool   required when the confidence head is enabled; true
//                                         needs r > 0
//
// (`num_anchors`, also required by DeepSpec's constructor, only sizes its training batches and is
// not read.) What the heads compute: model/dspark_head.h.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dscale {

enum class MarkovHeadType { kVanilla, kGated, kRnn };
// "vanilla", "gated", "rnn".
std::string_view MarkovHeadTypeName(MarkovHeadType type);

struct DSparkHeadConfig {
  int64_t markov_rank = 0;                                     // r; 0: no Markov head
  MarkovHeadType markov_head_type = MarkovHeadType::kVanilla;  // meaningful when r > 0
  bool confidence_head = false;                                // "enable_confidence_head"
  bool confidence_with_markov = false;  // the confidence head also reads W1[previous token]

  bool has_markov_head() const { return markov_rank > 0; }
  bool operator==(const DSparkHeadConfig&) const = default;
};

// The fields above from `root` (the parsed config at `path`). Errors name `path` and the field:
// a missing required field, a wrong type, a negative rank, an unknown head type, a confidence
// head with the Markov embedding but no Markov head.
Result<DSparkHeadConfig> ParseDSparkHeadConfig(const nlohmann::json& root, const std::string& path);

// Writes the fields above into `root` (the type only when r > 0, the confidence head's input
// only when it is enabled, as DeepSpec's build_draft_config writes them).
void WriteDSparkHeadConfig(const DSparkHeadConfig& config, nlohmann::json& root);

}  // namespace dscale
