#pragma once
// Prompts for `dscale generate`: token ids (--ids), one text (--prompt) or a JSONL file
// (--prompts) whose lines are {"prompt": "..."}, {"messages": [{"role", "content"}...]} or
// {"ids": [...]}. Text goes through the Qwen3 chat template (one user turn, thinking disabled)
// unless `raw`.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale::cli {

struct PromptFlags {
  std::string ids;
  std::string prompt;
  std::string prompts_file;
  bool raw = false;
};

// Exactly one of the three sources must be given. `tokenizer` may be null when only ids are
// used; text without a tokenizer is an error naming the flag.
Result<std::vector<std::vector<int32_t>>> LoadPrompts(const PromptFlags& flags,
                                                      const Tokenizer* tokenizer);

// A JSONL line's "ids" member: a list of token ids, each checked as the JSON number it is
// before it is narrowed to 32 bits; errors name "ids" and the element.
Result<std::vector<int32_t>> ReadTokenIdList(const nlohmann::json& ids);

// The tokenizer in `dir` (--tokenizer), else the target's own folder when it has tokenizer
// files, else none. A tokenizer with a token id at or past `vocab_size` (the target's
// vocabulary) is refused, naming the file.
Result<std::optional<Tokenizer>> LoadOptionalTokenizer(const std::string& dir,
                                                       const std::string& target_dir,
                                                       int64_t vocab_size);

}  // namespace dscale::cli
