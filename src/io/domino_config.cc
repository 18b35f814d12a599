#include "io/domino_config.h"

#include "io/json_util.h"

namespace dscale {
namespace {

constexpr const char* kSection = "domino_config";

std::string DominoFieldName(const std::string& path, const std::string& field) {
  return JsonFieldName(path, std::string(kSection) + "." + field);
}

Status DominoFieldError(const std::string& path, const std::string& field,
                        const std::string& problem) {
  return InvalidArgument(DominoFieldName(path, field) + ": " + problem);
}

// A positive integer field of the section, at most `limit` (keeps a corrupt config from asking
// for absurd allocations before any tensor is read), checked before it is narrowed.
Result<int64_t> ReadSize(const nlohmann::json& section, const std::string& path, const char* field,
                         int64_t limit) {
  const nlohmann::json* value = JsonMember(section, field);
  if (value == nullptr)
    return DominoFieldError(path, field, "missing (expected a positive integer)");
  return ReadJsonInt(*value, DominoFieldName(path, field), 1, limit);
}

Result<std::string> ReadHeadFile(const nlohmann::json& section, const std::string& path) {
  const auto it = section.find("head_file");
  if (it == section.end() || !it->is_string()) {
    return DominoFieldError(path, "head_file",
                            "expected a file name in the drafter folder, got " +
                                (it == section.end() ? std::string("nothing") : DescribeJson(*it)));
  }
  const std::string& name = it->get_ref<const std::string&>();
  // The head lives beside config.json: no directories, so a config cannot point elsewhere.
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return DominoFieldError(
        path, "head_file",
        "expected a plain file name in the drafter folder, got " + DescribeJson(*it));
  }
  return name;
}

}  // namespace

Result<std::optional<DominoHeadConfig>> ParseDominoHeadConfig(const nlohmann::json& root,
                                                              const std::string& path) {
  const auto it = root.find(kSection);
  if (it == root.end() || it->is_null()) return std::optional<DominoHeadConfig>();
  if (!it->is_object()) {
    return InvalidArgument(path + ": field \"" + std::string(kSection) +
                           "\": expected an object, got " + DescribeJson(*it));
  }
  constexpr int64_t kMaxWidth = int64_t{1} << 16;
  DominoHeadConfig config;
  DSCALE_ASSIGN_OR_RETURN(config.head_file, ReadHeadFile(*it, path));
  DSCALE_ASSIGN_OR_RETURN(config.gru_hidden_size,
                          ReadSize(*it, path, "gru_hidden_size", kMaxWidth));
  DSCALE_ASSIGN_OR_RETURN(config.bottleneck_size,
                          ReadSize(*it, path, "bottleneck_size", kMaxWidth));
  return std::optional<DominoHeadConfig>(std::move(config));
}

nlohmann::json DominoHeadConfigToJson(const DominoHeadConfig& config) {
  return {{"head_file", config.head_file},
          {"gru_hidden_size", config.gru_hidden_size},
          {"bottleneck_size", config.bottleneck_size}};
}

}  // namespace dscale
