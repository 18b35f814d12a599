#include "server/logprobs_json.h"

#include <cstdio>

#include "io/tokenizer/utf8.h"

namespace dscale::server {
namespace {

std::string BytesOf(int32_t token, const Tokenizer& tokenizer) {
  const std::string* bytes = tokenizer.TokenBytes(token);
  return bytes != nullptr ? *bytes : std::string();
}

ResponseJson ByteList(const std::string& bytes) {
  ResponseJson list = ResponseJson::array();
  for (const char c : bytes) list.push_back(static_cast<unsigned char>(c));
  return list;
}

}  // namespace

std::vector<LogprobEntry> LogprobEntries(std::span<const TokenLogprobs> logprobs,
                                         const Tokenizer& tokenizer) {
  std::vector<LogprobEntry> entries;
  entries.reserve(logprobs.size());
  for (const TokenLogprobs& lp : logprobs) {
    LogprobEntry& e = entries.emplace_back();
    e.bytes = BytesOf(lp.token, tokenizer);
    e.logprob = lp.logprob;
    for (const TopLogprob& t : lp.top) e.top.emplace_back(BytesOf(t.token, tokenizer), t.logprob);
  }
  return entries;
}

std::string TokenString(const std::string& bytes) {
  if (utf8::FindInvalid(bytes) == utf8::kAllValid) return bytes;
  std::string out = "bytes:";
  for (const char c : bytes) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "\\x%02x", static_cast<unsigned char>(c));
    out += hex;
  }
  return out;
}

int64_t TextLength(std::span<const LogprobEntry> entries) {
  int64_t chars = 0;
  for (const LogprobEntry& e : entries) {
    // Every character starts with exactly one byte that is not a continuation byte (10xxxxxx).
    for (const char c : e.bytes) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }
  return chars;
}

ResponseJson ChatLogprobsJson(std::span<const LogprobEntry> entries) {
  ResponseJson content = ResponseJson::array();
  for (const LogprobEntry& e : entries) {
    ResponseJson top = ResponseJson::array();
    for (const auto& [bytes, logprob] : e.top) {
      top.push_back(
          {{"token", TokenString(bytes)}, {"logprob", logprob}, {"bytes", ByteList(bytes)}});
    }
    content.push_back({{"token", TokenString(e.bytes)},
                       {"logprob", e.logprob},
                       {"bytes", ByteList(e.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

ResponseJson CompletionLogprobsJson(std::span<const LogprobEntry> entries, int64_t text_offset) {
  ResponseJson tokens = ResponseJson::array(), token_logprobs = ResponseJson::array(),
               top_logprobs = ResponseJson::array(), offsets = ResponseJson::array();
  for (size_t i = 0; i < entries.size(); ++i) {
    const LogprobEntry& e = entries[i];
    tokens.push_back(TokenString(e.bytes));
    token_logprobs.push_back(e.logprob);
    ResponseJson top = ResponseJson::object();
    for (const auto& [bytes, logprob] : e.top) top[TokenString(bytes)] = logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += TextLength(entries.subspan(i, 1));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace dscale::server
