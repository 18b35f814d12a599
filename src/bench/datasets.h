#pragma once
// The benchmark prompt sets in data/ and their prompt formats, as DFlash's evaluation writes
// them (the text of one user chat turn; the chat template is applied by whoever encodes it):
//   gsm8k     the question, then "Please reason step by step, and put your final answer
//             within \boxed{}."
//   math500   the problem, with the same instruction
//   humaneval the function stub inside a "write a solution that passes the tests" instruction
//   mbpp      the task text, as is (the test split: task ids 11..510)

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::bench {

struct Dataset {
  std::string name;
  std::vector<std::string> prompts;  // distinct user-turn texts, in file order
};

// "gsm8k", "math500", "humaneval", "mbpp".
const std::vector<std::string>& KnownDatasets();

// The user-turn text for one record of `dataset` (a parsed JSON line's fields as a string map
// would be too loose: the caller passes the one field the format needs).
std::string FormatPrompt(const std::string& dataset, const std::string& field);

// Reads the first `max_distinct` prompts of `dataset` from `data_dir` (the repository's data/).
// Errors name the file and line.
Result<Dataset> LoadDataset(const std::string& data_dir, const std::string& dataset,
                            int32_t max_distinct);

}  // namespace dscale::bench
