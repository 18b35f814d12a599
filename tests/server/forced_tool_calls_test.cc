// A forced tool_choice's answer returned as calls (server/forced_tool_calls.h).

#include "server/forced_tool_calls.h"

#include <gtest/gtest.h>

#include <string>

#include "server/chat_output.h"

namespace dscale::server {
namespace {

TEST(ForcedToolCallsTest, ANamedFunctionsArgumentsAreItsOneCall) {
  ForcedToolCalls forced("get_weather", 7);
  forced.Push("\n{\"city\": ");
  forced.Push("\"Oslo\"}");
  const ToolCallStream::Piece piece = forced.Finish();
  EXPECT_EQ(piece.content, "");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].call.name, "get_weather");
  EXPECT_EQ(piece.calls[0].call.arguments, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(piece.calls[0].id, ToolCallId(7, 0));
  EXPECT_EQ(forced.calls(), 1);
  // Cut off: the arguments written so far.
  ForcedToolCalls cut("f", 7);
  cut.Push("{\"a\": [1, ");
  EXPECT_EQ(cut.Finish().calls.at(0).call.arguments, "{\"a\": [1, ");
}

TEST(ForcedToolCallsTest, RequiredsArrayIsItsCallsInOrder) {
  ForcedToolCalls forced("", 3);
  forced.Push(R"([{"name": "now", "parameters": {}}, {"name": "get_weather", "parameters":)");
  forced.Push(R"( {"city": "Oslo", "unit": "C"}}])");
  const ToolCallStream::Piece piece = forced.Finish();
  ASSERT_EQ(piece.calls.size(), 2u);
  EXPECT_EQ(piece.calls[0].call.name, "now");
  EXPECT_EQ(piece.calls[0].call.arguments, "{}");
  EXPECT_EQ(piece.calls[1].call.name, "get_weather");
  EXPECT_EQ(piece.calls[1].call.arguments, R"({"city":"Oslo","unit":"C"})");  // members in order
  EXPECT_NE(piece.calls[0].id, piece.calls[1].id);
  // Cut off before the array closed: content.
  ForcedToolCalls cut("", 3);
  cut.Push(R"([{"name": "now", "par)");
  const ToolCallStream::Piece text = cut.Finish();
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
  EXPECT_TRUE(first.calls.empty());
  EXPECT_TRUE(output.Push(": 1}").calls.empty());
  const ChatOutput::Piece last = output.Finish();
  ASSERT_EQ(last.calls.size(), 1u);
  EXPECT_EQ(last.calls[0].call.arguments, "{\"x\": 1}");
  EXPECT_EQ(output.calls(), 1);
}

}  // namespace
}  // namespace dscale::server
