#include "server/tool_choice.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "io/tokenizer/tool_call_format.h"

namespace dscale::server {
namespace {

using Ordered = nlohmann::ordered_json;

// A schema's references moved under `prefix` (a JSON pointer), where it is placed inside another.
void MoveReferences(Ordered* schema, const std::string& prefix) {
  if (schema->is_array()) {
    for (Ordered& item : *schema) MoveReferences(&item, prefix);
    return;
  }
  if (!schema->is_object()) return;
  for (auto& [key, value] : schema->items()) {
    if (key == "$ref" && value.is_string() && value.get<std::string>().starts_with("#")) {
      value = "#" + prefix + value.get<std::string>().substr(1);
    } else {
      MoveReferences(&value, prefix);
    }
  }
}

std::optional<ApiError> CompileAs(const Ordered& schema, const std::string& field,
                                  std::shared_ptr<const JsonSchema>* out) {
  Result<std::shared_ptr<const JsonSchema>> compiled = JsonSchema::Compile(schema, field);
  if (!compiled.ok()) return SchemaRefusal(compiled.status().message());
  *out = std::move(*compiled);
  return std::nullopt;
}

// The schema of a function's arguments, `parameters` as given (any object where they admit any
// value or are absent, as at the top), checked to compile alone so that a refusal names them;
// the compiled schema in `*alone`.
std::optional<ApiError> ArgumentsSchema(const Ordered& function, const std::string& where,
                                        Ordered* arguments,
                                        std::shared_ptr<const JsonSchema>* alone) {
  const auto given = function.find("parameters");
  *arguments = given == function.end() || JsonSchema::AdmitsAnyValue(*given)
                   ? Ordered{{"type", "object"}}
                   : *given;
  return CompileAs(*arguments, where + ".parameters", alone);
}

// One call of a function: {"name": its name, <key>: its arguments}, the union's alternative
// `index` at `union_pointer` (its references moved there).
Ordered CallAlternative(const std::string& name, const std::string& key, Ordered arguments,
                        const std::string& union_pointer, size_t index) {
  MoveReferences(&arguments, union_pointer + "/" + std::to_string(index) + "/properties/" + key);
  return {{"type", "object"},
          {"properties", {{"name", {{"const", name}}}, {key, std::move(arguments)}}},
          {"required", Ordered::array({"name", key})}};
}

// Qwen3.5's calls write each argument as text that the chat format's parser reads back by the
// type the tool declares for it (tool_call_format.h): a strict tool's arguments can be held only
// where each declares one type (or one and "null"), and a string one is not held to a length or
// pattern.
std::optional<ApiError> CheckXmlArguments(const Ordered& parameters, const JsonSchema& compiled,
                                          const std::string& where) {
  const auto properties = parameters.find("properties");
  if (properties == parameters.end() || !properties->is_object()) return std::nullopt;
  static constexpr std::string_view kTypes[] = {"string", "integer", "number", "boolean",
                                                "null",   "object",  "array"};
  const JsonSchemaNode& object = compiled.node(compiled.root());
  for (const auto& [key, schema] : properties->items()) {
    const std::string field = where + ".properties." + key;
    const std::optional<ParameterType> type = DeclaredType(schema);
    if (!type || std::ranges::find(kTypes, type->type) == std::end(kTypes) ||
        (type->nullable && type->type == "null")) {
      return BadField(field,
                      "Qwen3.5 writes a call's arguments as text read back by their declared "
                      "type, so a strict tool's parameter needs one \"type\" (or one and "
                      "\"null\")");
    }
    for (const JsonSchemaNode::Property& p : object.properties) {
      const JsonSchemaNode& value = compiled.node(p.node);
      const bool held =
          value.held_string() || std::ranges::any_of(value.alternatives, [&](int32_t a) {
            return compiled.node(a).held_string();
          });
      if (p.key == Ordered(key).dump() && held) {
        return BadField(field,
                        "Qwen3.5 writes a string argument as its text: a strict tool's string "
                        "cannot be held to a length, pattern or format");
      }
    }
  }
  return std::nullopt;
}

// A 400 where two tools share a name.
std::optional<ApiError> CheckNamesDiffer(const Ordered& tools) {
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string name = tools[i].at("function").at("name").get<std::string>();
    if (!names.insert(name).second) {
      return BadField("tools[" + std::to_string(i) + "].function.name",
                      "names a function named before it: \"" + name + "\"");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ForcedCallSchema(const Ordered& tools, ToolChoice choice,
                                         const std::string& function, bool parallel,
                                         std::shared_ptr<const JsonSchema>* schema) {
  if (!tools.is_array() || tools.empty()) {
    return BadField("tool_choice", "forcing a call needs tools");
  }
  if (auto e = CheckNamesDiffer(tools)) return e;
  Ordered alternatives = Ordered::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Ordered& f = tools[i].at("function");
    const std::string name = f.at("name").get<std::string>();
    Ordered arguments;
    std::shared_ptr<const JsonSchema> alone;
    const std::string where = "tools[" + std::to_string(i) + "].function";
    if (auto e = ArgumentsSchema(f, where, &arguments, &alone)) return e;
    if (choice == ToolChoice::kFunction && name == function) {
      *schema = std::move(alone);
      return std::nullopt;
    }
    alternatives.push_back(CallAlternative(name, "parameters", std::move(arguments), "/items/anyOf",
                                           alternatives.size()));
  }
  if (choice == ToolChoice::kFunction) {
    return BadField("tool_choice.function.name",
                    "names no function in tools: \"" + function + "\"");
  }
  Ordered calls = {
      {"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(alternatives)}}}};
  if (!parallel) calls["maxItems"] = 1;
  return CompileAs(calls, "tools", schema);
}

std::optional<ApiError> HeldCallsSchema(const Ordered& tools, ChatFormat format,
                                        std::shared_ptr<const JsonSchema>* schema,
                                        CallHolding holding) {
  *schema = nullptr;
  const auto strict = [](const Ordered& tool) {
    const Ordered& f = tool.at("function");
    return f.contains("strict") && f["strict"].is_boolean() && f["strict"].get<bool>();
  };
  const bool all = holding.tools == HeldTools::kAll;
  if (holding.tools == HeldTools::kNone || !tools.is_array() || tools.empty() ||
      (!all && std::none_of(tools.begin(), tools.end(), strict))) {
    return std::nullopt;
  }
  // The calls' tagged union tells at most kMaxSchemaChoices names apart: more tools than that
  // (OpenAI takes 128) are served as before, their calls not held, rather than refused.
  if (tools.size() > static_cast<size_t>(kMaxSchemaChoices)) return std::nullopt;
  // The syntax the format's model writes a call in, and its arguments' key.
  CallSyntax syntax;
  std::string key;
  switch (format) {
    case ChatFormat::kQwen3: {
      const ToolCallMarkers markers = ToolCallMarkersOf(format);
      syntax = {.open = std::string(markers.open), .close = std::string(markers.close)};
      key = "arguments";
      break;
    }
    case ChatFormat::kLlama3:
      syntax = {.open = R"({"name")", .close = "", .whole_answer = true};
      key = "parameters";
      break;
    case ChatFormat::kQwen3_5: {
      const ToolCallMarkers markers = ToolCallMarkersOf(format);
      syntax = {.open = std::string(markers.open),
                .close = std::string(markers.close),
                .xml_parameters = true};
      key = "arguments";
      break;
    }
  }
  syntax.one_call = !holding.parallel;
  if (auto e = CheckNamesDiffer(tools)) return e;
  Ordered alternatives = Ordered::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Ordered& f = tools[i].at("function");
    Ordered arguments = {{"type", "object"}};
    std::shared_ptr<const JsonSchema> alone;
    const std::string where = "tools[" + std::to_string(i) + "].function";
    if (strict(tools[i]) || all) {
      // A strict tool's parameters are held or refused; another's held where they can be.
      Ordered held;
      std::optional<ApiError> e = ArgumentsSchema(f, where, &held, &alone);
      if (!e && syntax.xml_parameters) e = CheckXmlArguments(held, *alone, where + ".parameters");
      if (e && strict(tools[i])) return e;
      if (!e) arguments = std::move(held);
    }
    alternatives.push_back(CallAlternative(f.at("name").get<std::string>(), key,
                                           std::move(arguments), "/anyOf", alternatives.size()));
  }
  const Ordered call = {{"anyOf", std::move(alternatives)}};
  Result<std::shared_ptr<const JsonSchema>> compiled = JsonSchema::Calls(call, syntax, "tools");
  if (!compiled.ok()) return SchemaRefusal(compiled.status().message());
  *schema = std::move(*compiled);
  return std::nullopt;
}

}  // namespace dscale::server
