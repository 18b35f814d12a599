#include "server/prompt_builder.h"

#include <algorithm>
#include <charconv>

#include "io/tokenizer/chat_template.h"

namespace dscale::server {
namespace {

bool IsVerbatim(const ChatMessage& m) { return m.role != "assistant"; }

// Whether `text` spells an added token: encoding with and without matching them differs.
Result<bool> SpellsAddedToken(const Tokenizer& tokenizer, const std::string& text) {
  DSCALE_ASSIGN_OR_RETURN(auto with, tokenizer.Encode(text));
  DSCALE_ASSIGN_OR_RETURN(auto without, tokenizer.Encode(text, {.parse_added_tokens = false}));
  return with != without;
}

// A marker found in no message or tool: U+E000 (private use, which no template escapes: Llama
// 3's writes tool results as JSON strings) and "content:", with as many extra U+E000 as needed.
std::string UniqueMarker(const std::vector<ChatMessage>& messages,
                         std::span<const std::string> tools) {
  constexpr std::string_view kPrivateUse = "\xee\x80\x80";
  std::string marker = std::string(kPrivateUse) + "content:";
  auto used = [&](const std::string& m) {
    return std::any_of(
               messages.begin(), messages.end(),
               [&](const ChatMessage& msg) { return msg.content.find(m) != std::string::npos; }) ||
           std::any_of(tools.begin(), tools.end(),
                       [&](const std::string& tool) { return tool.find(m) != std::string::npos; });
  };
  while (used(marker)) marker.insert(0, kPrivateUse);
  return marker;
}

// Renders with each verbatim message's content replaced by marker + index + marker (and each
// tool's definition by marker + (messages + its index) + marker), then encodes the template's
// text with added tokens and the contents and definitions as plain text.
std::optional<ApiError> EncodeChatSegmented(const std::vector<ChatMessage>& messages,
                                            const Tokenizer& tokenizer, std::vector<int32_t>* ids,
                                            const ChatTemplateOptions& options) {
  const std::string marker = UniqueMarker(messages, options.tools);
  std::vector<ChatMessage> masked = messages;
  for (size_t i = 0; i < masked.size(); ++i) {
    if (IsVerbatim(masked[i])) masked[i].content = marker + std::to_string(i) + marker;
  }
  std::vector<std::string> masked_tools;
  for (size_t i = 0; i < options.tools.size(); ++i) {
    masked_tools.push_back(marker + std::to_string(messages.size() + i) + marker);
  }
  ChatTemplateOptions masked_options = options;
  masked_options.tools = masked_tools;
  const ChatFormat format = ChatFormatOf(tokenizer);
  Result<std::string> text = ApplyChatTemplate(format, masked, masked_options);
  if (!text.ok()) return BadField("messages", text.status().message());
  ids->clear();
  size_t pos = 0;
  auto append = [&](std::string_view piece, bool added) -> std::optional<ApiError> {
    Result<std::vector<int32_t>> part = tokenizer.Encode(piece, {.parse_added_tokens = added});
    if (!part.ok()) return BadField("messages", part.status().message());
    ids->insert(ids->end(), part->begin(), part->end());
    return std::nullopt;
  };
  while (true) {
    const size_t open = text->find(marker, pos);
    if (open == std::string::npos) return append(std::string_view(*text).substr(pos), true);
    if (auto e = append(std::string_view(*text).substr(pos, open - pos), true)) return e;
    const size_t index_start = open + marker.size();
    const size_t close = text->find(marker, index_start);
    size_t index = 0;
    std::from_chars(text->data() + index_start, text->data() + close, index);
    // The content as the template writes it (trimmed in some formats), or the tool's
    // definition, as plain text.
    const std::string verbatim =
        index < messages.size() ? ContentAsRendered(format, messages[index])
                                : ToolAsRendered(format, options.tools[index - messages.size()]);
    if (auto e = append(verbatim, false)) return e;
    pos = close + marker.size();
  }
}

// The completion prompt's ids as given (ParseApiRequest bounded them to 32 bits), or its text
// encoded.
std::optional<ApiError> CompletionPrompt(const ApiRequest& request, const Tokenizer& tokenizer,
                                         std::vector<int32_t>* ids) {
  if (request.prompt_is_ids) {
    ids->assign(request.prompt_ids.begin(), request.prompt_ids.end());
    return std::nullopt;
  }
  Result<std::vector<int32_t>> encoded = tokenizer.Encode(request.prompt_text);
  if (!encoded.ok()) return BadField("prompt", encoded.status().message());
  *ids = std::move(encoded).value();
  return std::nullopt;
}

ApiError ContextExceeded(const std::string& param, const std::string& message) {
  ApiError e = BadField(param, message);
  e.code = "context_length_exceeded";
  return e;
}

// A missing max_tokens: the default, capped by the room the prompt leaves (at least 1, so that a
// prompt that leaves none is refused by Engine::CheckRequest as the prompt's fault).
int32_t DefaultMaxTokens(const ModelInfo& model, int64_t prompt_len) {
  const int64_t room = std::max<int64_t>(1, model.max_request_tokens - prompt_len);
  return static_cast<int32_t>(std::min<int64_t>(model.default_max_tokens, room));
}

// Refuses text too long to tokenize (kMaxPromptBytesPerToken).
std::optional<ApiError> CheckPromptBytes(const ApiRequest& request, const ModelInfo& model,
                                         const std::string& input) {
  const int64_t bytes = PromptTextBytes(request);
  const int64_t limit = kMaxPromptBytesPerToken * model.context_length;
  if (bytes <= limit) return std::nullopt;
  return ContextExceeded(input, "the prompt text has " + std::to_string(bytes) +
                                    " bytes, more than the " + std::to_string(limit) + " bytes (" +
                                    std::to_string(kMaxPromptBytesPerToken) + " per token of the " +
                                    std::to_string(model.context_length) +
                                    "-token context) that are tokenized");
}

}  // namespace

int64_t PromptTextBytes(const ApiRequest& request) {
  if (request.endpoint == Endpoint::kCompletions) {
    return request.prompt_is_ids ? 0 : static_cast<int64_t>(request.prompt_text.size());
  }
  int64_t bytes = 0;
  for (const ChatMessage& m : request.messages) {
    bytes += static_cast<int64_t>(m.content.size());
    if (m.reasoning_content) bytes += static_cast<int64_t>(m.reasoning_content->size());
    for (const ChatToolCall& call : m.tool_calls) {
      bytes += static_cast<int64_t>(call.name.size() + call.arguments.size());
    }
  }
  for (const std::string& tool : request.tools) bytes += static_cast<int64_t>(tool.size());
  return bytes;
}

// Under tool_choice "auto" with a strict tool (or any, --hold-tool-calls all), the calls held
// (server/tool_choice.h), unless the
// answer is already held (response_format) or could not end where a call does (min_tokens, or
// no stop id: the engine refuses JSON mode's rules there).
std::optional<ApiError> HoldStrictCalls(const ApiRequest& request, const ModelInfo& model,
                                        ChatFormat format, GenerationParams* p) {
  LogitRules& rules = p->sampling.rules;
  if (request.tool_choice != ToolChoice::kAuto || request.tools.empty() ||
      rules.json_schema != nullptr || rules.min_tokens > 0 || p->stop_ids.empty()) {
    return std::nullopt;
  }
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  for (const std::string& tool : request.tools) {
    tools.push_back(nlohmann::ordered_json::parse(tool));
  }
  return HeldCallsSchema(tools, format, &rules.json_schema,
                         {.tools = model.hold_tool_calls, .parallel = request.parallel_tool_calls});
}

std::optional<ApiError> EncodeChat(const std::vector<ChatMessage>& messages,
                                   const Tokenizer& tokenizer, std::vector<int32_t>* ids,
                                   const ChatTemplateOptions& options) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsVerbatim(messages[i])) continue;
    Result<bool> spells = SpellsAddedToken(tokenizer, messages[i].content);
    if (!spells.ok()) {
      return BadField("messages[" + std::to_string(i) + "].content", spells.status().message());
    }
    if (*spells) return EncodeChatSegmented(messages, tokenizer, ids, options);
  }
  for (size_t i = 0; i < options.tools.size(); ++i) {
    Result<bool> spells = SpellsAddedToken(tokenizer, options.tools[i]);
    if (!spells.ok()) {
      return BadField("tools[" + std::to_string(i) + "]", spells.status().message());
    }
    if (*spells) return EncodeChatSegmented(messages, tokenizer, ids, options);
  }
  Result<std::string> text = ApplyChatTemplate(ChatFormatOf(tokenizer), messages, options);
  if (!text.ok()) return BadField("messages", text.status().message());
  Result<std::vector<int32_t>> encoded = tokenizer.Encode(*text);
  if (!encoded.ok()) return BadField("messages", encoded.status().message());
  *ids = std::move(encoded).value();
  return std::nullopt;
}

std::optional<ApiError> CheckModelName(const std::string& name, const ModelInfo& model) {
  if (name == model.name) return std::nullopt;
  return ApiError{.status = 404,
                  .message = "The model \"" + name + "\" does not exist; this server serves \"" +
                             model.name + "\"",
                  .param = "model",
                  .code = "model_not_found"};
}

std::optional<ApiError> PrepareRequest(const ApiRequest& request, const Tokenizer& tokenizer,
                                       const ModelInfo& model, uint64_t seed,
                                       PreparedRequest* out) {
  if (auto e = CheckModelName(request.model, model)) return e;
  const bool chat = request.endpoint != Endpoint::kCompletions;
  const std::string input = chat ? "messages" : "prompt";
  std::optional<ApiError> error = CheckPromptBytes(request, model, input);
  if (error) return error;
  error = chat ? EncodeChat(request.messages, tokenizer, &out->prompt,
                            {.enable_thinking = request.enable_thinking, .tools = request.tools})
               : CompletionPrompt(request, tokenizer, &out->prompt);
  if (error) return error;

  GenerationParams& p = out->params;
  p.max_tokens = request.max_tokens
                     ? static_cast<int32_t>(*request.max_tokens)
                     : DefaultMaxTokens(model, static_cast<int64_t>(out->prompt.size()));
  // What the request leaves out: the model's recommendation, else OpenAI's default.
  const SamplingDefaults& model_says = model.sampling_defaults;
  p.sampling = {.temperature = request.temperature.value_or(model_says.temperature.value_or(1.0f)),
                .top_k = request.top_k.value_or(model_says.top_k.value_or(0)),
                .top_p = request.top_p.value_or(model_says.top_p.value_or(1.0f)),
                .min_p = request.min_p.value_or(model_says.min_p.value_or(0.0f)),
                .seed = request.seed.value_or(seed),
                .rules = request.rules};
  p.sampling.rules.repetition_penalty =
      request.repetition_penalty.value_or(model_says.repetition_penalty.value_or(1.0f));
  if (!request.ignore_eos) {
    p.stop_ids = model.stop_ids;
    if (chat) {
      p.stop_ids.insert(p.stop_ids.end(), model.chat_stop_ids.begin(), model.chat_stop_ids.end());
    }
  }
  p.stop_ids.insert(p.stop_ids.end(), request.stop_token_ids.begin(), request.stop_token_ids.end());
  if (chat && (error = HoldStrictCalls(request, model, ChatFormatOf(tokenizer), &p))) return error;
  // With thinking on (in a format with a reasoning block), JSON mode holds the answer after it.
  const std::string_view reasoning_close = TraitsOf(ChatFormatOf(tokenizer)).reasoning_close;
  if (p.sampling.rules.json_schema != nullptr && chat && request.enable_thinking) {
    p.sampling.rules.reasoning_end = reasoning_close;
  }
  if (chat && request.enable_thinking && !reasoning_close.empty()) {
    out->reasoning_close_token = tokenizer.AddedTokenId(reasoning_close);
  }
  // A thinking budget needs the block's closing token; without thinking it bounds nothing.
  if (request.thinking_token_budget && out->reasoning_close_token) {
    p.sampling.rules.reasoning_budget = *request.thinking_token_budget;
    p.sampling.rules.reasoning_close_token = *out->reasoning_close_token;
  }
  p.stop_strings = request.stop;
  p.logprobs = {.enabled = request.logprobs, .top = request.top_logprobs};
  return std::nullopt;
}

}  // namespace dscale::server
