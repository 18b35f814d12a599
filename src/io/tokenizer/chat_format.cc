#include "io/tokenizer/chat_format.h"

#include <array>

#include "io/tokenizer/tokenizer.h"

namespace dscale {
namespace {

// Qwen3's ChatML: "<|im_end|>" closes every turn; "<|endoftext|>" ends a document.
constexpr std::array<std::string_view, 2> kQwen3EndOfTurn = {"<|im_end|>", "<|endoftext|>"};
// Llama 3.x: "<|eot_id|>" closes a turn, "<|eom_id|>" a message that expects a tool's answer.
constexpr std::array<std::string_view, 3> kLlama3Identifying = {"<|start_header_id|>",
                                                                "<|end_header_id|>", "<|eot_id|>"};
constexpr std::array<std::string_view, 2> kLlama3EndOfTurn = {"<|eot_id|>", "<|eom_id|>"};

// Most specific first: the last entry (no identifying tokens) is the default.
constexpr std::array<ChatFormatTraits, 2> kFormats = {{
    {.format = ChatFormat::kLlama3,
     .name = "llama3",
     .identifying_tokens = kLlama3Identifying,
     .end_of_turn_tokens = kLlama3EndOfTurn},
    {.format = ChatFormat::kQwen3,
     .name = "qwen3",
     .identifying_tokens = {},
     .end_of_turn_tokens = kQwen3EndOfTurn},
}};

bool HasAll(const Tokenizer& tokenizer, std::span<const std::string_view> tokens) {
  for (std::string_view token : tokens) {
    if (!tokenizer.AddedTokenId(token)) return false;
  }
  return true;
}

}  // namespace

const ChatFormatTraits& TraitsOf(ChatFormat format) {
  for (const ChatFormatTraits& traits : kFormats) {
    if (traits.format == format) return traits;
  }
  return kFormats.back();
}

ChatFormat ChatFormatOf(const Tokenizer& tokenizer) {
  for (const ChatFormatTraits& traits : kFormats) {
    if (HasAll(tokenizer, traits.identifying_tokens)) return traits.format;
  }
  return kFormats.back().format;
}

std::vector<int32_t> EndOfTurnTokenIds(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (std::string_view token : TraitsOf(ChatFormatOf(tokenizer)).end_of_turn_tokens) {
    if (std::optional<int32_t> id = tokenizer.AddedTokenId(token)) ids.push_back(*id);
  }
  return ids;
}

}  // namespace dscale
