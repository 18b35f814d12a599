#pragma once
// How a chat format's model writes a call to a tool in its output, and reading one back: the
// inverse of what its template writes for an assistant message's tool calls (chat_template.h).
// Qwen3's (Hermes's form): "<tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>",
// one block per call. Qwen3.5's and Qwen3.6's (Qwen3-Coder's form): "<tool_call>\n<function=NAME>
// \n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>", each value as text,
// which the tool's declared parameter types turn back into JSON. Llama 3.1's: the whole answer is
// one call, {"name": "NAME", "parameters": {...}}, without markers.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "io/tokenizer/chat_format.h"
#include "io/tokenizer/chat_template.h"

namespace dscale {

// The text that opens and closes one call in the output; both empty: the whole output is the
// call (Llama 3.1's).
struct ToolCallMarkers {
  std::string_view open;
  std::string_view close;
};

ToolCallMarkers ToolCallMarkersOf(ChatFormat format);

// A parameter's declared JSON Schema type: parameters.properties.KEY.type where it is a string,
// or a type and "null" (OpenAI's strict form of an optional parameter, [T, "null"]).
struct ParameterType {
  std::string type;  // "" where none is declared
  bool nullable = false;
};

// The type each tool declares for each of its parameters, read from the definitions as the
// request gave them.
class ToolParameterTypes {
 public:
  ToolParameterTypes() = default;
  explicit ToolParameterTypes(std::span<const std::string> tools);
  // Empty where the tool or the parameter declares none.
  ParameterType TypeOf(const std::string& tool, const std::string& parameter) const;

 private:
  std::map<std::string, std::map<std::string, ParameterType>, std::less<>> types_;
};

// The declared type of a parameter's schema (ParameterType); nullopt where it declares none, or
// a type list other than [T, "null"].
std::optional<ParameterType> DeclaredType(const nlohmann::ordered_json& schema);

// The call written between the markers (whitespace around it allowed), its arguments as
// TemplateJson writes their object, so a call written back into the history reads as the model
// wrote it. nullopt for text that is not a call:
//   Qwen3: a JSON object with a non-empty string "name" and an "arguments" object (or a string
//     holding one's JSON);
//   Qwen3.5: one <function=NAME> block (its </function> may be missing) of <parameter=KEY>
//     blocks, each ending at its </parameter>, the next <parameter= or </function>; a value
//     loses one newline at each end and is read by its declared type: "string" as is; "integer",
//     "number", "boolean" (true/false in any case), "null", "object" and "array" as the JSON
//     they spell (a value that does not is kept as a string); an undeclared one as a string;
//     one declared nullable ([T, "null"]) is null where its text is "null", else read as T;
//   Llama 3.1: a JSON object with a non-empty string "name" and a "parameters" object.
std::optional<ChatToolCall> ParseToolCall(ChatFormat format, std::string_view body,
                                          const ToolParameterTypes& types);

}  // namespace dscale
