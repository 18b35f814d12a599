#include "server/messages_request.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "server/openai_response.h"

namespace dscale::server {
namespace messages_body {

using namespace request_json;  // NOLINT: this file's vocabulary

// What a text block may carry besides its text: accepted, not acted on.
constexpr std::array<std::string_view, 2> kTextExtras = {"cache_control", "citations"};

// A block's "type", or the error naming it.
Error BlockType(const Ordered& block, const std::string& where, std::string* type) {
  if (!block.is_object()) return BadField(where, "expected a content block" + Got(block));
  if (Error e = ExpectString(Member(block, "type"), where + ".type")) return e;
  *type = Member(block, "type")->get<std::string>();
  return std::nullopt;
}

// Builds the chat body's messages from the Messages API's, with their places in *fields.
class Turns {
 public:
  explicit Turns(FieldMap* fields) : fields_(fields) {}

  Error AddSystem(const Ordered& system) {
    std::string text;
    if (Error e = ReadText(system, "system", {"text"}, kTextExtras, &text)) return e;
    Push({{"role", "system"}, {"content", text}}, "system");
    return std::nullopt;
  }

  Error AddMessage(const Ordered& message, const std::string& where) {
    if (!message.is_object()) return BadField(where, "expected a message" + Got(message));
    if (Error e = CheckMembers(message, where, {"role", "content"})) return e;
    const Ordered* role = Member(message, "role");
    if (role == nullptr || (*role != "user" && *role != "assistant")) {
      return BadField(where + ".role",
                      "expected \"user\" or \"assistant\"" + (role ? Got(*role) : std::string()));
    }
    const Ordered* content = Member(message, "content");
    if (content == nullptr) return BadField(where + ".content", "is required");
    if (content->is_string()) {
      Push({{"role", *role}, {"content", *content}}, where);
      return std::nullopt;
    }
    if (!content->is_array()) {
      return BadField(where + ".content", "expected a string or a list of blocks" + Got(*content));
    }
    return *role == "user" ? AddUserBlocks(*content, where) : AddAssistantBlocks(*content, where);
  }

  Ordered Take() { return std::move(messages_); }

 private:
  // Tool results each a tool message, then the text as the user's message.
  Error AddUserBlocks(const Ordered& blocks, const std::string& where) {
    std::string text;
    bool has_text = false;
    for (size_t j = 0; j < blocks.size(); ++j) {
      const std::string block = Index(where + ".content", j);
      std::string type;
      if (Error e = BlockType(blocks[j], block, &type)) return e;
      if (type == "text") {
        std::string part;
        if (Error e = ReadTextPart(blocks[j], block, {"text"}, kTextExtras, &part)) return e;
        text += part;
        has_text = true;
      } else if (type == "tool_result") {
        if (Error e = AddToolResult(blocks[j], block)) return e;
      } else {
        return BadField(block + ".type",
                        "expected \"text\" or \"tool_result\" in a user message "
                        "(images and documents are not supported), got \"" +
                            type + "\"");
      }
    }
    if (has_text || blocks.empty()) Push({{"role", "user"}, {"content", text}}, where);
    return std::nullopt;
  }

  Error AddToolResult(const Ordered& block, const std::string& where) {
    if (Error e = CheckMembers(block, where,
                               {"type", "tool_use_id", "content", "is_error", "cache_control"})) {
      return e;
    }
    if (Error e = ExpectString(Member(block, "tool_use_id"), where + ".tool_use_id")) return e;
    if (const Ordered* error = Member(block, "is_error"); error && !error->is_boolean()) {
      return BadField(where + ".is_error", "expected a boolean" + Got(*error));
    }
    std::string text;
    if (const Ordered* content = Member(block, "content")) {
      if (Error e = ReadText(*content, where + ".content", {"text"}, kTextExtras, &text)) return e;
    }
    Push({{"role", "tool"}, {"tool_call_id", block["tool_use_id"]}, {"content", text}}, where);
    return std::nullopt;
  }

  // Text, reasoning and calls: one assistant turn.
  Error AddAssistantBlocks(const Ordered& blocks, const std::string& where) {
    Ordered message = {{"role", "assistant"}, {"content", ""}};
    std::string text, reasoning;
    Ordered calls = Ordered::array();
    for (size_t j = 0; j < blocks.size(); ++j) {
      const std::string block = Index(where + ".content", j);
      std::string type;
      if (Error e = BlockType(blocks[j], block, &type)) return e;
      if (type == "text") {
        std::string part;
        if (Error e = ReadTextPart(blocks[j], block, {"text"}, kTextExtras, &part)) return e;
        text += part;
      } else if (type == "thinking") {
        if (Error e = CheckMembers(blocks[j], block, {"type", "thinking", "signature"})) return e;
        if (Error e = ExpectString(Member(blocks[j], "thinking"), block + ".thinking")) return e;
        reasoning += Member(blocks[j], "thinking")->get<std::string>();
      } else if (type == "tool_use") {
        if (Error e =
                CheckMembers(blocks[j], block, {"type", "id", "name", "input", "cache_control"})) {
          return e;
        }
        if (Error e = ExpectString(Member(blocks[j], "id"), block + ".id")) return e;
        const Ordered* input = Member(blocks[j], "input");
        if (input == nullptr || !input->is_object()) {
          return BadField(block + ".input", "expected the call's input object" +
                                                (input ? Got(*input) : std::string()));
        }
        const std::string call =
            Index(Index("messages", messages_.size()) + ".tool_calls", calls.size());
        fields_->Add(call + ".function.arguments", block + ".input");
        fields_->Add(call + ".function", block);
        fields_->Add(call, block);
        calls.push_back({{"id", blocks[j]["id"]},
                         {"type", "function"},
                         {"function",
                          {{"name", Member(blocks[j], "name") ? blocks[j]["name"] : Ordered()},
                           {"arguments", *input}}}});
      } else if (type != "redacted_thinking") {
        return BadField(block + ".type",
                        "expected \"text\", \"thinking\", \"redacted_thinking\" or \"tool_use\" in "
                        "an assistant message, got \"" +
                            type + "\"");
      }
    }
    message["content"] = text;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!calls.empty()) message["tool_calls"] = std::move(calls);
    Push(std::move(message), where);
    return std::nullopt;
  }

  void Push(Ordered message, const std::string& where) {
    fields_->Add(Index("messages", messages_.size()), where);
    messages_.push_back(std::move(message));
  }

  FieldMap* fields_;
  Ordered messages_ = Ordered::array();
};

// [{"name", "description", "input_schema", ...}] → chat's function tools.
Error ReadTools(const Ordered& v, Ordered* chat, FieldMap* fields) {
  if (!v.is_array()) return BadField("tools", "expected a list of tools" + Got(v));
  Ordered tools = Ordered::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = Index("tools", i);
    const Ordered& tool = v[i];
    if (!tool.is_object()) return BadField(where, "expected an object" + Got(tool));
    if (const Ordered* type = Member(tool, "type"); type && *type != "custom") {
      return BadField(where + ".type",
                      "expected \"custom\" (client tools; the server tools are "
                      "not supported)" +
                          Got(*type));
    }
    if (Error e = CheckMembers(
            tool, where,
            {"type", "name", "description", "input_schema", "strict", "cache_control"})) {
      return e;
    }
    if (Member(tool, "input_schema") == nullptr) {
      return BadField(where + ".input_schema", "is required");
    }
    Ordered function = Ordered::object();
    for (const auto& [key, value] : tool.items()) {
      if (key == "input_schema") {
        function["parameters"] = value;
      } else if (key != "type" && key != "cache_control") {
        function[key] = value;
      }
    }
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    fields->Add(where + ".function.parameters", where + ".input_schema");
    fields->Add(where + ".function", where);
  }
  (*chat)["tools"] = std::move(tools);
  return std::nullopt;
}

Error ReadToolChoice(const Ordered& v, Ordered* chat, FieldMap* fields) {
  constexpr const char* kExpected =
      R"(expected {"type": "auto" | "any" | "tool" | "none", "name", "disable_parallel_tool_use"})";
  if (!v.is_object() || Member(v, "type") == nullptr) return BadField("tool_choice", kExpected);
  if (Error e = CheckMembers(v, "tool_choice", {"type", "name", "disable_parallel_tool_use"})) {
    return e;
  }
  const Ordered& type = *Member(v, "type");
  if (type == "auto" || type == "any" || type == "none") {
    (*chat)["tool_choice"] = type == "any" ? "required" : type.get<std::string>();
  } else if (type == "tool") {
    const Ordered* name = Member(v, "name");
    (*chat)["tool_choice"] = {{"type", "function"},
                              {"function", {{"name", name ? *name : Ordered()}}}};
    fields->Add("tool_choice.function", "tool_choice");
  } else {
    return BadField("tool_choice.type", kExpected + Got(type));
  }
  if (const Ordered* one = Member(v, "disable_parallel_tool_use")) {
    if (!one->is_boolean()) {
      return BadField("tool_choice.disable_parallel_tool_use", "expected a boolean" + Got(*one));
    }
    (*chat)["parallel_tool_calls"] = !one->get<bool>();
  }
  return std::nullopt;
}

// {"type": "enabled", "budget_tokens"} or {"type": "disabled"}.
Error ReadThinking(const Ordered& v, Ordered* chat) {
  if (!v.is_object() || Member(v, "type") == nullptr ||
      (*Member(v, "type") != "enabled" && *Member(v, "type") != "disabled")) {
    return BadField("thinking", R"(expected {"type": "enabled", "budget_tokens": N} or )"
                                R"({"type": "disabled"})" +
                                    Got(v));
  }
  if (Error e = CheckMembers(v, "thinking", {"type", "budget_tokens"})) return e;
  const bool on = *Member(v, "type") == "enabled";
  if (const Ordered* budget = Member(v, "budget_tokens")) {
    if (!budget->is_number_integer() || *budget < 1) {
      return BadField("thinking.budget_tokens", "expected a positive integer" + Got(*budget));
    }
    if (on) (*chat)["thinking_token_budget"] = *budget;
  }
  (*chat)["chat_template_kwargs"] = {{"enable_thinking", on}};
  return std::nullopt;
}

// Copied into the chat body as they are: chat's rules check them.
constexpr std::array kShared = {"model", "max_tokens", "temperature", "top_p", "top_k", "stream"};

Error Translate(const Ordered& body, Ordered* chat, FieldMap* fields) {
  for (const auto& [key, value] : body.items()) {
    if (key == "messages" || key == "system" || value.is_null()) continue;
    Error e;
    if (OneOf(kShared, key)) {
      (*chat)[key] = value;
    } else if (key == "stop_sequences") {
      (*chat)["stop"] = value;
      fields->Add("stop", key);
    } else if (key == "tools") {
      e = ReadTools(value, chat, fields);
    } else if (key == "tool_choice") {
      e = ReadToolChoice(value, chat, fields);
    } else if (key == "thinking") {
      e = ReadThinking(value, chat);
    } else if (key == "metadata") {
      if (!value.is_object()) {
        e = BadField(key, "expected an object" + Got(value));
      } else {
        e = CheckMembers(value, key, {"user_id"});
      }
    } else if (key == "service_tier") {
      if (!value.is_string()) e = BadField(key, "expected a string" + Got(value));
    } else {
      e = BadField(key, "unrecognized request argument");
    }
    if (e) return e;
  }
  fields->Add("chat_template_kwargs.enable_thinking", "thinking");
  fields->Add("thinking_token_budget", "thinking.budget_tokens");
  fields->Add("chat_template_kwargs", "thinking");
  fields->Add("parallel_tool_calls", "tool_choice.disable_parallel_tool_use");
  Turns turns(fields);
  if (const Ordered* system = Member(body, "system")) {
    if (Error e = turns.AddSystem(*system)) return e;
  }
  const Ordered* messages = Member(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return BadField("messages", "expected a non-empty list of messages" +
                                    (messages ? Got(*messages) : std::string()));
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    if (Error e = turns.AddMessage((*messages)[i], Index("messages", i))) return e;
  }
  (*chat)["messages"] = turns.Take();
  fields->Add("messages", "messages");
  fields->Add("prompt", "messages");
  return std::nullopt;
}

}  // namespace messages_body

std::optional<ApiError> ParseMessagesRequest(std::string_view body, MessagesBody kind,
                                             ApiRequest* out, FieldMap* fields) {
  using request_json::Ordered;
  *fields = FieldMap();
  *out = ApiRequest{.endpoint = Endpoint::kMessages};
  Ordered sent;
  if (auto e = request_json::ReadBody(body, &sent)) return e;
  if (kind == MessagesBody::kCreate && request_json::Member(sent, "max_tokens") == nullptr) {
    return BadField("max_tokens", "is required");
  }
  if (kind == MessagesBody::kCountTokens) {
    constexpr std::array kShaping = {"model", "messages",    "system",
                                     "tools", "tool_choice", "thinking"};
    for (const auto& [key, value] : sent.items()) {
      if (!request_json::OneOf(kShaping, key)) {
        return BadField(key, "is not taken by count_tokens, which counts the prompt's tokens");
      }
    }
  }
  Ordered chat = Ordered::object();
  if (auto e = messages_body::Translate(sent, &chat, fields)) return e;
  if (auto e = ParseApiRequest(Endpoint::kChatCompletions, Dump(chat), out)) {
    return fields->Translate(std::move(*e));
  }
  out->endpoint = Endpoint::kMessages;
  return std::nullopt;
}

}  // namespace dscale::server
