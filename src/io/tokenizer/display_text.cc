#include "io/tokenizer/display_text.h"

#include <vector>

#include "io/tokenizer/utf8.h"

namespace dscale {

std::string DisplayText(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                        const DecodeOptions& options) {
  std::vector<int32_t> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (tokenizer.TokenBytes(id) != nullptr) tokens.push_back(id);
  }
  Result<std::string> text = tokenizer.Decode(tokens, options);
  DSCALE_CHECK(text.ok());  // every id was checked to be a token
  return utf8::ToValidUtf8(*text);
}

}  // namespace dscale
