#pragma once
// JSON as the chat templates' `tojson` filter writes it: Hugging Face's, which is Python's
// json.dumps(value, ensure_ascii=False) — members in the order given, ", " between items and
// ": " after keys, non-ASCII text as is, floats as Python's repr spells them (1.0, 1e-05,
// 1e+16). A tool's definition reaches the model in this form, and a tool call's arguments
// leave the server in it.

#include <nlohmann/json.hpp>
#include <string>

namespace dscale {

std::string TemplateJson(const nlohmann::ordered_json& value);
// tojson(indent=N): each member and element on a line of its own, N spaces a level, "," between
// them ("{}" and "[]" when empty).
std::string TemplateJson(const nlohmann::ordered_json& value, int indent);

// A value as the templates' `string` filter writes it: Python's str() — a string as is, True,
// False and None for the literals, numbers as TemplateJson spells them, containers as
// TemplateJson (the templates that use it send containers to tojson instead).
std::string TemplateString(const nlohmann::ordered_json& value);

}  // namespace dscale
