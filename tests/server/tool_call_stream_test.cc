// A chat output split into content and calls to tools as it streams: the same split however the
// text arrives, nothing sent that is later taken back, and the text that is no call kept.

#include "server/tool_call_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/tokenizer/chat_json.h"

namespace dscale::server {
namespace {

constexpr ToolCallMarkers kMarkers{.open = "<tool_call>", .close = "</tool_call>"};

ToolCallStream Qwen3Stream() { return ToolCallStream(ChatFormat::kQwen3, kMarkers, {}, 7); }

// The whole text at once.
ToolCallStream::Piece Whole(ToolCallStream stream, const std::string& text) {
  ToolCallStream::Piece piece = stream.Push(text);
  ToolCallStream::Piece rest = stream.Finish();
  piece.content += rest.content;
  piece.calls.insert(piece.calls.end(), rest.calls.begin(), rest.calls.end());
  return piece;
}

// The text cut at `cuts` (byte offsets, ascending).
ToolCallStream::Piece InPieces(ToolCallStream stream, const std::string& text,
                               const std::vector<size_t>& cuts) {
  ToolCallStream::Piece all;
  size_t from = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t to = i < cuts.size() ? cuts[i] : text.size();
    ToolCallStream::Piece piece = stream.Push(text.substr(from, to - from));
    all.content += piece.content;
    all.calls.insert(all.calls.end(), piece.calls.begin(), piece.calls.end());
    from = to;
  }
  ToolCallStream::Piece rest = stream.Finish();
  all.content += rest.content;
  all.calls.insert(all.calls.end(), rest.calls.begin(), rest.calls.end());
  return all;
}

void ExpectSame(const ToolCallStream::Piece& a, const ToolCallStream::Piece& b,
                const std::string& where) {
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << where;
    EXPECT_EQ(a.calls[i].call.name, b.calls[i].call.name) << where;
    EXPECT_EQ(a.calls[i].call.arguments, b.calls[i].call.arguments) << where;
  }
}

const std::string kTwoCalls =
    "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n"
    "</tool_call>\n";

TEST(ToolCallStreamTest, ContentBeforeTheCallsAndTheCallsWithIds) {
  const ToolCallStream::Piece piece = Whole(Qwen3Stream(), kTwoCalls);
  EXPECT_EQ(piece.content, "Let me check.\n\n");
  ASSERT_EQ(piece.calls.size(), 2u);
  EXPECT_EQ(piece.calls[0].call.name, "get_weather");
  EXPECT_EQ(piece.calls[0].call.arguments, R"({"city": "Paris"})");
  EXPECT_EQ(piece.calls[1].call.name, "now");
  EXPECT_EQ(piece.calls[1].call.arguments, "{}");
  for (const ToolCall& call : piece.calls) {
    EXPECT_EQ(call.id.size(), 5u + 24u);
    EXPECT_TRUE(call.id.starts_with("call_")) << call.id;
  }
  EXPECT_NE(piece.calls[0].id, piece.calls[1].id);
  // Another seed (another request or choice), other ids.
  EXPECT_NE(Whole(ToolCallStream(ChatFormat::kQwen3, kMarkers, {}, 8), kTwoCalls).calls[0].id,
            piece.calls[0].id);
}

// Every way of cutting the text into two or three pieces gives what the whole text gives.
TEST(ToolCallStreamTest, TheSplitDoesNotDependOnHowTheTextArrives) {
  const std::vector<std::string> texts = {
      kTwoCalls,
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
      "a <tool_call> b",                      // never closed: content
      "x <tool_call>not json</tool_call> y",  // not a call: content
      "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> and then text",
      "less < than, <tool_ and <tool_callx",
  };
  for (const std::string& text : texts) {
    const ToolCallStream::Piece whole = Whole(Qwen3Stream(), text);
    for (size_t i = 0; i <= text.size(); ++i) {
      ExpectSame(InPieces(Qwen3Stream(), text, {i}), whole, text + " cut at " + std::to_string(i));
      for (size_t j = i; j <= text.size(); j += 3) {
        ExpectSame(InPieces(Qwen3Stream(), text, {i, j}), whole, text);
      }
    }
  }
}

// What could still open a call is held, and released once it cannot; a call's text waits for
// its end.
TEST(ToolCallStreamTest, HoldsOnlyWhatCouldOpenACall) {
  ToolCallStream stream = Qwen3Stream();
  EXPECT_EQ(stream.Push("Hello <tool").content, "Hello ");
  EXPECT_EQ(stream.Push("box").content, "<toolbox");
  EXPECT_EQ(stream.Push("<tool_call>{\"name\": \"f\", ").content, "");
  const ToolCallStream::Piece piece = stream.Push("\"arguments\": {\"a\": 1}}</tool_call>");
  EXPECT_EQ(piece.content, "");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(stream.calls(), 1);
}

TEST(ToolCallStreamTest, WhatIsNoCallStaysText) {
  // Not a call, or never closed: content, markers and all.
  EXPECT_EQ(Whole(Qwen3Stream(), "a<tool_call>{\"x\": 1}</tool_call>b").content,
            "a<tool_call>{\"x\": 1}</tool_call>b");
  EXPECT_EQ(Whole(Qwen3Stream(), "a<tool_call>{\"name\": \"f\"").content,
            "a<tool_call>{\"name\": \"f\"");
  // After a call: whitespace dropped, other text kept.
  const std::string call = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(Whole(Qwen3Stream(), call + "\n\n").content, "");
  EXPECT_EQ(Whole(Qwen3Stream(), call + "\n" + call).content, "");
  EXPECT_EQ(Whole(Qwen3Stream(), call + "\nDone.").content, "\nDone.");
  EXPECT_EQ(Whole(Qwen3Stream(), "no calls at all\n").content, "no calls at all\n");
}

// Llama 3.1's: no markers; an output that opens with "{" is held and is one call if it reads as
// one, any other is content as it comes; the same however the text arrives.
TEST(ToolCallStreamTest, Llama3CallsAreTheWholeOutput) {
  const auto stream = [] {
    return ToolCallStream(ChatFormat::kLlama3, ToolCallMarkersOf(ChatFormat::kLlama3), {}, 3);
  };
  const std::string call = " {\"name\": \"f\", \"parameters\": {\"a\": 1}}";
  ToolCallStream::Piece piece = Whole(stream(), call);
  EXPECT_EQ(piece.content, "");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].call.arguments, R"({"a": 1})");
  EXPECT_EQ(Whole(stream(), "{\"name\": \"f\"} and more").content, "{\"name\": \"f\"} and more");
  ToolCallStream text = stream();
  EXPECT_EQ(text.Push("  ").content, "");
  EXPECT_EQ(text.Push("Hello {").content, "  Hello {");
  EXPECT_EQ(text.Push("x").content, "x");
  for (const std::string& t : {call, std::string("  Hello {x"), std::string("\n\n"),
                               std::string("{\"name\": \"f\", \"parameters\": [1]}")}) {
    const ToolCallStream::Piece whole = Whole(stream(), t);
    for (size_t i = 0; i <= t.size(); ++i) ExpectSame(InPieces(stream(), t, {i}), whole, t);
  }
}

TEST(ToolCallStreamTest, Qwen3_5CallsReadTheirValuesByTheToolsTypes) {
  const std::vector<std::string> tools = {TemplateJson(nlohmann::ordered_json::parse(
      R"({"type": "function", "function": {"name": "get_weather", "parameters": {
          "type": "object", "properties": {"city": {"type": "string"},
                                           "days": {"type": "integer"}}}}})"))};
  const std::string text =
      "I will look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
      "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
  ToolCallStream stream(ChatFormat::kQwen3_5, kMarkers, ToolParameterTypes(tools), 1);
  const ToolCallStream::Piece piece = Whole(std::move(stream), text);
  EXPECT_EQ(piece.content, "I will look.\n\n");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].call.arguments, R"({"city": "Paris", "days": 3})");
}

}  // namespace
}  // namespace dscale::server
