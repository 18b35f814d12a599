#pragma once
// A chat output's reasoning split from its answer as it streams (chat requests with thinking on,
// in a format with a reasoning block: ChatFormatTraits): the text between its markers (the Qwen
// formats' "<think>" and "</think>") is the reasoning, returned as
// reasoning_content as vLLM's and SGLang's reasoning parsers and llama.cpp return it; what
// follows is the answer. Where the generation prompt already opened the block (Qwen3.5's with
// thinking on) the output starts inside it; else a "<think>" at its very start opens it, and an
// output that starts otherwise is all answer. The reasoning loses its newlines at both ends and
// the answer those at its start, as the templates strip them when the turn is sent back
// (chat_text::SplitThinking), so a reply returned in the history renders as the model wrote it.
// An output cut off inside its reasoning is all reasoning. Nothing sent is taken back: text that
// could be the start of a marker, and newlines that could end the reasoning, are held.
// Not thread-safe: one per choice.

#include <string>
#include <string_view>

#include "io/tokenizer/chat_format.h"

namespace dscale::server {

class ReasoningStream {
 public:
  struct Piece {
    std::string reasoning;
    std::string answer;
  };

  // `format`'s markers, and whether its prompt ends inside the block; it has one.
  explicit ReasoningStream(const ChatFormatTraits& format);

  Piece Push(std::string_view text);
  Piece Finish();

 private:
  enum class State { kStart, kReasoning, kAnswerStart, kAnswer };
  void Scan(bool final, Piece* piece);

  std::string_view open_;
  std::string_view close_;
  State state_;
  std::string pending_;
  bool reasoning_begun_ = false;  // leading newlines of the reasoning are dropped until then
};

}  // namespace dscale::server
