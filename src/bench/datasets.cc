#include "bench/datasets.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale::bench {
namespace {

constexpr char kMathSuffix[] =
    "\nPlease reason step by step, and put your final answer within \\boxed{}.";
constexpr char kCodePrefix[] =
    "Write a solution to the following problem and make sure that it passes the tests:\n"
    "```python\n";
constexpr char kCodeSuffix[] = "\n```";
// MBPP's conventional test split.
constexpr int64_t kMbppFirstTest = 11;
constexpr int64_t kMbppLastTest = 510;

struct Source {
  const char* file;   // under data_dir
  const char* field;  // the record's prompt field
};

Source SourceOf(const std::string& dataset) {
  if (dataset == "gsm8k") return {"gsm8k/test.jsonl", "question"};
  if (dataset == "math500") return {"math500/test.jsonl", "problem"};
  if (dataset == "humaneval") return {"humaneval/HumanEval.jsonl", "prompt"};
  return {"mbpp/mbpp.jsonl", "text"};
}

// Whether a record belongs to the benchmark split; `where` names the record for errors.
Result<bool> InSplit(const std::string& dataset, const nlohmann::json& record,
                     const std::string& where) {
  if (dataset != "mbpp") return true;
  const nlohmann::json* task = JsonMember(record, "task_id");
  if (task == nullptr) return false;
  const Result<int64_t> id =
      ReadJsonInt(*task, where + ": field \"task_id\"", std::numeric_limits<int64_t>::lowest(),
                  std::numeric_limits<int64_t>::max());
  if (!id.ok()) return DataLoss(id.status().message());
  return *id >= kMbppFirstTest && *id <= kMbppLastTest;
}

}  // namespace

const std::vector<std::string>& KnownDatasets() {
  static const std::vector<std::string> names = {"gsm8k", "math500", "humaneval", "mbpp"};
  return names;
}

std::string FormatPrompt(const std::string& dataset, const std::string& field) {
  if (dataset == "gsm8k" || dataset == "math500") return field + kMathSuffix;
  if (dataset == "humaneval") return kCodePrefix + field + kCodeSuffix;
  return field;
}

Result<Dataset> LoadDataset(const std::string& data_dir, const std::string& dataset,
                            int32_t max_distinct) {
  const std::vector<std::string>& known = KnownDatasets();
  if (std::find(known.begin(), known.end(), dataset) == known.end()) {
    return InvalidArgument("unknown dataset '" + dataset +
                           "' (expected gsm8k, math500, humaneval or mbpp)");
  }
  if (max_distinct < 1) return InvalidArgument("distinct prompts must be at least 1");
  const Source source = SourceOf(dataset);
  const std::string path = data_dir + "/" + source.file;
  Result<std::string> read = ReadFileToString(path);
  if (!read.ok()) {
    // The default folder is relative: from outside the repository it is the wrong one.
    return Status(read.status().code(), read.status().message() +
                                            " (--data-dir names the folder holding " + source.file +
                                            "; default: data, relative to the working directory)");
  }
  const std::string text = std::move(*read);
  Dataset out{.name = dataset};
  std::istringstream lines(text);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = path + ":" + std::to_string(number);
    if (!record.is_object()) return DataLoss(where + ": not a JSON object");
    DSCALE_ASSIGN_OR_RETURN(const bool in_split, InSplit(dataset, record, where));
    if (!in_split) continue;
    auto field = record.find(source.field);
    if (field == record.end() || !field->is_string()) {
      return DataLoss(where + ": missing string field '" + source.field + "'");
    }
    out.prompts.push_back(FormatPrompt(dataset, field->get<std::string>()));
    if (static_cast<int32_t>(out.prompts.size()) == max_distinct) break;
  }
  if (out.prompts.empty()) return DataLoss(path + ": no prompts");
  return out;
}

}  // namespace dscale::bench
