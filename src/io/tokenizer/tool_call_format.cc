#include "io/tokenizer/tool_call_format.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "io/tokenizer/chat_json.h"
#include "io/tokenizer/chat_template_text.h"

namespace dscale {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::optional<OrderedJson> ParseOrdered(std::string_view text) {
  OrderedJson value = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// {"name": "NAME", "<arguments_key>": {...}}
std::optional<ChatToolCall> ParseJsonCall(std::string_view body,
                                          std::string_view arguments_key = "arguments") {
  const std::optional<OrderedJson> call = ParseOrdered(chat_text::Trim(body));
  if (!call || !call->is_object()) return std::nullopt;
  const auto name = call->find("name");
  const auto arguments = call->find(arguments_key);
  if (name == call->end() || !name->is_string() || name->get_ref<const std::string&>().empty() ||
      arguments == call->end()) {
    return std::nullopt;
  }
  std::optional<OrderedJson> object = *arguments;
  if (arguments->is_string()) object = ParseOrdered(arguments->get_ref<const std::string&>());
  if (!object || !object->is_object()) return std::nullopt;
  return ChatToolCall{.name = name->get<std::string>(), .arguments = TemplateJson(*object)};
}

// Member `key` of an object, else nullptr.
const OrderedJson* Member(const OrderedJson* object, const char* key) {
  if (object == nullptr || !object->is_object()) return nullptr;
  const auto it = object->find(key);
  return it == object->end() ? nullptr : &*it;
}

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

// A value written as text, read back as JSON by its declared type.
OrderedJson ReadParameter(std::string_view text, const ParameterType& declared) {
  if (text.starts_with('\n')) text.remove_prefix(1);
  if (text.ends_with('\n')) text.remove_suffix(1);
  if (declared.nullable && text == "null") return nullptr;
  const std::string_view type = declared.type;
  const OrderedJson as_string(std::string{text});
  if (type == "boolean") {
    std::string lower(text);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "true" || lower == "false") return lower == "true";
    return as_string;
  }
  const bool numeric = type == "integer" || type == "number";
  if (!numeric && type != "null" && type != "object" && type != "array") return as_string;
  const std::optional<OrderedJson> value = ParseOrdered(text);
  if (!value) return as_string;
  const bool fits =
      (type == "integer" && value->is_number_integer()) ||
      (type == "number" && value->is_number()) || (type == "null" && value->is_null()) ||
      (type == "object" && value->is_object()) || (type == "array" && value->is_array());
  return fits ? *value : as_string;
}

// <function=NAME> <parameter=KEY> VALUE </parameter> ... </function>
std::optional<ChatToolCall> ParseXmlCall(std::string_view body, const ToolParameterTypes& types) {
  body = chat_text::Trim(body);
  if (!body.starts_with(kFunctionOpen)) return std::nullopt;
  body.remove_prefix(kFunctionOpen.size());
  const size_t name_end = body.find('>');
  if (name_end == std::string_view::npos || name_end == 0) return std::nullopt;
  const std::string name(body.substr(0, name_end));
  body.remove_prefix(name_end + 1);
  if (const size_t end = body.find(kFunctionClose); end != std::string_view::npos) {
    if (!chat_text::Trim(body.substr(end + kFunctionClose.size())).empty()) return std::nullopt;
    body = body.substr(0, end);
  }
  OrderedJson arguments = OrderedJson::object();
  while (!chat_text::Trim(body).empty()) {
    body = chat_text::Trim(body);
    if (!body.starts_with(kParameterOpen)) return std::nullopt;
    body.remove_prefix(kParameterOpen.size());
    const size_t key_end = body.find('>');
    if (key_end == std::string_view::npos || key_end == 0) return std::nullopt;
    const std::string key(body.substr(0, key_end));
    body.remove_prefix(key_end + 1);
    const size_t close = body.find(kParameterClose);
    const size_t next = std::min(close, body.find(kParameterOpen));
    arguments[key] = ReadParameter(body.substr(0, next), types.TypeOf(name, key));
    body.remove_prefix(next == std::string_view::npos
                           ? body.size()
                           : next + (next == close ? kParameterClose.size() : 0));
  }
  return ChatToolCall{.name = name, .arguments = TemplateJson(arguments)};
}

}  // namespace

ToolParameterTypes::ToolParameterTypes(std::span<const std::string> tools) {
  for (const std::string& text : tools) {
    const std::optional<OrderedJson> tool = ParseOrdered(text);
    const OrderedJson* function = Member(tool ? &*tool : nullptr, "function");
    const OrderedJson* name = Member(function, "name");
    const OrderedJson* properties = Member(Member(function, "parameters"), "properties");
    if (name == nullptr || !name->is_string() || properties == nullptr) continue;
    auto& declared = types_[name->get<std::string>()];
    for (const auto& [key, schema] : properties->items()) {
      if (std::optional<ParameterType> type = DeclaredType(schema)) declared[key] = *type;
    }
  }
}

ParameterType ToolParameterTypes::TypeOf(const std::string& tool,
                                         const std::string& parameter) const {
  const auto t = types_.find(tool);
  if (t == types_.end()) return {};
  const auto p = t->second.find(parameter);
  return p == t->second.end() ? ParameterType{} : p->second;
}

std::optional<ParameterType> DeclaredType(const OrderedJson& schema) {
  const OrderedJson* type = Member(&schema, "type");
  if (type == nullptr) return std::nullopt;
  if (type->is_string()) return ParameterType{.type = type->get<std::string>()};
  // [T, "null"] in either order.
  if (!type->is_array() || type->size() != 2 || !(*type)[0].is_string() ||
      !(*type)[1].is_string()) {
    return std::nullopt;
  }
  const std::string a = (*type)[0], b = (*type)[1];
  if ((a == "null") == (b == "null")) return std::nullopt;
  return ParameterType{.type = a == "null" ? b : a, .nullable = true};
}

ToolCallMarkers ToolCallMarkersOf(ChatFormat format) {
  switch (format) {
    case ChatFormat::kQwen3:
    case ChatFormat::kQwen3_5:
      return ToolCallMarkers{.open = "<tool_call>", .close = "</tool_call>"};
    case ChatFormat::kLlama3:
      break;
  }
  return ToolCallMarkers{.open = {}, .close = {}};
}

std::optional<ChatToolCall> ParseToolCall(ChatFormat format, std::string_view body,
                                          const ToolParameterTypes& types) {
  switch (format) {
    case ChatFormat::kQwen3:
      return ParseJsonCall(body);
    case ChatFormat::kQwen3_5:
      return ParseXmlCall(body, types);
    case ChatFormat::kLlama3:
      return ParseJsonCall(body, "parameters");
  }
  return std::nullopt;
}

}  // namespace dscale
