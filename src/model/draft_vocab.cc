#include "model/draft_vocab.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <system_error>

#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale {
namespace {

// A draft vocabulary lists a few hundred thousand ids at most: 16 MiB bounds the file.
constexpr size_t kMaxDraftVocabFileBytes = size_t{16} << 20;

std::string FieldName(std::string_view where, std::string_view field) {
  return JsonFieldName(where, field);
}

Result<const nlohmann::json*> RequiredMember(const nlohmann::json& root, const std::string& path,
                                             const char* key) {
  const nlohmann::json* value = JsonMember(root, key);
  if (value == nullptr) return InvalidArgument(FieldName(path, key) + ": missing");
  return value;
}

Status CheckHeader(const nlohmann::json& root, const std::string& path, int64_t target_vocab) {
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* format, RequiredMember(root, path, "format"));
  DSCALE_ASSIGN_OR_RETURN(std::string name, ReadJsonString(*format, FieldName(path, "format")));
  if (name != kDraftVocabFormat) {
    return InvalidArgument(FieldName(path, "format") + ": expected \"" + kDraftVocabFormat +
                           "\", got \"" + name + "\"");
  }
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* version, RequiredMember(root, path, "version"));
  DSCALE_RETURN_IF_ERROR(
      ReadJsonInt(*version, FieldName(path, "version"), kDraftVocabVersion, kDraftVocabVersion)
          .status());
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* vocab,
                          RequiredMember(root, path, "target_vocab_size"));
  DSCALE_ASSIGN_OR_RETURN(int64_t declared,
                          ReadJsonInt(*vocab, FieldName(path, "target_vocab_size"), 1, INT32_MAX));
  if (declared != target_vocab) {
    return InvalidArgument(FieldName(path, "target_vocab_size") + ": the subset was made for a " +
                           std::to_string(declared) + "-token target, but the target has " +
                           std::to_string(target_vocab) + " tokens");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateDraftVocabIds(std::span<const int32_t> ids, int64_t target_vocab_size,
                             std::string_view where) {
  const auto size = static_cast<int64_t>(ids.size());
  if (size < kMinDraftVocabSize) {
    return InvalidArgument(std::string(where) + ": " + std::to_string(size) +
                           " ids; a draft vocabulary needs at least " +
                           std::to_string(kMinDraftVocabSize) +
                           " (the DVL features rank the top 16 draft logits)");
  }
  for (int64_t i = 0; i < size; ++i) {
    const int32_t id = ids[static_cast<size_t>(i)];
    const std::string entry = std::string(where) + "[" + std::to_string(i) + "]";
    if (id < 0 || id >= target_vocab_size) {
      return InvalidArgument(entry + ": token id " + std::to_string(id) +
                             " is outside the target vocabulary [0, " +
                             std::to_string(target_vocab_size) + ")");
    }
    if (i > 0 && id <= ids[static_cast<size_t>(i - 1)]) {
      return InvalidArgument(entry + ": token id " + std::to_string(id) + " after " +
                             std::to_string(ids[static_cast<size_t>(i - 1)]) +
                             " (ids must be strictly increasing: sorted, no duplicates)");
    }
  }
  return Status::Ok();
}

Result<DraftVocab> ParseDraftVocab(std::string_view text, const std::string& path,
                                   int64_t target_vocab_size) {
  Result<nlohmann::json> parsed = ParseJsonDocument(text);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  const nlohmann::json& root = *parsed;
  if (!root.is_object()) {
    return InvalidArgument(path + ": expected a JSON object, got " + DescribeJson(root));
  }
  DSCALE_RETURN_IF_ERROR(CheckHeader(root, path, target_vocab_size));
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* ids, RequiredMember(root, path, "token_ids"));
  const std::string field = FieldName(path, "token_ids");
  if (!ids->is_array()) {
    return InvalidArgument(field + ": expected an array of token ids, got " + DescribeJson(*ids));
  }
  DraftVocab vocab{.target_vocab_size = target_vocab_size, .token_ids = {}};
  vocab.token_ids.reserve(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        int32_t id, ReadJsonIntAs<int32_t>((*ids)[i], field + "[" + std::to_string(i) + "]"));
    vocab.token_ids.push_back(id);
  }
  DSCALE_RETURN_IF_ERROR(ValidateDraftVocabIds(vocab.token_ids, target_vocab_size, field));
  return vocab;
}

Result<std::optional<DraftVocab>> LoadDraftVocab(const std::string& drafter_dir,
                                                 int64_t target_vocab_size) {
  const std::string path = (std::filesystem::path(drafter_dir) / kDraftVocabFileName).string();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::optional<DraftVocab>();
  DSCALE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxDraftVocabFileBytes));
  DSCALE_ASSIGN_OR_RETURN(DraftVocab vocab, ParseDraftVocab(text, path, target_vocab_size));
  return std::optional<DraftVocab>(std::move(vocab));
}

Status SaveDraftVocab(const std::string& path, const DraftVocab& vocab) {
  DSCALE_RETURN_IF_ERROR(
      ValidateDraftVocabIds(vocab.token_ids, vocab.target_vocab_size, path + ": token_ids"));
  // Fields one per line, the ids on one line: readable, and small at 150K ids (about 1 MB).
  std::string text = "{\n  \"format\": \"" + std::string(kDraftVocabFormat) +
                     "\",\n  \"version\": " + std::to_string(kDraftVocabVersion) +
                     ",\n  \"target_vocab_size\": " + std::to_string(vocab.target_vocab_size) +
                     ",\n  \"token_ids\": [";
  for (size_t i = 0; i < vocab.token_ids.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(vocab.token_ids[i]);
  }
  text += "]\n}\n";
  return WriteFileAtomically(path, text.data(), text.size());
}

std::vector<int32_t> RankDraftVocab(std::span<const int64_t> counts, int64_t size,
                                    std::span<const int32_t> required) {
  const auto vocab = static_cast<int64_t>(counts.size());
  std::vector<uint8_t> chosen(static_cast<size_t>(vocab), 0);
  int64_t taken = 0;
  for (int32_t id : required) {
    if (chosen[static_cast<size_t>(id)] == 0) ++taken;
    chosen[static_cast<size_t>(id)] = 1;
  }
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Highest count first, lower id first among equal counts: the ranking is a pure function of
  // the counts.
  std::stable_sort(order.begin(), order.end(), [&counts](int32_t a, int32_t b) {
    return counts[static_cast<size_t>(a)] > counts[static_cast<size_t>(b)];
  });
  for (int32_t id : order) {
    if (taken >= size) break;
    if (chosen[static_cast<size_t>(id)] != 0) continue;
    chosen[static_cast<size_t>(id)] = 1;
    ++taken;
  }
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab; ++id) {
    if (chosen[static_cast<size_t>(id)] != 0) ids.push_back(id);
  }
  return ids;
}

Result<DraftVocabChoice> ParseDraftVocabChoice(std::string_view text) {
  if (text == "auto") return DraftVocabChoice::kAuto;
  if (text == "full") return DraftVocabChoice::kFull;
  if (text == "subset") return DraftVocabChoice::kSubset;
  return InvalidArgument("--draft-vocab: expected auto, full or subset, got \"" +
                         std::string(text) + "\"");
}

std::string_view DraftVocabChoiceName(DraftVocabChoice choice) {
  switch (choice) {
    case DraftVocabChoice::kAuto:
      return "auto";
    case DraftVocabChoice::kFull:
      return "full";
    case DraftVocabChoice::kSubset:
      break;
  }
  return "subset";
}

}  // namespace dscale
