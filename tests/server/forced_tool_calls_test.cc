// A forced tool_choice's answer returned as calls (server/forced_tool_calls.h).

#include "server/forced_tool_calls.h"

#include <gtest/gtest.h>

#include <string>

#include "server/chat_output.h"

namespace dscale::server {
namespace {

// A named function's call streams: the call at the first text but whitespace, then more of its
// arguments with each piece.
TEST(ForcedToolCallsTest, ANamedFunctionsArgumentsAreItsOneCallAsTheyCome) {
  ForcedToolCalls forced("get_weather", 7);
  EXPECT_TRUE(forced.Push("\n ").calls.empty());
  const ForcedToolCalls::Piece first = forced.Push("\n{\"city\": ");
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].call.name, "get_weather");
  EXPECT_EQ(first.calls[0].call.arguments, "{\"city\": ");
  EXPECT_EQ(first.calls[0].id, ToolCallId(7, 0));
  EXPECT_EQ(first.arguments, "");
  const ForcedToolCalls::Piece more = forced.Push("\"Oslo\"}");
  EXPECT_TRUE(more.calls.empty());
  EXPECT_EQ(more.arguments, "\"Oslo\"}");
  const ForcedToolCalls::Piece rest = forced.Finish();
  EXPECT_TRUE(rest.calls.empty());
  EXPECT_EQ(rest.arguments, "");
  EXPECT_EQ(forced.calls(), 1);
  // An answer of whitespace alone: the call, without arguments.
  ForcedToolCalls blank("f", 7);
  blank.Push(" ");
  EXPECT_EQ(blank.Finish().calls.at(0).call.arguments, "");
}

TEST(ForcedToolCallsTest, RequiredsArrayIsItsCallsInOrder) {
  ForcedToolCalls forced("", 3);
  forced.Push(R"([{"name": "now", "parameters": {}}, {"name": "get_weather", "parameters":)");
  forced.Push(R"( {"city": "Oslo", "unit": "C"}}])");
  const ForcedToolCalls::Piece piece = forced.Finish();
  ASSERT_EQ(piece.calls.size(), 2u);
  EXPECT_EQ(piece.calls[0].call.name, "now");
  EXPECT_EQ(piece.calls[0].call.arguments, "{}");
  EXPECT_EQ(piece.calls[1].call.name, "get_weather");
  EXPECT_EQ(piece.calls[1].call.arguments, R"({"city":"Oslo","unit":"C"})");  // members in order
  EXPECT_NE(piece.calls[0].id, piece.calls[1].id);
  // Cut off before the array closed: content.
  ForcedToolCalls cut("", 3);
  cut.Push(R"([{"name": "now", "par)");
  const ForcedToolCalls::Piece text = cut.Finish();
  EXPECT_TRUE(text.calls.empty());
  EXPECT_EQ(text.content, R"([{"name": "now", "par)");
  EXPECT_EQ(cut.calls(), 0);
}

// Behind the reasoning (thinking on), the answer is the call; nothing is sent before the end.
TEST(ForcedToolCallsTest, TheAnswerAfterTheReasoningIsTheCall) {
  ChatOutput output(ReasoningStream(TraitsOf(ChatFormat::kQwen3)), std::nullopt,
                    ForcedToolCalls("f", 1));
  const ChatOutput::Piece first = output.Push("<think>\nwhy\n</think>\n\n{\"x\"");
  EXPECT_EQ(first.reasoning, "why");
  EXPECT_EQ(first.content, "");
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].call.arguments, "{\"x\"");
  const ChatOutput::Piece more = output.Push(": 1}");
  EXPECT_TRUE(more.calls.empty());
  EXPECT_EQ(more.arguments, ": 1}");
  const ChatOutput::Piece last = output.Finish();
  EXPECT_TRUE(last.calls.empty());
  EXPECT_EQ(output.calls(), 1);
  // All at once (a whole response): the call holds all its arguments.
  ChatOutput whole(std::nullopt, std::nullopt, ForcedToolCalls("f", 1));
  ChatOutput::Piece piece = whole.Push("{\"x\": 1}");
  const ChatOutput::Piece end = whole.Finish();
  EXPECT_EQ(piece.calls.at(0).call.arguments + end.arguments, "{\"x\": 1}");
}

}  // namespace
}  // namespace dscale::server
