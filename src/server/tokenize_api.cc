#include "server/tokenize_api.h"

#include <vector>

#include "server/logprobs_json.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_json.h"

namespace dscale::server {

std::optional<ApiError> TokenizeReply(std::string_view body, const Tokenizer& tokenizer,
                                      const ModelInfo& model, std::string* reply) {
  request_json::Ordered sent;
  if (auto e = request_json::ReadBody(body, &sent)) return e;
  bool token_strs = false;
  if (const request_json::Ordered* v = request_json::Member(sent, "return_token_strs")) {
    if (!v->is_boolean())
      return BadField("return_token_strs", "expected a boolean" + request_json::Got(*v));
    token_strs = v->get<bool>();
  }
  sent.erase("return_token_strs");
  const Endpoint endpoint =
      sent.contains("messages") ? Endpoint::kChatCompletions : Endpoint::kCompletions;
  ApiRequest api;
  if (auto e = ParseApiRequest(endpoint, Dump(sent), &api)) return e;
  PreparedRequest prepared;
  if (auto e = PrepareRequest(api, tokenizer, model, /*seed=*/0, &prepared)) return e;
  ResponseJson strs = nullptr;
  if (token_strs) {
    strs = ResponseJson::array();
    for (const int32_t id : prepared.prompt) {
      const std::string* bytes = tokenizer.TokenBytes(id);
      strs.push_back(bytes == nullptr ? ResponseJson(nullptr) : ResponseJson(TokenString(*bytes)));
    }
  }
  *reply = Dump(ResponseJson{{"count", prepared.prompt.size()},
                             {"max_model_len", model.context_length},
                             {"tokens", prepared.prompt},
                             {"token_strs", std::move(strs)}});
  return std::nullopt;
}

std::optional<ApiError> DetokenizeReply(std::string_view body, const Tokenizer& tokenizer,
                                        const ModelInfo& model, std::string* reply) {
  request_json::Ordered sent;
  if (auto e = request_json::ReadBody(body, &sent)) return e;
  for (const auto& [key, value] : sent.items()) {
    if (key != "model" && key != "tokens") return BadField(key, "unrecognized request argument");
  }
  const request_json::Ordered& name = sent["model"];  // ReadBody: there
  if (!name.is_string()) return BadField("model", "expected a string" + request_json::Got(name));
  if (auto e = CheckModelName(name.get<std::string>(), model)) return e;
  const request_json::Ordered* tokens = request_json::Member(sent, "tokens");
  if (tokens == nullptr || !tokens->is_array())
    return BadField("tokens", "expected a list of token ids");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const request_json::Ordered& id = (*tokens)[i];
    if (!id.is_number_integer() || id < 0 || id >= tokenizer.id_limit() ||
        tokenizer.TokenBytes(id.get<int32_t>()) == nullptr) {
      return BadField(request_json::Index("tokens", i),
                      "expected a token id of this model's tokenizer" + request_json::Got(id));
    }
    ids.push_back(id.get<int32_t>());
  }
  Result<std::string> text = tokenizer.Decode(ids);
  if (!text.ok()) return BadField("tokens", text.status().message());
  *reply = Dump(ResponseJson{{"prompt", *text}});
  return std::nullopt;
}

}  // namespace dscale::server
