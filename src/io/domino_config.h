#pragma once
// The Domino head's entry in a DFlash drafter's `config.json` (docs/DOMINO.md):
//
//   "domino_config": {"head_file": "domino_head.safetensors",
//                     "gru_hidden_size": 128, "bottleneck_size": 64}
//
// A drafter whose config has no such entry has no head.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace dscale {

struct DominoHeadConfig {
  std::string head_file;        // file name inside the drafter folder (no directories)
  int64_t gru_hidden_size = 0;  // G: the GRU state s_i
  int64_t bottleneck_size = 0;  // B: the correction MLP's hidden width
};

// The "domino_config" object of `root` (the parsed config at `path`), or nullopt when absent.
// Errors name `path`, the field and what was expected.
Result<std::optional<DominoHeadConfig>> ParseDominoHeadConfig(const nlohmann::json& root,
                                                              const std::string& path);

// {"head_file": ..., "gru_hidden_size": ..., "bottleneck_size": ...}
nlohmann::json DominoHeadConfigToJson(const DominoHeadConfig& config);

}  // namespace dscale
