#include "server/openai_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/json_util.h"
#include "io/tokenizer/chat_json.h"
#include "io/tokenizer/utf8.h"
#include "spec/logprobs.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;
using Error = std::optional<ApiError>;

std::string Got(const json& value) { return ", got " + DescribeJson(value); }

// A field name for messages: at most 64 bytes, cut on a character boundary.
std::string ShortKey(const std::string& key) {
  size_t end = std::min<size_t>(key.size(), 64);
  while (end < key.size() && end > 0 && (static_cast<unsigned char>(key[end]) & 0xc0) == 0x80) {
    --end;
  }
  return end < key.size() ? key.substr(0, end) + "..." : key;
}

// An integer as clients send one: a JSON integer, or a float without a fractional part (clients
// that serialise every number as a float send 1.0 for 1), within int64. Ranges are the caller's.
std::optional<int64_t> ApiInteger(const json& value) {
  if (std::optional<int64_t> x = JsonInt64(value)) return x;
  if (!value.is_number_float()) return std::nullopt;
  const double x = value.get<double>();
  // 2^63 is exactly representable; every double below it in magnitude converts.
  constexpr double kLimit = 9223372036854775808.0;
  if (!std::isfinite(x) || x != std::trunc(x) || x >= kLimit || x < -kLimit) return std::nullopt;
  return static_cast<int64_t>(x);
}

// A finite JSON number (integer or float; not a bool) as a double.
std::optional<double> JsonNumber(const json& value) {
  if (!value.is_number()) return std::nullopt;
  const double x = value.get<double>();
  if (!std::isfinite(x)) return std::nullopt;
  return x;
}

Error ParseModel(const json& v, const std::string& name, ApiRequest* r) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
    return BadField(name, "expected a non-empty string" + Got(v));
  }
  r->model = v.get<std::string>();
  return std::nullopt;
}

Error ParseTokenIds(const json& v, const std::string& name, ApiRequest* r) {
  r->prompt_ids.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    // 32 bits here; whether the id is in the vocabulary is the engine's check.
    const std::optional<int64_t> id = ApiInteger(v[i]);
    if (!id || *id < std::numeric_limits<int32_t>::min() ||
        *id > std::numeric_limits<int32_t>::max()) {
      return BadField(name + "[" + std::to_string(i) + "]",
                      "expected a token id (a 32-bit integer)" + Got(v[i]));
    }
    r->prompt_ids.push_back(*id);
  }
  r->prompt_is_ids = true;
  return std::nullopt;
}

Error ParsePrompt(const json& v, const std::string& name, ApiRequest* r) {
  const std::string expected = "expected a string or an array of token ids";
  if (v.is_string()) {
    r->prompt_text = v.get<std::string>();
    r->prompt_is_ids = false;
    return std::nullopt;
  }
  if (!v.is_array()) return BadField(name, expected + Got(v));
  if (v.empty()) return BadField(name, "must not be empty");
  if (v[0].is_string() || v[0].is_array()) {
    // A batch of prompts: only a batch of one is served.
    if (v.size() > 1) {
      return BadField(name, "batches of prompts are not supported; send one prompt per request");
    }
    const json& only = v[0];
    if (only.is_string()) return ParsePrompt(only, name, r);
    if (only.empty()) return BadField(name + "[0]", "must not be empty");
    return ParseTokenIds(only, name + "[0]", r);
  }
  return ParseTokenIds(v, name, r);
}

// One content value: a string, or an array of {"type": "text", "text": ...} parts.
Error ParseContent(const json& v, const std::string& name, bool may_be_null, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_null() && may_be_null) return std::nullopt;
  if (!v.is_array()) return BadField(name, "expected a string or an array of text parts" + Got(v));
  for (size_t j = 0; j < v.size(); ++j) {
    const std::string part = name + "[" + std::to_string(j) + "]";
    const json& p = v[j];
    if (!p.is_object()) return BadField(part, "expected an object" + Got(p));
    const auto type = p.find("type");
    if (type == p.end() || !type->is_string()) {
      return BadField(part + ".type", "expected \"text\"");
    }
    if (*type != "text") {
      return BadField(part + ".type", "only \"text\" parts are supported" + Got(*type));
    }
    const auto text = p.find("text");
    if (text == p.end() || !text->is_string()) {
      return BadField(part + ".text", "expected a string");
    }
    for (const auto& [key, value] : p.items()) {
      if (key != "type" && key != "text") return BadField(part + "." + key, "unrecognized field");
    }
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

bool IsNullOrEmptyArray(const json& v) { return v.is_null() || (v.is_array() && v.empty()); }

// OpenAI's rule for a function's name: what the template writes between quotes and the output's
// calls name.
bool IsFunctionName(const json& v) {
  if (!v.is_string()) return false;
  const std::string& name = v.get_ref<const std::string&>();
  if (name.empty() || name.size() > kMaxFunctionNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

const char* const kFunctionNameRule =
    "expected a function name (1 to 64 of a-z, A-Z, 0-9, _ and -)";

// An object's members other than `allowed` are errors naming them.
Error CheckMembers(const json& v, const std::string& name,
                   std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : v.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return BadField(name + "." + ShortKey(key), "unrecognized field");
    }
  }
  return std::nullopt;
}

// An assistant message's calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
// Arguments given as a string are written back as given; an object's text is filled in by
// RenderInOrder (the template writes its members in the order sent).
Error ParseMessageToolCalls(const json& v, const std::string& name, ChatMessage* m) {
  if (!v.is_array()) return BadField(name, "expected an array of tool calls" + Got(v));
  for (size_t j = 0; j < v.size(); ++j) {
    const std::string where = name + "[" + std::to_string(j) + "]";
    const json& call = v[j];
    if (!call.is_object()) return BadField(where, "expected an object" + Got(call));
    if (Error e = CheckMembers(call, where, {"id", "type", "function"})) return e;
    if (call.contains("type") && call["type"] != "function") {
      return BadField(where + ".type", "expected \"function\"" + Got(call["type"]));
    }
    if (call.contains("id") && !call["id"].is_string()) {
      return BadField(where + ".id", "expected a string" + Got(call["id"]));
    }
    const auto function = call.find("function");
    if (function == call.end() || !function->is_object()) {
      return BadField(where + ".function", "expected an object with name and arguments");
    }
    if (Error e = CheckMembers(*function, where + ".function", {"name", "arguments"})) return e;
    const auto fname = function->find("name");
    if (fname == function->end() || !IsFunctionName(*fname)) {
      return BadField(where + ".function.name",
                      kFunctionNameRule + (fname == function->end() ? "" : Got(*fname)));
    }
    const auto arguments = function->find("arguments");
    if (arguments == function->end() || (!arguments->is_string() && !arguments->is_object())) {
      return BadField(where + ".function.arguments",
                      "expected the arguments' JSON text or object" +
                          (arguments == function->end() ? "" : Got(*arguments)));
    }
    m->tool_calls.push_back(
        {.name = fname->get<std::string>(),
         .arguments = arguments->is_string() ? arguments->get<std::string>() : std::string()});
  }
  return std::nullopt;
}

// The fields of one message other than role and content.
Error CheckMessageField(const std::string& key, const json& value, const std::string& where,
                        ChatMessage* m) {
  const std::string name = where + "." + key;
  if (key == "name" || key == "tool_call_id") {
    if (!value.is_string()) return BadField(name, "expected a string" + Got(value));
    return std::nullopt;
  }
  if (key == "reasoning_content") {
    if (value.is_null()) return std::nullopt;
    if (!value.is_string()) return BadField(name, "expected a string" + Got(value));
    m->reasoning_content = value.get<std::string>();
    return std::nullopt;
  }
  if (key == "refusal") {
    if (!value.is_null() && !value.is_string()) return BadField(name, "expected a string");
    return std::nullopt;
  }
  if (key == "tool_calls") {
    if (IsNullOrEmptyArray(value)) return std::nullopt;
    if (m->role != "assistant") return BadField(name, "only assistant messages make tool calls");
    return ParseMessageToolCalls(value, name, m);
  }
  return BadField(name, "unrecognized field");
}

Error ParseMessage(const json& v, const std::string& where, ChatMessage* m) {
  if (!v.is_object()) return BadField(where, "expected an object" + Got(v));
  const auto role = v.find("role");
  if (role == v.end()) return BadField(where + ".role", "is required");
  static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  bool known = false;
  for (const char* r : kRoles) known = known || (role->is_string() && *role == r);
  if (!known) {
    return BadField(where + ".role",
                    "expected system, developer, user, assistant or tool" + Got(*role));
  }
  m->role = *role == "developer" ? "system" : role->get<std::string>();
  const auto content = v.find("content");
  if (content == v.end() && m->role != "assistant") {
    return BadField(where + ".content", "is required");
  }
  if (content != v.end()) {
    if (Error e = ParseContent(*content, where + ".content", m->role == "assistant", &m->content)) {
      return e;
    }
  }
  for (const auto& [key, value] : v.items()) {
    if (key == "role" || key == "content") continue;
    if (Error e = CheckMessageField(key, value, where, m)) return e;
  }
  return std::nullopt;
}

Error ParseMessages(const json& v, const std::string& name, ApiRequest* r) {
  if (!v.is_array()) return BadField(name, "expected an array of messages" + Got(v));
  if (v.empty()) return BadField(name, "expected at least one message");
  r->messages.assign(v.size(), {});
  for (size_t i = 0; i < v.size(); ++i) {
    if (Error e = ParseMessage(v[i], name + "[" + std::to_string(i) + "]", &r->messages[i])) {
      return e;
    }
  }
  return std::nullopt;
}

Error ParseMaxTokens(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<int64_t> x = ApiInteger(v);
  if (!x && v.is_number_unsigned()) return BadField(name, "must be at most 2147483647" + Got(v));
  if (!x) return BadField(name, "expected an integer" + Got(v));
  if (*x < 1) return BadField(name, "must be at least 1" + Got(v));
  if (*x > std::numeric_limits<int32_t>::max()) {
    return BadField(name, "must be at most 2147483647" + Got(v));
  }
  r->max_tokens = *x;
  return std::nullopt;
}

Error ParseTemperature(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<double> x = JsonNumber(v);
  if (!x || *x < 0.0 || *x > kMaxTemperature) {
    return BadField(name, "expected a number in [0, 2]" + Got(v));
  }
  r->temperature = static_cast<float>(*x);
  return std::nullopt;
}

Error ParseTopP(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<double> x = JsonNumber(v);
  if (!x || !(*x > 0.0) || *x > 1.0) return BadField(name, "expected a number in (0, 1]" + Got(v));
  r->top_p = static_cast<float>(*x);
  return std::nullopt;
}

Error ParseTopK(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<int64_t> x = ApiInteger(v);
  if (!x || *x < -1 || *x > std::numeric_limits<int32_t>::max()) {
    return BadField(name, "expected an integer >= -1 (-1 or 0: off)" + Got(v));
  }
  r->top_k = *x < 0 ? 0 : static_cast<int32_t>(*x);
  return std::nullopt;
}

Error ParseSeed(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (v.is_number_unsigned()) {
    r->seed = v.get<uint64_t>();
  } else if (const std::optional<int64_t> x = ApiInteger(v)) {
    r->seed = static_cast<uint64_t>(*x);
  } else {
    return BadField(name, "expected an integer" + Got(v));
  }
  return std::nullopt;
}

Error ParseStop(const json& v, const std::string& name, ApiRequest* r) {
  r->stop.clear();
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().empty()) return BadField(name, "must not be empty");
    r->stop.push_back(v.get<std::string>());
    return std::nullopt;
  }
  if (!v.is_array()) return BadField(name, "expected a string or an array of strings" + Got(v));
  if (v.size() > kMaxStopStrings) return BadField(name, "at most 4 stop strings are supported");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = name + "[" + std::to_string(i) + "]";
    if (!v[i].is_string()) return BadField(item, "expected a string" + Got(v[i]));
    if (v[i].get_ref<const std::string&>().empty()) return BadField(item, "must not be empty");
    r->stop.push_back(v[i].get<std::string>());
  }
  return std::nullopt;
}

Error ParseN(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<int64_t> x = ApiInteger(v);
  if (!x || *x < 1 || *x > kMaxChoices) {
    return BadField(name, "expected an integer from 1 to " + std::to_string(kMaxChoices) + Got(v));
  }
  r->n = static_cast<int32_t>(*x);
  return std::nullopt;
}

Error ParseStream(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return BadField(name, "expected a boolean" + Got(v));
  r->stream = v.get<bool>();
  return std::nullopt;
}

Error ParseStreamOptions(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) return BadField(name, "expected an object" + Got(v));
  for (const auto& [key, value] : v.items()) {
    if (key != "include_usage") return BadField(name + "." + key, "unrecognized field");
    if (!value.is_boolean()) {
      return BadField(name + ".include_usage", "expected a boolean" + Got(value));
    }
    r->include_usage = value.get<bool>();
  }
  return std::nullopt;
}

Error ParseIgnoreEos(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return BadField(name, "expected a boolean" + Got(v));
  r->ignore_eos = v.get<bool>();
  return std::nullopt;
}

Error ParseString(const json& v, const std::string& name, ApiRequest*) {
  if (v.is_null() || v.is_string()) return std::nullopt;
  return BadField(name, "expected a string" + Got(v));
}

Error ParseObject(const json& v, const std::string& name, ApiRequest*) {
  if (v.is_null() || v.is_object()) return std::nullopt;
  return BadField(name, "expected an object" + Got(v));
}

Error ParseBool(const json& v, const std::string& name, ApiRequest*) {
  if (v.is_null() || v.is_boolean()) return std::nullopt;
  return BadField(name, "expected a boolean" + Got(v));
}

Error Unsupported(const json& v, const std::string& name, const std::string& what) {
  return BadField(name, "is not supported (only " + what + ")" + Got(v));
}

// A number in [lo, hi] into *out (null: left as it is).
template <typename Out>
Error ParseNumberIn(const json& v, const std::string& name, double lo, double hi, Out* out) {
  if (v.is_null()) return std::nullopt;
  const std::optional<double> x = JsonNumber(v);
  if (!x || *x < lo || *x > hi) {
    // The bounds are whole numbers (the ranges of OpenAI's fields).
    return BadField(name, "expected a number from " + std::to_string(std::lround(lo)) + " to " +
                              std::to_string(std::lround(hi)) + Got(v));
  }
  *out = static_cast<float>(*x);
  return std::nullopt;
}

Error ParsePresencePenalty(const json& v, const std::string& name, ApiRequest* r) {
  return ParseNumberIn(v, name, -kMaxPenalty, kMaxPenalty, &r->rules.presence_penalty);
}

Error ParseFrequencyPenalty(const json& v, const std::string& name, ApiRequest* r) {
  return ParseNumberIn(v, name, -kMaxPenalty, kMaxPenalty, &r->rules.frequency_penalty);
}

Error ParseRepetitionPenalty(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<double> x = JsonNumber(v);
  if (!x || *x < kMinRepetitionPenalty || *x > kMaxRepetitionPenalty) {
    return BadField(name, "expected a number from 0.01 to 100 (1: off)" + Got(v));
  }
  r->repetition_penalty = static_cast<float>(*x);
  return std::nullopt;
}

Error ParseMinTokens(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<int64_t> x = ApiInteger(v);
  // At most max_tokens: the engine's check, which knows the max_tokens default.
  if (!x || *x < 0 || *x > std::numeric_limits<int32_t>::max()) {
    return BadField(name, "expected an integer >= 0" + Got(v));
  }
  r->rules.min_tokens = static_cast<int32_t>(*x);
  return std::nullopt;
}

Error ParseStopTokenIds(const json& v, const std::string& name, ApiRequest* r) {
  r->stop_token_ids.clear();
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return BadField(name, "expected an array of token ids" + Got(v));
  if (v.size() > kMaxStopTokenIds) {
    return BadField(name, "at most " + std::to_string(kMaxStopTokenIds) + " ids, got " +
                              std::to_string(v.size()));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    // An id the model never generates never ends the output: no vocabulary check needed.
    const std::optional<int64_t> id = ApiInteger(v[i]);
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      return BadField(name + "[" + std::to_string(i) + "]",
                      "expected a token id (a non-negative 32-bit integer)" + Got(v[i]));
    }
    r->stop_token_ids.push_back(*id);
  }
  return std::nullopt;
}

Error ParseMinP(const json& v, const std::string& name, ApiRequest* r) {
  return ParseNumberIn(v, name, 0.0, 1.0, &r->min_p);
}

// A token id as logit_bias keys it: decimal digits only.
std::optional<int32_t> TokenKey(const std::string& key) {
  int32_t id = 0;
  const char* end = key.data() + key.size();
  const auto [stop, error] = std::from_chars(key.data(), end, id);
  if (key.empty() || key[0] == '-' || error != std::errc() || stop != end) return std::nullopt;
  return id;
}

// {"token id": bias, ...}; whether each id is in the vocabulary is the engine's check.
Error ParseLogitBias(const json& v, const std::string& name, ApiRequest* r) {
  r->rules.logit_bias.clear();
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) return BadField(name, "expected an object of token ids to biases" + Got(v));
  if (v.size() > static_cast<size_t>(kMaxLogitBiasTokens)) {
    return BadField(name, "at most " + std::to_string(kMaxLogitBiasTokens) + " tokens, got " +
                              std::to_string(v.size()));
  }
  for (const auto& [key, value] : v.items()) {
    const std::string field = name + "." + ShortKey(key);
    const std::optional<int32_t> token = TokenKey(key);
    if (!token)
      return BadField(field, "expected a token id (a non-negative 32-bit integer) as key");
    float bias = 0.0f;
    if (value.is_null()) return BadField(field, "expected a number from -100 to 100, got null");
    if (Error e = ParseNumberIn(value, field, -kMaxLogitBias, kMaxLogitBias, &bias)) return e;
    r->rules.logit_bias.emplace_back(*token, bias);
  }
  std::ranges::sort(r->rules.logit_bias);
  for (size_t i = 1; i < r->rules.logit_bias.size(); ++i) {
    if (r->rules.logit_bias[i].first == r->rules.logit_bias[i - 1].first) {
      return BadField(name,
                      "token " + std::to_string(r->rules.logit_bias[i].first) + " is keyed twice");
    }
  }
  return std::nullopt;
}

// 0 .. kMaxTopLogprobs into *out.
Error ParseTopCount(const json& v, const std::string& name, int32_t* out) {
  const std::optional<int64_t> x = ApiInteger(v);
  if (!x || *x < 0 || *x > kMaxTopLogprobs) {
    return BadField(name,
                    "expected an integer from 0 to " + std::to_string(kMaxTopLogprobs) + Got(v));
  }
  *out = static_cast<int32_t>(*x);
  return std::nullopt;
}

// /v1/completions: how many top tokens to report with each token's log-probability.
Error ParseCompletionLogprobs(const json& v, const std::string& name, ApiRequest* r) {
  r->logprobs = false;
  if (v.is_null() || v == false) return std::nullopt;
  r->logprobs = true;
  return ParseTopCount(v, name, &r->top_logprobs);
}

// /v1/chat/completions: whether to report log-probabilities (top_logprobs says how many more).
Error ParseChatLogprobs(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return BadField(name, "expected a boolean" + Got(v));
  r->logprobs = v.get<bool>();
  return std::nullopt;
}

Error ParseTopLogprobs(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  return ParseTopCount(v, name, &r->top_logprobs);
}

Error ParseEcho(const json& v, const std::string& name, ApiRequest*) {
  if (v.is_null() || v == false) return std::nullopt;
  return Unsupported(v, name, "false");
}

Error ParseBestOf(const json& v, const std::string& name, ApiRequest*) {
  if (v.is_null() || ApiInteger(v) == 1) return std::nullopt;
  return Unsupported(v, name, "1");
}

Error ParseSuffix(const json& v, const std::string& name, ApiRequest*) {
  if (v.is_null() || v == "") return std::nullopt;
  return Unsupported(v, name, "an empty suffix");
}

// [{"type": "function", "function": {"name", "description", "parameters", "strict"}}]. Each
// definition's text is filled in by RenderInOrder.
Error ParseTools(const json& v, const std::string& name, ApiRequest* r) {
  r->tools.clear();
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return BadField(name, "expected an array of tools" + Got(v));
  if (v.size() > kMaxTools) {
    return BadField(name, "at most " + std::to_string(kMaxTools) + " tools" + Got(v));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = name + "[" + std::to_string(i) + "]";
    const json& tool = v[i];
    if (!tool.is_object()) return BadField(where, "expected an object" + Got(tool));
    if (Error e = CheckMembers(tool, where, {"type", "function"})) return e;
    if (!tool.contains("type") || tool["type"] != "function") {
      return BadField(where + ".type", "expected \"function\"");
    }
    const auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) {
      return BadField(where + ".function", "expected an object with the function's name");
    }
    const std::string f = where + ".function";
    if (Error e = CheckMembers(*function, f, {"name", "description", "parameters", "strict"})) {
      return e;
    }
    if (!function->contains("name") || !IsFunctionName((*function)["name"])) {
      return BadField(f + ".name", kFunctionNameRule);
    }
    const json* description = JsonMember(*function, "description");
    if (description && !description->is_string()) {
      return BadField(f + ".description", "expected a string" + Got(*description));
    }
    const json* parameters = JsonMember(*function, "parameters");
    if (parameters && !parameters->is_object()) {
      return BadField(f + ".parameters", "expected a JSON Schema object" + Got(*parameters));
    }
    const json* strict = JsonMember(*function, "strict");
    if (strict && !strict->is_boolean()) {
      return BadField(f + ".strict", "expected a boolean" + Got(*strict));
    }
    r->tools.emplace_back();
  }
  return std::nullopt;
}

// "auto" (the default), "none", "required" or {"type": "function", "function": {"name"}}
// (server/tool_choice.h); the forced ones are checked against the tools by CompileSchemas.
Error ParseToolChoice(const json& v, const std::string& name, ApiRequest* r) {
  r->tool_choice = ToolChoice::kAuto;
  r->tool_choice_function.clear();
  if (v.is_null() || v == "auto") return std::nullopt;
  if (v == "none" || v == "required") {
    r->tool_choice = v == "none" ? ToolChoice::kNone : ToolChoice::kRequired;
    return std::nullopt;
  }
  constexpr const char* kExpected =
      R"(expected "auto", "none", "required" or {"type": "function", "function": {"name": ...}})";
  if (!v.is_object()) return BadField(name, kExpected + Got(v));
  if (Error e = CheckMembers(v, name, {"type", "function"})) return e;
  if (!v.contains("type") || v["type"] != "function") {
    return BadField(name + ".type", "expected \"function\"");
  }
  const auto function = v.find("function");
  if (function == v.end() || !function->is_object()) {
    return BadField(name + ".function", "expected an object with a name");
  }
  if (Error e = CheckMembers(*function, name + ".function", {"name"})) return e;
  const auto function_name = function->find("name");
  if (function_name == function->end() || !function_name->is_string()) {
    return BadField(name + ".function.name", "expected a string");
  }
  r->tool_choice = ToolChoice::kFunction;
  r->tool_choice_function = function_name->get<std::string>();
  return std::nullopt;
}

// The tools' definitions and the object arguments of the history's tool calls, as the template
// writes them: from the body parsed again keeping members in the order sent.
// (Both parses keep the last of a key given twice, so the shapes match those already checked;
// every step still checks, reading nothing that is not there.)
void RenderInOrder(std::string_view body, ApiRequest* r) {
  using Ordered = nlohmann::ordered_json;
  const Ordered ordered = Ordered::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto member = [](const Ordered& object, const char* key) -> const Ordered* {
    if (!object.is_object()) return nullptr;
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  };
  const Ordered* tools = member(ordered, "tools");
  if (tools != nullptr && tools->is_array() && tools->size() == r->tools.size()) {
    for (size_t i = 0; i < r->tools.size(); ++i) r->tools[i] = TemplateJson((*tools)[i]);
  }
  const Ordered* messages = member(ordered, "messages");
  if (messages == nullptr || !messages->is_array() || messages->size() != r->messages.size()) {
    return;
  }
  for (size_t i = 0; i < r->messages.size(); ++i) {
    std::vector<ChatToolCall>& calls = r->messages[i].tool_calls;
    const Ordered* sent = member((*messages)[i], "tool_calls");
    if (sent == nullptr || !sent->is_array() || sent->size() != calls.size()) continue;
    for (size_t j = 0; j < calls.size(); ++j) {
      const Ordered* arguments = member((*sent)[j], "function");
      arguments = arguments == nullptr ? nullptr : member(*arguments, "arguments");
      if (arguments != nullptr && arguments->is_object())
        calls[j].arguments = TemplateJson(*arguments);
    }
  }
}

bool NeedsRenderInOrder(const ApiRequest& r) {
  if (!r.tools.empty()) return true;
  return std::any_of(r.messages.begin(), r.messages.end(),
                     [](const ChatMessage& m) { return !m.tool_calls.empty(); });
}

// {"type": "text"} (the default), {"type": "json_object"} (JSON mode: any JSON object) or
// {"type": "json_schema", "json_schema": {"name", "description", "schema", "strict"}} (the output
// held to the schema, spec/json_schema.h; compiled by CompileSchemas from the body read
// again in order, as its properties are written in the order the schema lists them).
Error ParseResponseFormat(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (r->structured_outputs_sent) return BadField(name, "is not allowed beside structured_outputs");
  if (!v.is_object()) return BadField(name, "expected an object with a type" + Got(v));
  const auto type = v.find("type");
  constexpr const char* kTypes = R"(expected "text", "json_object" or "json_schema")";
  if (type == v.end() || !type->is_string()) return BadField(name + ".type", kTypes);
  if (*type != "text" && *type != "json_object" && *type != "json_schema") {
    return BadField(name + ".type", kTypes + Got(*type));
  }
  if (*type != "json_schema") {
    if (Error e = CheckMembers(v, name, {"type"})) return e;
    if (*type == "json_object") r->rules.json_schema = JsonSchema::AnyObject();
    return std::nullopt;
  }
  if (Error e = CheckMembers(v, name, {"type", "json_schema"})) return e;
  const std::string field = name + ".json_schema";
  const auto spec = v.find("json_schema");
  if (spec == v.end() || !spec->is_object()) {
    return BadField(field, "expected an object with a name and a schema" +
                               (spec == v.end() ? std::string() : Got(*spec)));
  }
  if (Error e = CheckMembers(*spec, field, {"name", "description", "schema", "strict"})) return e;
  for (const char* text : {"name", "description"}) {
    const auto it = spec->find(text);
    if (it != spec->end() && !it->is_string()) {
      return BadField(field + "." + text, "expected a string" + Got(*it));
    }
  }
  if (const auto strict = spec->find("strict");
      strict != spec->end() && !strict->is_null() && !strict->is_boolean()) {
    return BadField(field + ".strict", "expected a boolean" + Got(*strict));
  }
  if (const auto schema = spec->find("schema");
      schema != spec->end() && !schema->is_object() && !schema->is_boolean()) {
    return BadField(field + ".schema", "expected a JSON Schema object" + Got(*schema));
  }
  r->json_schema_sent = true;
  r->schema_field = field + ".schema";
  return std::nullopt;
}

// vLLM's {"json": schema}, {"regex": "..."} (the whole output matches it) or {"choice": [...]}
// (the output is one of them), one of the three.
Error ParseStructuredOutputs(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (r->rules.json_schema != nullptr || r->json_schema_sent) {
    return BadField(name, "is not allowed beside response_format");
  }
  constexpr const char* kOne = "expected an object with one of json, regex and choice";
  if (!v.is_object() || v.size() != 1) return BadField(name, kOne + Got(v));
  const std::string key = v.begin().key();
  const json& value = v.begin().value();
  const std::string field = name + "." + key;
  r->structured_outputs_sent = true;
  if (key == "json") {
    if (!value.is_object() && !value.is_boolean()) {
      return BadField(field, "expected a JSON Schema object" + Got(value));
    }
    r->json_schema_sent = true;
    r->schema_field = field;
    return std::nullopt;
  }
  std::string regex;
  if (key == "regex") {
    if (!value.is_string()) return BadField(field, "expected a regular expression" + Got(value));
    regex = value.get<std::string>();
  } else if (key == "choice") {
    constexpr size_t kMostChoices = 1024;
    if (!value.is_array() || value.empty() || value.size() > kMostChoices ||
        !std::all_of(value.begin(), value.end(), [](const json& c) { return c.is_string(); })) {
      return BadField(field, "expected a list of 1 to " + std::to_string(kMostChoices) +
                                 " strings" + Got(value));
    }
    regex = JsonSchema::ChoicesPattern(value.get<std::vector<std::string>>());
  } else {
    return BadField(field, "is not supported; structured_outputs takes json, regex or choice");
  }
  const Result<std::shared_ptr<const JsonSchema>> compiled = JsonSchema::Pattern(regex, field);
  if (!compiled.ok()) return SchemaRefusal(compiled.status().message());
  r->rules.json_schema = *compiled;
  return std::nullopt;
}

// The schemas an answer is held to, compiled from the body parsed keeping members in order (a
// schema's properties are written in the order it lists them): response_format.json_schema's
// (absent: any object; ParseResponseFormat has checked the shapes around it), or a forced
// call's (server/tool_choice.h), which leaves no room for a response format.
Error CompileSchemas(std::string_view body, ApiRequest* r) {
  using Ordered = nlohmann::ordered_json;
  const Ordered ordered = Ordered::parse(body, nullptr, /*allow_exceptions=*/false);
  if (r->tool_choice == ToolChoice::kRequired || r->tool_choice == ToolChoice::kFunction) {
    if (r->rules.json_schema != nullptr || r->json_schema_sent) {
      return BadField(r->structured_outputs_sent ? "structured_outputs" : "response_format",
                      "is not allowed with tool_choice \"required\" or a named function: the "
                      "answer is the calls");
    }
    const auto tools = ordered.find("tools");
    return ForcedCallSchema(tools == ordered.end() ? Ordered() : *tools, r->tool_choice,
                            r->tool_choice_function, r->parallel_tool_calls, &r->rules.json_schema);
  }
  if (!r->json_schema_sent) return std::nullopt;  // a pattern, compiled already
  // The schema at schema_field ("a.b.c"), absent: any object.
  const Ordered* schema = &ordered;
  for (size_t from = 0; schema != nullptr && from <= r->schema_field.size();) {
    const size_t dot = std::min(r->schema_field.find('.', from), r->schema_field.size());
    const auto it = schema->find(r->schema_field.substr(from, dot - from));
    schema = it == schema->end() ? nullptr : &*it;
    from = dot + 1;
  }
  const Result<std::shared_ptr<const JsonSchema>> compiled =
      JsonSchema::Compile(schema == nullptr ? Ordered::object() : *schema, r->schema_field);
  if (!compiled.ok()) return SchemaRefusal(compiled.status().message());
  r->rules.json_schema = *compiled;
  return std::nullopt;
}

// The chat template's arguments, as vLLM and SGLang take them: enable_thinking only (dscale's
// chat formats are code, not templates that read arbitrary arguments).
Error ParseChatTemplateKwargs(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) return BadField(name, "expected an object" + Got(v));
  for (const auto& [key, value] : v.items()) {
    if (key != "enable_thinking") {
      return BadField(name + "." + key, "is not supported; the only argument is enable_thinking");
    }
    if (!value.is_boolean()) return BadField(name + "." + key, "expected a boolean" + Got(value));
    r->enable_thinking = value.get<bool>();
  }
  return std::nullopt;
}

// OpenAI's reasoning_effort: the chat formats' thinking is on or off, so on for any effort but
// "none".
Error ParseReasoningEffort(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
  if (!v.is_string() || std::none_of(std::begin(kEfforts), std::end(kEfforts),
                                     [&](const char* effort) { return v == effort; })) {
    return BadField(name,
                    R"(expected "none", "minimal", "low", "medium", "high" or "xhigh")" + Got(v));
  }
  r->enable_thinking = v != "none";
  return std::nullopt;
}

Error ParseParallelToolCalls(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return BadField(name, "expected a boolean" + Got(v));
  r->parallel_tool_calls = v.get<bool>();
  return std::nullopt;
}

// vLLM's: the output tokens the reasoning block may hold, with thinking on.
Error ParseThinkingTokenBudget(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  const std::optional<int64_t> budget = ApiInteger(v);
  if (!budget || *budget < 0 || *budget > std::numeric_limits<int32_t>::max()) {
    return BadField(name, "expected an integer of 0 or more" + Got(v));
  }
  r->thinking_token_budget = static_cast<int32_t>(*budget);
  return std::nullopt;
}

// SGLang's: false keeps the reasoning block in the content.
Error ParseSeparateReasoning(const json& v, const std::string& name, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return BadField(name, "expected a boolean" + Got(v));
  r->separate_reasoning = v.get<bool>();
  return std::nullopt;
}

enum EndpointMask : unsigned { kCompletionsOnly = 1, kChatOnly = 2, kBoth = 3 };

struct FieldRule {
  const char* name;
  unsigned endpoints;
  Error (*parse)(const json& value, const std::string& name, ApiRequest* request);
};

constexpr FieldRule kFields[] = {
    {"model", kBoth, ParseModel},
    {"prompt", kCompletionsOnly, ParsePrompt},
    {"messages", kChatOnly, ParseMessages},
    {"max_tokens", kBoth, ParseMaxTokens},
    {"max_completion_tokens", kChatOnly, ParseMaxTokens},
    {"temperature", kBoth, ParseTemperature},
    {"top_p", kBoth, ParseTopP},
    {"top_k", kBoth, ParseTopK},
    {"seed", kBoth, ParseSeed},
    {"stop", kBoth, ParseStop},
    {"n", kBoth, ParseN},
    {"stream", kBoth, ParseStream},
    {"stream_options", kBoth, ParseStreamOptions},
    {"ignore_eos", kBoth, ParseIgnoreEos},
    {"user", kBoth, ParseString},
    {"prompt_cache_key", kChatOnly, ParseString},
    {"safety_identifier", kChatOnly, ParseString},
    {"service_tier", kChatOnly, ParseString},
    {"metadata", kBoth, ParseObject},
    {"store", kBoth, ParseBool},
    {"min_p", kBoth, ParseMinP},
    {"min_tokens", kBoth, ParseMinTokens},
    {"stop_token_ids", kBoth, ParseStopTokenIds},
    {"presence_penalty", kBoth, ParsePresencePenalty},
    {"frequency_penalty", kBoth, ParseFrequencyPenalty},
    {"repetition_penalty", kBoth, ParseRepetitionPenalty},
    {"logit_bias", kBoth, ParseLogitBias},
    {"logprobs", kCompletionsOnly, ParseCompletionLogprobs},
    {"logprobs", kChatOnly, ParseChatLogprobs},
    {"echo", kCompletionsOnly, ParseEcho},
    {"best_of", kCompletionsOnly, ParseBestOf},
    {"suffix", kCompletionsOnly, ParseSuffix},
    {"top_logprobs", kChatOnly, ParseTopLogprobs},
    {"tools", kChatOnly, ParseTools},
    {"tool_choice", kChatOnly, ParseToolChoice},
    {"parallel_tool_calls", kChatOnly, ParseParallelToolCalls},
    {"response_format", kBoth, ParseResponseFormat},
    {"structured_outputs", kBoth, ParseStructuredOutputs},
    {"chat_template_kwargs", kChatOnly, ParseChatTemplateKwargs},
    {"reasoning_effort", kChatOnly, ParseReasoningEffort},
    {"separate_reasoning", kChatOnly, ParseSeparateReasoning},
    {"thinking_token_budget", kChatOnly, ParseThinkingTokenBudget},
};

const FieldRule* FindRule(const std::string& key, Endpoint endpoint) {
  const unsigned mask = endpoint == Endpoint::kCompletions ? kCompletionsOnly : kChatOnly;
  for (const FieldRule& rule : kFields) {
    if (key == rule.name && (rule.endpoints & mask) != 0) return &rule;
  }
  return nullptr;
}

Error CheckRequired(const json& body, Endpoint endpoint, const ApiRequest& r) {
  if (!body.contains("model")) return BadField("model", "is required");
  const char* input = endpoint == Endpoint::kCompletions ? "prompt" : "messages";
  if (!body.contains(input)) return BadField(input, "is required");
  if (r.top_logprobs > 0 && !r.logprobs) {
    return BadField("top_logprobs", "is only allowed when logprobs is true");
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null() && !r.stream) {
    return BadField("stream_options", "is only allowed when stream is true");
  }
  // Both ask for thinking on or off; they may not disagree.
  const json* effort = JsonMember(body, "reasoning_effort");
  const json* kwargs = JsonMember(body, "chat_template_kwargs");
  const json* thinking = kwargs == nullptr ? nullptr : JsonMember(*kwargs, "enable_thinking");
  if (effort != nullptr && thinking != nullptr && (*effort != "none") != *thinking) {
    return BadField("reasoning_effort",
                    "turns thinking " + std::string(*effort == "none" ? "off" : "on") +
                        " where chat_template_kwargs.enable_thinking turns it " +
                        (*thinking == true ? "on" : "off"));
  }
  return std::nullopt;
}

// Decoding: "application/json; charset=utf-8" → "application/json".
std::string MediaType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  std::string lower(media);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

}  // namespace

std::optional<ApiError> CheckContentType(std::string_view content_type) {
  if (MediaType(content_type) == "application/json") return std::nullopt;
  return ApiError{.status = 415,
                  .message = "Content-Type must be application/json, got \"" +
                             std::string(content_type.substr(0, 64)) + "\""};
}

int JsonDepth(std::string_view body, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::optional<ApiError> CheckBodyBytes(std::string_view body) {
  if (body.empty()) return BadRequest("the request body is empty; expected a JSON object");
  if (const size_t bad = utf8::FindInvalid(body); bad != utf8::kAllValid) {
    return BadRequest("the request body is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  if (JsonDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return BadRequest("the request body nests arrays and objects deeper than " +
                      std::to_string(kMaxJsonDepth) + " levels");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseApiRequest(Endpoint endpoint, std::string_view body, ApiRequest* out) {
  *out = ApiRequest{.endpoint = endpoint};
  if (auto e = CheckBodyBytes(body)) return e;
  const std::optional<json> parsed = ParseJson(body);
  if (!parsed) return BadRequest("the request body is not valid JSON");
  if (!parsed->is_object()) {
    return BadRequest("the request body must be a JSON object" + Got(*parsed));
  }
  for (const auto& [key, value] : parsed->items()) {
    const FieldRule* rule = FindRule(key, endpoint);
    if (rule == nullptr) return BadField(ShortKey(key), "unrecognized request argument");
    if (Error e = rule->parse(value, key, out)) return e;
  }
  if (Error e = CheckRequired(*parsed, endpoint, *out)) return e;
  if (NeedsRenderInOrder(*out)) RenderInOrder(body, out);
  if (out->json_schema_sent || out->structured_outputs_sent ||
      out->tool_choice == ToolChoice::kRequired || out->tool_choice == ToolChoice::kFunction) {
    if (Error e = CompileSchemas(body, out)) return e;
  }
  return std::nullopt;
}

}  // namespace dscale::server
