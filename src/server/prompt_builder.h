#pragma once
// From a validated ApiRequest to what the engine takes: prompt token ids and generation
// parameters. Needs the tokenizer and the model's limits, not the engine, so it runs on the
// HTTP thread and bad requests never reach the engine thread. What it prepares is then checked
// once by the engine's own validation (Engine::CheckRequest, the server's RequestCheck): an empty
// prompt, ids outside the vocabulary, sampling parameters, KV capacity.
//
// Chat prompts are Qwen3's chat format with thinking disabled. The rendered text is encoded
// as the reference does (added tokens matched everywhere), except when the content of a
// system, user or tool message itself spells an added token such as "<|im_end|>": then that
// content is encoded as plain text, so a user cannot inject control tokens.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "io/tokenizer/tokenizer.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/sampling_defaults.h"

namespace dscale::server {

// What the server knows about the model it serves.
struct ModelInfo {
  std::string name;            // the "model" clients must send
  int64_t context_length = 0;  // the model's (/v1/models; the prompt text's byte bound)
  // prompt + max_tokens at most (Engine::MaxRequestTokens: the context, or less when the KV
  // cache holds less for one request). Only a missing max_tokens is derived from it here; the
  // engine's CheckRequest is the one check of a request's length.
  int64_t max_request_tokens = 0;
  int32_t default_max_tokens = 256;    // when a request gives none (then capped by the room left)
  std::vector<int64_t> stop_ids;       // end every request (EOS)
  std::vector<int64_t> chat_stop_ids;  // end chat requests too (end of turn)
  SamplingDefaults sampling_defaults;  // for requests that leave those fields out
  HeldTools hold_tool_calls = HeldTools::kStrict;  // whose calls "auto" holds (tool_choice.h)
};

struct PreparedRequest {
  std::vector<int32_t> prompt;
  GenerationParams params;  // on_tokens is left for the engine loop
  // With thinking on, in a format whose reasoning block closes with an added token: that token
  // (usage counts the output up to it, or all of an output cut off before it, as reasoning).
  std::optional<int32_t> reasoning_close_token;
};

// Prompt text is bounded before it is tokenized: text (a completion prompt, or the chat
// messages' contents and reasoning together) of more than this many bytes per position of the
// context is refused as context_length_exceeded without running the tokenizer. English and
// code average 3 to 5 bytes per token, so text this long would not fit the context either
// unless nearly every token spans 16 bytes or more (long runs of one character), which is what
// an attack sends.
inline constexpr int64_t kMaxPromptBytesPerToken = 16;

// The prompt's text bytes (0 for token ids).
int64_t PromptTextBytes(const ApiRequest& request);

// 404 naming `name` unless it is the served model's.
std::optional<ApiError> CheckModelName(const std::string& name, const ModelInfo& model);

// 404 for another model's name; 400 for a prompt whose text exceeds kMaxPromptBytesPerToken ×
// the context length in bytes or does not tokenize. A missing max_tokens is the default capped
// by the room the prompt leaves; whether prompt + max_tokens fit is Engine::CheckRequest's to
// say. `seed` is used when the request has none.
std::optional<ApiError> PrepareRequest(const ApiRequest& request, const Tokenizer& tokenizer,
                                       const ModelInfo& model, uint64_t seed, PreparedRequest* out);

// The chat prompt's token ids (see the header comment) in the tokenizer's chat format, with
// `options` (thinking on or off). Errors name the message.
std::optional<ApiError> EncodeChat(const std::vector<ChatMessage>& messages,
                                   const Tokenizer& tokenizer, std::vector<int32_t>* ids,
                                   const ChatTemplateOptions& options = {});

}  // namespace dscale::server
