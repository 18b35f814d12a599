#pragma once
// tool_choice: whether the model may call the request's tools ("auto", the default), may not
// ("none": calls stay text), must call one or more ("required"), or must call a named function
// ({"type": "function", "function": {"name"}}). A forced call is held by a schema, as vLLM holds
// it: the named function's arguments object is the whole answer (its `parameters`; any object
// where it has none), and "required" makes the answer a JSON array of one or more
// {"name": <a tool's name>, "parameters": <its arguments>} objects, each told apart by the name
// it begins with (spec/json_schema.h's tagged union). The answer is then returned as calls
// (ForcedToolCalls), not read from the chat format's markers.
//
// Under "auto", where a tool is `strict` (OpenAI's: its arguments follow its parameters), the
// calls the model writes in its chat format's own syntax are held (HeldCallsSchema): the answer
// is free text, but every call it opens names a tool and carries arguments its parameters admit
// (a tool that is not strict: any object, or in Qwen3.5's form any text), as OpenAI's strict
// function calling promises.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/tokenizer/chat_format.h"
#include "server/api_error.h"
#include "spec/json_schema.h"

namespace dscale::server {

enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

// The schema for ToolChoice kRequired or kFunction (`function` its name), from the request's
// `tools` as sent (members in order). A 400 names the field at fault: tool_choice where there
// are no tools or no tool has the name, a tool's name given twice, or what a function's
// parameters cannot hold an output to (tools[i].function.parameters.<path>).
// `parallel` false (parallel_tool_calls): "required"'s array holds one call.
std::optional<ApiError> ForcedCallSchema(const nlohmann::ordered_json& tools, ToolChoice choice,
                                         const std::string& function, bool parallel,
                                         std::shared_ptr<const JsonSchema>* schema);

// Under "auto", whose calls are held (dscale serve --hold-tool-calls): kStrict, the calls of
// strict tools, as OpenAI's strict mode (the default); kAll, every tool's, as llama.cpp holds them
// (a tool that is not strict held to its parameters where the grammar can hold an output to them,
// else to any object); kNone, none (strict accepted and not held).
enum class HeldTools { kNone, kStrict, kAll };

struct CallHolding {
  HeldTools tools = HeldTools::kStrict;
  bool parallel = true;  // false (parallel_tool_calls): at most one call (CallSyntax::one_call)
};

// For "auto": the answer's calls in `format`'s syntax held, where some tool is strict (or
// `holding` holds every tool's) and the
// format is known (Qwen3's JSON between <tool_call> markers, Llama 3.1's JSON as the whole
// answer, Qwen3.5's XML parameters between <tool_call> markers). `*schema` is left null where
// nothing is held. A 400 names what a strict function's parameters cannot hold an output to (in
// Qwen3.5's form also a parameter without one declared type, or a string held to a length or
// pattern), or a name given twice. More than kMaxSchemaChoices tools: nothing held.
std::optional<ApiError> HeldCallsSchema(const nlohmann::ordered_json& tools, ChatFormat format,
                                        std::shared_ptr<const JsonSchema>* schema,
                                        CallHolding holding = {});

}  // namespace dscale::server
