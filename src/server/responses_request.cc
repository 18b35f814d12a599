#include "server/responses_request.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>

#include "io/json_util.h"
#include "server/openai_response.h"

namespace dscale::server {
namespace responses_body {

using namespace request_json;  // NOLINT: this file's vocabulary

// What an output_text part of an earlier reply carries besides its text.
constexpr std::array<std::string_view, 2> kOutputTextExtras = {"annotations", "logprobs"};

// The text of a reasoning item's `key` list of parts of `types`, joined by `separator`; false
// in *found where the list is absent or empty.
Error ReadReasoningParts(const Ordered& item, const std::string& where, const char* key,
                         std::initializer_list<std::string_view> types, const char* separator,
                         std::string* out, bool* found) {
  *found = false;
  const Ordered* parts = Member(item, key);
  if (parts == nullptr) return std::nullopt;
  const std::string name = where + "." + key;
  if (!parts->is_array()) return BadField(name, "expected a list of parts" + Got(*parts));
  out->clear();
  for (size_t j = 0; j < parts->size(); ++j) {
    std::string text;
    if (Error e = ReadTextPart((*parts)[j], Index(name, j), types, {}, &text)) return e;
    *out += (j > 0 ? separator : "") + text;
  }
  *found = !parts->empty();
  return std::nullopt;
}

// A reasoning item's text: its content's parts ("reasoning_text", or "text" as Codex also
// writes them), else its summary's "summary_text" parts (joined by a blank line: paragraphs).
Error ReadReasoning(const Ordered& item, const std::string& where, std::string* out) {
  if (Error e = CheckMembers(item, where,
                             {"type", "id", "summary", "content", "encrypted_content", "status"})) {
    return e;
  }
  bool found = false;
  if (Error e =
          ReadReasoningParts(item, where, "content", {"reasoning_text", "text"}, "", out, &found)) {
    return e;
  }
  if (found) return std::nullopt;
  if (Error e = ReadReasoningParts(item, where, "summary", {"summary_text"}, "\n\n", out, &found)) {
    return e;
  }
  if (!found) out->clear();
  return std::nullopt;
}

// Builds the chat body's messages from the input items, with their places in *fields.
class Conversation {
 public:
  explicit Conversation(FieldMap* fields) : fields_(fields) {}

  // The instructions and the input's leading system / developer messages: one system message.
  void AddSystem(const std::string& text, const std::string& where) {
    if (system_open_ && !messages_.empty()) {
      std::string& content = messages_.back()["content"].get_ref<std::string&>();
      content += "\n\n" + text;
      return;
    }
    system_open_ = true;
    Push({{"role", "system"}, {"content", text}}, where);
  }

  Error AddItem(const Ordered& item, const std::string& where) {
    if (!item.is_object()) return BadField(where, "expected an item object" + Got(item));
    const Ordered* type = Member(item, "type");
    if (type != nullptr && !type->is_string()) {
      return BadField(where + ".type", "expected a string" + Got(*type));
    }
    const std::string kind = type == nullptr ? "message" : type->get<std::string>();
    if (kind == "message") return AddMessage(item, where);
    system_open_ = false;
    if (kind == "function_call") return AddCall(item, where);
    if (kind == "function_call_output") return AddCallOutput(item, where);
    if (kind == "reasoning") {
      std::string text;
      if (Error e = ReadReasoning(item, where, &text)) return e;
      if (!text.empty()) reasoning_ += (reasoning_.empty() ? "" : "\n\n") + text;
      calls_join_ = false;
      return std::nullopt;
    }
    if (kind == "item_reference") {
      return BadField(where, "this server stores no responses: send the item itself");
    }
    return BadField(where + ".type",
                    "expected \"message\", \"function_call\", \"function_call_output\" or "
                    "\"reasoning\" (no other items are supported), got \"" +
                        kind + "\"");
  }

  Ordered Take() { return std::move(messages_); }

 private:
  Error AddMessage(const Ordered& item, const std::string& where) {
    if (Error e = CheckMembers(item, where, {"type", "role", "content", "id", "status"})) return e;
    const Ordered* role = Member(item, "role");
    constexpr std::array kRoles = {"user", "system", "developer", "assistant"};
    if (role == nullptr || !role->is_string() ||
        std::find(kRoles.begin(), kRoles.end(), role->get<std::string>()) == kRoles.end()) {
      return BadField(where + ".role", "expected user, system, developer or assistant" +
                                           (role == nullptr ? "" : Got(*role)));
    }
    const Ordered* content = Member(item, "content");
    if (content == nullptr) return BadField(where + ".content", "is required");
    std::string text;
    if (Error e = ReadText(*content, where + ".content", {"input_text", "output_text", "refusal"},
                           kOutputTextExtras, &text)) {
      return e;
    }
    const bool system = *role == "system" || *role == "developer";
    if (system && (system_open_ || messages_.empty())) {
      AddSystem(text, where);
      return std::nullopt;
    }
    system_open_ = false;
    Ordered message = {{"role", system ? "system" : role->get<std::string>()}, {"content", text}};
    const bool assistant = *role == "assistant";
    if (assistant) TakeReasoning(&message);
    Push(std::move(message), where);
    calls_join_ = assistant;
    return std::nullopt;
  }

  Error AddCall(const Ordered& item, const std::string& where) {
    if (Error e =
            CheckMembers(item, where, {"type", "call_id", "name", "arguments", "id", "status"})) {
      return e;
    }
    for (const char* key : {"call_id", "name", "arguments"}) {
      if (Error e = ExpectString(Member(item, key), where + "." + key)) return e;
    }
    if (!calls_join_) {
      Ordered message = {{"role", "assistant"}, {"content", nullptr}};
      TakeReasoning(&message);
      Push(std::move(message), where);
      calls_join_ = true;
    }
    Ordered& calls = messages_.back()["tool_calls"];
    if (calls.is_null()) calls = Ordered::array();
    const std::string call =
        Index(Index("messages", messages_.size() - 1) + ".tool_calls", calls.size());
    calls.push_back({{"id", item["call_id"]},
                     {"type", "function"},
                     {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    fields_->Add(call + ".function", where);
    fields_->Add(call, where);
    return std::nullopt;
  }

  Error AddCallOutput(const Ordered& item, const std::string& where) {
    if (Error e = CheckMembers(item, where, {"type", "call_id", "output", "id", "status"}))
      return e;
    if (Error e = ExpectString(Member(item, "call_id"), where + ".call_id")) return e;
    const Ordered* output = Member(item, "output");
    if (output == nullptr) return BadField(where + ".output", "is required");
    std::string text;
    if (Error e = ReadText(*output, where + ".output", {"input_text"}, {}, &text)) return e;
    Push({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", text}}, where);
    fields_->Add(Index("messages", messages_.size() - 1) + ".content", where + ".output");
    calls_join_ = false;
    return std::nullopt;
  }

  // A reasoning item's text goes with the assistant turn after it; a turn of another role
  // after it leaves it out, as a template leaves out the reasoning of earlier turns.
  void TakeReasoning(Ordered* message) {
    if (!reasoning_.empty()) (*message)["reasoning_content"] = std::move(reasoning_);
    reasoning_.clear();
  }

  void Push(Ordered message, const std::string& where) {
    if (message["role"] != "assistant") reasoning_.clear();
    fields_->Add(Index("messages", messages_.size()), where);
    messages_.push_back(std::move(message));
  }

  FieldMap* fields_;
  Ordered messages_ = Ordered::array();
  std::string reasoning_;     // a reasoning item's, for the next assistant turn
  bool system_open_ = false;  // the last message is the leading system message
  bool calls_join_ = false;   // a function call joins the last (assistant) message
};

// The instructions, then the stored conversation `earlier` continues (previous_response_id's),
// then the input; the input's items (a string as the user's message) into *items.
Error ReadInput(const Ordered& body, const Ordered& earlier, Ordered* chat, Ordered* items,
                FieldMap* fields) {
  Conversation conversation(fields);
  if (const Ordered* instructions = Member(body, "instructions")) {
    if (!instructions->is_string()) {
      return BadField("instructions", "expected a string" + Got(*instructions));
    }
    conversation.AddSystem(instructions->get<std::string>(), "instructions");
  }
  for (const Ordered& item : earlier) {
    if (Error e = conversation.AddItem(item, "previous_response_id")) return e;
  }
  const Ordered* input = Member(body, "input");
  if (input == nullptr) return BadField("input", "is required");
  if (input->is_string()) {
    *items = Ordered::array({{{"role", "user"}, {"content", *input}}});
    if (Error e = conversation.AddItem((*items)[0], "input")) return e;
  } else if (input->is_array() && !input->empty()) {
    *items = *input;
    for (size_t i = 0; i < input->size(); ++i) {
      if (Error e = conversation.AddItem((*input)[i], Index("input", i))) return e;
    }
  } else {
    return BadField("input", "expected a string or a non-empty list of items" + Got(*input));
  }
  (*chat)["messages"] = conversation.Take();
  fields->Add("messages", "input");
  fields->Add("prompt", "input");
  return std::nullopt;
}

// [{"type": "function", "name", ...}] → chat's [{"type": "function", "function": {"name", ...}}],
// members in the order sent (the template writes them so).
Error ReadTools(const Ordered& v, Ordered* chat, FieldMap* fields) {
  if (!v.is_array()) return BadField("tools", "expected a list of tools" + Got(v));
  Ordered tools = Ordered::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = Index("tools", i);
    const Ordered& tool = v[i];
    if (!tool.is_object()) return BadField(where, "expected an object" + Got(tool));
    const Ordered* type = Member(tool, "type");
    if (type == nullptr || *type != "function") {
      return BadField(where + ".type", "expected \"function\" (only function tools are supported)" +
                                           (type == nullptr ? "" : Got(*type)));
    }
    Ordered function = Ordered::object();
    for (const auto& [key, value] : tool.items()) {
      if (key != "type") function[key] = value;
    }
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    fields->Add(where + ".function", where);
  }
  (*chat)["tools"] = std::move(tools);
  return std::nullopt;
}

Error ReadToolChoice(const Ordered& v, Ordered* chat, FieldMap* fields) {
  if (v.is_string()) {
    (*chat)["tool_choice"] = v;  // chat checks the word
    return std::nullopt;
  }
  if (!v.is_object() || Member(v, "type") == nullptr || *Member(v, "type") != "function") {
    return BadField(
        "tool_choice",
        R"(expected "auto", "none", "required" or {"type": "function", "name": ...})" + Got(v));
  }
  if (Error e = CheckMembers(v, "tool_choice", {"type", "name"})) return e;
  const Ordered* name = Member(v, "name");
  (*chat)["tool_choice"] = {{"type", "function"},
                            {"function", {{"name", name == nullptr ? Ordered() : *name}}}};
  fields->Add("tool_choice.function", "tool_choice");
  return std::nullopt;
}

// text: {"format": {...}, "verbosity"} → response_format.
Error ReadTextOptions(const Ordered& v, Ordered* chat, Ordered* echo, FieldMap* fields) {
  if (!v.is_object()) return BadField("text", "expected an object" + Got(v));
  if (Error e = CheckMembers(v, "text", {"format", "verbosity"})) return e;
  if (const Ordered* verbosity = Member(v, "verbosity")) {
    if (*verbosity != "low" && *verbosity != "medium" && *verbosity != "high") {
      return BadField("text.verbosity", R"(expected "low", "medium" or "high")" + Got(*verbosity));
    }
    (*echo)["verbosity"] = *verbosity;
  }
  const Ordered* format = Member(v, "format");
  if (format == nullptr) return std::nullopt;
  (*echo)["format"] = *format;
  if (!format->is_object()) return BadField("text.format", "expected an object" + Got(*format));
  const Ordered* type = Member(*format, "type");
  if (type == nullptr || *type != "json_schema") {
    (*chat)["response_format"] = *format;  // "text" or "json_object": chat checks them
    fields->Add("response_format", "text.format");
    return std::nullopt;
  }
  Ordered spec = Ordered::object();
  for (const auto& [key, value] : format->items()) {
    if (key != "type") spec[key] = value;
  }
  (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  fields->Add("response_format.json_schema", "text.format");
  fields->Add("response_format", "text.format");
  return std::nullopt;
}

// reasoning: {"effort", "summary"} → chat's reasoning_effort.
Error ReadReasoningOptions(const Ordered& v, Ordered* chat, Ordered* echo) {
  if (!v.is_object()) return BadField("reasoning", "expected an object" + Got(v));
  if (Error e = CheckMembers(v, "reasoning", {"effort", "summary", "generate_summary"})) return e;
  if (const Ordered* effort = Member(v, "effort")) {
    (*chat)["reasoning_effort"] = *effort;  // chat checks the word
    (*echo)["effort"] = *effort;
  }
  for (const char* key : {"summary", "generate_summary"}) {
    const Ordered* summary = Member(v, key);
    if (summary == nullptr) continue;
    if (*summary != "auto" && *summary != "concise" && *summary != "detailed") {
      return BadField(std::string("reasoning.") + key,
                      R"(expected "auto", "concise" or "detailed")" + Got(*summary));
    }
    (*echo)["summary"] = *summary;
  }
  return std::nullopt;
}

constexpr std::array kIncludes = {"message.output_text.logprobs",
                                  "reasoning.encrypted_content",
                                  "file_search_call.results",
                                  "web_search_call.results",
                                  "web_search_call.action.sources",
                                  "message.input_image.image_url",
                                  "computer_call_output.output.image_url",
                                  "code_interpreter_call.outputs"};

Error ReadInclude(const Ordered& v, bool* logprobs) {
  if (!v.is_array()) return BadField("include", "expected a list of names" + Got(v));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() ||
        std::find(kIncludes.begin(), kIncludes.end(), v[i].get<std::string>()) == kIncludes.end()) {
      return BadField(Index("include", i), "is not one of the Responses API's names" + Got(v[i]));
    }
    *logprobs = *logprobs || v[i] == "message.output_text.logprobs";
  }
  return std::nullopt;
}

// Fields whose value only has to have its type: accepted, and not acted on.
Error CheckAccepted(const std::string& key, const Ordered& v) {
  if (key == "stream_options") {
    if (!v.is_object()) return BadField(key, "expected an object" + Got(v));
    if (Error e = CheckMembers(v, key, {"include_obfuscation"})) return e;
  } else if (key == "truncation") {
    if (v != "disabled") {
      return BadField(
          key, R"(only "disabled" is supported: a prompt that does not fit is refused)" + Got(v));
    }
  } else if (key == "background") {
    if (v != false) return BadField(key, "only false is supported" + Got(v));
  }
  return std::nullopt;
}

constexpr std::array kAccepted = {"stream_options", "truncation", "background"};
// Copied into the chat body as they are: chat's rules check them.
constexpr std::array kShared = {"model",
                                "metadata",
                                "user",
                                "safety_identifier",
                                "prompt_cache_key",
                                "service_tier",
                                "temperature",
                                "top_p",
                                "stream",
                                "parallel_tool_calls",
                                "top_k",
                                "min_p",
                                "repetition_penalty",
                                "seed",
                                "stop",
                                "presence_penalty",
                                "frequency_penalty",
                                "logit_bias",
                                "ignore_eos",
                                "min_tokens",
                                "stop_token_ids"};
// Features of OpenAI's platform (stored conversations and prompts): null only.
constexpr std::array kNullOnly = {"conversation", "prompt", "max_tool_calls"};

// The request's settings the response object repeats, in OpenAI's order; temperature and top_p
// are the defaults' once known.
Ordered Echo(const Ordered& body) {
  const auto sent = [&](const char* key, Ordered otherwise) {
    const Ordered* v = Member(body, key);
    return v == nullptr ? otherwise : *v;
  };
  return {{"instructions", sent("instructions", nullptr)},
          {"max_output_tokens", sent("max_output_tokens", nullptr)},
          {"max_tool_calls", nullptr},
          {"parallel_tool_calls", sent("parallel_tool_calls", true)},
          {"previous_response_id", nullptr},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"service_tier", "default"},
          {"store", false},
          {"temperature", nullptr},
          {"text", {{"format", {{"type", "text"}}}, {"verbosity", "medium"}}},
          {"tool_choice", sent("tool_choice", "auto")},
          {"tools", sent("tools", Ordered::array())},
          {"top_logprobs", sent("top_logprobs", 0)},
          {"top_p", nullptr},
          {"truncation", "disabled"},
          {"user", sent("user", nullptr)},
          {"metadata", sent("metadata", Ordered::object())}};
}

// previous_response_id: the stored conversation it ended, into *earlier.
Error ReadPrevious(const Ordered& v, const StoredConversation& stored, Ordered* earlier,
                   ApiRequest::Responses* context) {
  if (!v.is_string()) return BadField("previous_response_id", "expected a string" + Got(v));
  if (!stored) {
    return BadField("previous_response_id",
                    "is not supported: this server keeps no responses (--responses-store-mib 0); "
                    "send the whole conversation in input");
  }
  context->previous_response_id = v.get<std::string>();
  return stored(context->previous_response_id, earlier);
}

Error Translate(const Ordered& body, const StoredConversation& stored, Ordered* chat,
                ApiRequest::Responses* context, FieldMap* fields) {
  Ordered* echo = &context->echo;
  Ordered earlier = Ordered::array();
  bool logprobs = false;
  for (const auto& [key, value] : body.items()) {
    if (key == "input" || key == "instructions" || value.is_null()) continue;
    Error e;
    if (OneOf(kShared, key)) {
      (*chat)[key] = value;
    } else if (key == "max_output_tokens") {
      (*chat)["max_tokens"] = value;
      fields->Add("max_tokens", key);
    } else if (key == "top_logprobs") {
      (*chat)[key] = value;
      logprobs = logprobs || (value.is_number() && value > 0);
    } else if (key == "include") {
      e = ReadInclude(value, &logprobs);
    } else if (key == "tools") {
      e = ReadTools(value, chat, fields);
    } else if (key == "tool_choice") {
      e = ReadToolChoice(value, chat, fields);
    } else if (key == "text") {
      e = ReadTextOptions(value, chat, &(*echo)["text"], fields);
    } else if (key == "reasoning") {
      e = ReadReasoningOptions(value, chat, &(*echo)["reasoning"]);
    } else if (key == "previous_response_id") {
      e = ReadPrevious(value, stored, &earlier, context);
      (*echo)[key] = value;
    } else if (key == "store") {
      if (!value.is_boolean()) e = BadField(key, "expected a boolean" + Got(value));
      context->store = value == true;
    } else if (OneOf(kAccepted, key)) {
      e = CheckAccepted(key, value);
    } else if (OneOf(kNullOnly, key)) {
      e = BadField(key,
                   "is not supported: this server stores no responses or prompts; send the "
                   "whole conversation in input");
    } else {
      e = BadField(key, "unrecognized request argument");
    }
    if (e) return e;
  }
  if (const Ordered* options = Member(body, "stream_options");
      options != nullptr &&
      (Member(body, "stream") == nullptr || *Member(body, "stream") != true)) {
    return BadField("stream_options", "is only allowed when stream is true");
  }
  if (logprobs) (*chat)["logprobs"] = true;
  fields->Add("logprobs", "include");
  fields->Add("reasoning_effort", "reasoning.effort");
  return ReadInput(body, earlier, chat, &context->input, fields);
}

}  // namespace responses_body

std::optional<ApiError> ParseResponsesRequest(std::string_view body,
                                              const StoredConversation& stored, ApiRequest* out,
                                              FieldMap* fields) {
  using request_json::Ordered;
  *fields = FieldMap();
  *out = ApiRequest{.endpoint = Endpoint::kResponses};
  Ordered sent;
  if (auto e = request_json::ReadBody(body, &sent)) return e;
  Ordered chat = Ordered::object();
  ApiRequest::Responses context{.echo = responses_body::Echo(sent)};
  if (auto e = responses_body::Translate(sent, stored, &chat, &context, fields)) return e;
  if (auto e = ParseApiRequest(Endpoint::kChatCompletions, Dump(chat), out)) {
    return fields->Translate(std::move(*e));
  }
  out->endpoint = Endpoint::kResponses;
  out->responses = std::move(context);
  return std::nullopt;
}

}  // namespace dscale::server
