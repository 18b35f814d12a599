#include "io/dspark_config.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "io/json_util.h"

namespace dscale {
namespace {

constexpr const char* kRank = "markov_rank";
constexpr const char* kType = "markov_head_type";
constexpr const char* kConfidence = "enable_confidence_head";
constexpr const char* kConfidenceWithMarkov = "confidence_head_with_markov";

constexpr MarkovHeadType kTypes[] = {MarkovHeadType::kVanilla, MarkovHeadType::kGated,
                                     MarkovHeadType::kRnn};

Status HeadFieldError(const std::string& path, std::string_view field, const std::string& problem) {
  return InvalidArgument(JsonFieldName(path, field) + ": " + problem);
}

// A field DeepSpec's Qwen3DSparkModel asserts is present.
Result<const nlohmann::json*> RequiredHeadField(const nlohmann::json& root, const std::string& path,
                                                const char* field, const char* why) {
  const nlohmann::json* value = JsonMember(root, field);
  if (value == nullptr) return HeadFieldError(path, field, std::string("missing (") + why + ")");
  return value;
}

Result<MarkovHeadType> ReadMarkovHeadType(const nlohmann::json& value, const std::string& path) {
  DSCALE_ASSIGN_OR_RETURN(std::string name, ReadJsonString(value, JsonFieldName(path, kType)));
  // DeepSpec's build_markov_head compares the lower-cased name.
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const MarkovHeadType type : kTypes) {
    if (name == MarkovHeadTypeName(type)) return type;
  }
  return HeadFieldError(path, kType,
                        "expected \"vanilla\", \"gated\" or \"rnn\", got " + DescribeJson(value));
}

}  // namespace

std::string_view MarkovHeadTypeName(MarkovHeadType type) {
  switch (type) {
    case MarkovHeadType::kVanilla:
      return "vanilla";
    case MarkovHeadType::kGated:
      return "gated";
    case MarkovHeadType::kRnn:
      return "rnn";
  }
  return "vanilla";
}

Result<DSparkHeadConfig> ParseDSparkHeadConfig(const nlohmann::json& root,
                                               const std::string& path) {
  DSparkHeadConfig c;
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* rank,
                          RequiredHeadField(root, path, kRank, "a rank, 0 for no Markov head"));
  DSCALE_ASSIGN_OR_RETURN(c.markov_rank, ReadJsonInt(*rank, JsonFieldName(path, kRank), 0,
                                                     std::numeric_limits<int32_t>::max()));
  if (c.has_markov_head()) {
    DSCALE_ASSIGN_OR_RETURN(
        const nlohmann::json* type,
        RequiredHeadField(root, path, kType,
                          "\"vanilla\", \"gated\" or \"rnn\" when markov_rank > 0"));
    DSCALE_ASSIGN_OR_RETURN(c.markov_head_type, ReadMarkovHeadType(*type, path));
  }
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* confidence,
                          RequiredHeadField(root, path, kConfidence, "true or false"));
  DSCALE_ASSIGN_OR_RETURN(c.confidence_head,
                          ReadJsonBool(*confidence, JsonFieldName(path, kConfidence)));
  if (!c.confidence_head) return c;
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json* with_markov,
                          RequiredHeadField(root, path, kConfidenceWithMarkov,
                                            "true or false when enable_confidence_head is true"));
  DSCALE_ASSIGN_OR_RETURN(c.confidence_with_markov,
                          ReadJsonBool(*with_markov, JsonFieldName(path, kConfidenceWithMarkov)));
  if (c.confidence_with_markov && !c.has_markov_head()) {
    return HeadFieldError(path, kConfidenceWithMarkov,
                          "true needs a Markov head, but markov_rank is 0");
  }
  return c;
}

void WriteDSparkHeadConfig(const DSparkHeadConfig& c, nlohmann::json& root) {
  root[kRank] = c.markov_rank;
  if (c.has_markov_head()) root[kType] = MarkovHeadTypeName(c.markov_head_type);
  root[kConfidence] = c.confidence_head;
  if (c.confidence_head) root[kConfidenceWithMarkov] = c.confidence_with_markov;
}

}  // namespace dscale
