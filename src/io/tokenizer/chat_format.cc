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

// Qwen3.5's and Qwen3.6's chat template opens a reasoning block in its generation prompt when
// thinking is on ({{- '<think>\n' }}, the Jinja string's "\n" as written); Qwen3's has no such
// statement. The tokens are Qwen3's.
constexpr std::string_view kQwen3_5TemplateText = R"({{- '<think>\n' }})";
// The Qwen formats' reasoning block.
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Most specific first: the last entry (no identifying tokens) is the default.
constexpr std::array<ChatFormatTraits, 3> kFormats = {{
    {.format = ChatFormat::kLlama3,
     .name = "llama3",
     .identifying_tokens = kLlama3Identifying,
     .identifying_template_text = {},
     .end_of_turn_tokens = kLlama3EndOfTurn},
    {.format = ChatFormat::kQwen3_5,
     .name = "qwen3.5",
     .identifying_tokens = {},
     .identifying_template_text = kQwen3_5TemplateText,
     .end_of_turn_tokens = kQwen3EndOfTurn,
     .reasoning_open = kThinkOpen,
     .reasoning_close = kThinkClose,
     .prompt_opens_reasoning = true},
    {.format = ChatFormat::kQwen3,
     .name = "qwen3",
     .identifying_tokens = {},
     .identifying_template_text = {},
     .end_of_turn_tokens = kQwen3EndOfTurn,
     .reasoning_open = kThinkOpen,
     .reasoning_close = kThinkClose},
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
    const std::string_view text = traits.identifying_template_text;
    if (HasAll(tokenizer, traits.identifying_tokens) &&
        (text.empty() || tokenizer.chat_template().find(text) != std::string::npos)) {
      return traits.format;
    }
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
