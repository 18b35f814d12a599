#pragma once
// The chat formats dscale speaks, described once: the added tokens that identify a tokenizer as
// speaking a format (ChatFormatOf), the tokens that end an assistant's turn in it (a chat
// request's stop tokens, EndOfTurnTokenIds), and its reasoning block's markers. A new family's
// format is one more entry in chat_format.cc's table, beside its template (chat_template.h).

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace dscale {

enum class ChatFormat { kQwen3, kQwen3_5, kLlama3 };

struct ChatFormatTraits {
  ChatFormat format;
  std::string_view name;
  // Added tokens a tokenizer has only in this format; empty: the format of a tokenizer that has
  // no other's (Qwen3's ChatML).
  std::span<const std::string_view> identifying_tokens;
  // Text the checkpoint's chat template (Tokenizer::chat_template) holds only in this format,
  // for formats whose tokens are another's (Qwen3.5's are Qwen3's); empty: none needed.
  std::string_view identifying_template_text;
  // Added tokens after which the assistant's turn is over (end of turn, end of text, end of a
  // tool call message).
  std::span<const std::string_view> end_of_turn_tokens;
  // The reasoning block's markers (thinking on); empty where the format has none (Llama 3.1's).
  std::string_view reasoning_open;
  std::string_view reasoning_close;
  // With thinking on, the generation prompt opens the block itself: the output starts inside it.
  bool prompt_opens_reasoning = false;

  bool has_reasoning() const { return !reasoning_close.empty(); }
};

const ChatFormatTraits& TraitsOf(ChatFormat format);

class Tokenizer;
// The first format (most specific first) whose identifying tokens `tokenizer` has (all of them)
// and whose identifying template text its chat template holds, else the default one (Qwen3's).
ChatFormat ChatFormatOf(const Tokenizer& tokenizer);
// The ids of its format's end-of-turn tokens that `tokenizer` has, in the table's order.
std::vector<int32_t> EndOfTurnTokenIds(const Tokenizer& tokenizer);

}  // namespace dscale
