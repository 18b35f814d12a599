#pragma once
// vLLM's POST /tokenize and /detokenize (SGLang takes them too): the tokens a prompt becomes on
// this server, and the text of token ids, for clients that count tokens or check a chat format.
//   /tokenize    a completions body ({"model", "prompt"}: text or ids) or a chat body ({"model",
//                "messages", "tools", "chat_template_kwargs", ...}: the chat format's prompt,
//                generation prompt and all), each field as the generation routes take it, and
//                "return_token_strs" → {"count", "max_model_len", "tokens", "token_strs": the
//                tokens' strings as logprobs name them, or null}
//   /detokenize  {"model", "tokens": [ids]} → {"prompt": their text}
// Errors are the generation routes' (the field named; 404 for another model).

#include <optional>
#include <string>
#include <string_view>

#include "io/tokenizer/tokenizer.h"
#include "server/api_error.h"
#include "server/prompt_builder.h"

namespace dscale::server {

std::optional<ApiError> TokenizeReply(std::string_view body, const Tokenizer& tokenizer,
                                      const ModelInfo& model, std::string* reply);
std::optional<ApiError> DetokenizeReply(std::string_view body, const Tokenizer& tokenizer,
                                        const ModelInfo& model, std::string* reply);

}  // namespace dscale::server
