#include "server/tool_choice.h"

#include <set>
#include <string_view>

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

}  // namespace

std::optional<ApiError> ForcedCallSchema(const Ordered& tools, ToolChoice choice,
                                         const std::string& function,
                                         std::shared_ptr<const JsonSchema>* schema) {
  if (!tools.is_array() || tools.empty()) {
    return BadField("tool_choice", "forcing a call needs tools");
  }
  Ordered alternatives = Ordered::array();
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Ordered& f = tools[i].at("function");
    const std::string name = f.at("name").get<std::string>();
    const std::string where = "tools[" + std::to_string(i) + "].function";
    if (!names.insert(name).second) {
      return BadField(where + ".name", "names a function named before it: \"" + name + "\"");
    }
    // Parameters that admit any value (none given, {}) mean any object, as at the top.
    const auto given = f.find("parameters");
    const Ordered parameters = given == f.end() || JsonSchema::AdmitsAnyValue(*given)
                                   ? Ordered{{"type", "object"}}
                                   : *given;
    // Each function's parameters compiled alone, so that a refusal names them.
    std::shared_ptr<const JsonSchema> alone;
    if (auto e = CompileAs(parameters, where + ".parameters", &alone)) return e;
    if (choice == ToolChoice::kFunction && name == function) {
      *schema = std::move(alone);
      return std::nullopt;
    }
    Ordered moved = parameters;
    MoveReferences(
        &moved, "/items/anyOf/" + std::to_string(alternatives.size()) + "/properties/parameters");
    alternatives.push_back(
        {{"type", "object"},
         {"properties", {{"name", {{"const", name}}}, {"parameters", std::move(moved)}}},
         {"required", Ordered::array({"name", "parameters"})}});
  }
  if (choice == ToolChoice::kFunction) {
    return BadField("tool_choice.function.name",
                    "names no function in tools: \"" + function + "\"");
  }
  const Ordered calls = {
      {"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(alternatives)}}}};
  return CompileAs(calls, "tools", schema);
}

}  // namespace dscale::server
