// A chat output's reasoning split from its answer as it streams: the same split however the text
// arrives, and the newlines the templates strip when the turn comes back.

#include "server/reasoning_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/tokenizer/chat_template_text.h"

namespace dscale::server {
namespace {

ReasoningStream::Piece Split(bool opened, const std::string& text,
                             const std::vector<size_t>& cuts = {}) {
  ReasoningStream stream(TraitsOf(opened ? ChatFormat::kQwen3_5 : ChatFormat::kQwen3));
  ReasoningStream::Piece all;
  size_t from = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t to = i < cuts.size() ? cuts[i] : text.size();
    ReasoningStream::Piece piece = stream.Push(text.substr(from, to - from));
    all.reasoning += piece.reasoning;
    all.answer += piece.answer;
    from = to;
  }
  ReasoningStream::Piece rest = stream.Finish();
  all.reasoning += rest.reasoning;
  all.answer += rest.answer;
  return all;
}

TEST(ReasoningStreamTest, SplitsAtTheMarkers) {
  // Qwen3: the output opens the block.
  auto piece = Split(false, "<think>\nFirst, 2 + 2.\n\n</think>\n\nIt is 4.");
  EXPECT_EQ(piece.reasoning, "First, 2 + 2.");
  EXPECT_EQ(piece.answer, "It is 4.");
  // Qwen3.5: the prompt opened it.
  piece = Split(true, "\nFirst, 2 + 2.\n</think>\n\nIt is 4.\n");
  EXPECT_EQ(piece.reasoning, "First, 2 + 2.");
  EXPECT_EQ(piece.answer, "It is 4.\n");
  // An output that does not open a block is all answer; one cut off inside it all reasoning.
  piece = Split(false, "It is <think>4</think>.");
  EXPECT_EQ(piece.reasoning, "");
  EXPECT_EQ(piece.answer, "It is <think>4</think>.");
  piece = Split(false, "<think>\nStill going\n\n");
  EXPECT_EQ(piece.reasoning, "Still going");
  EXPECT_EQ(piece.answer, "");
  piece = Split(false, "<thin");
  EXPECT_EQ(piece.answer, "<thin");
  // An empty block.
  piece = Split(false, "<think>\n\n</think>\n\nHi");
  EXPECT_EQ(piece.reasoning, "");
  EXPECT_EQ(piece.answer, "Hi");
}

// Every cut into two or three pieces gives the whole text's split, and the split is the one the
// templates make of the turn when it comes back (chat_text::SplitThinking).
TEST(ReasoningStreamTest, TheSplitDoesNotDependOnHowTheTextArrivesAndMatchesTheTemplates) {
  const std::vector<std::string> texts = {
      "<think>\nA\n\nB\n</think>\n\nC\n\nD", "<think></think>x", "<think>\n\n\n</think>",
      "<think>a </thin b</think>c",          "no think\n",
  };
  for (const std::string& text : texts) {
    const ReasoningStream::Piece whole = Split(false, text);
    for (size_t i = 0; i <= text.size(); ++i) {
      for (size_t j = i; j <= text.size(); ++j) {
        const ReasoningStream::Piece cut = Split(false, text, {i, j});
        EXPECT_EQ(cut.reasoning, whole.reasoning) << text << " cut at " << i << ", " << j;
        EXPECT_EQ(cut.answer, whole.answer) << text << " cut at " << i << ", " << j;
      }
    }
    if (text.find("</think>") == std::string::npos) continue;
    const chat_text::SplitMessage split = chat_text::SplitThinking(text, std::nullopt);
    EXPECT_EQ(whole.reasoning, split.reasoning) << text;
    EXPECT_EQ(whole.answer, split.answer) << text;
  }
}

}  // namespace
}  // namespace dscale::server
