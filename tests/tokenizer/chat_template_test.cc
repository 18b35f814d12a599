// Qwen3 chat formatting. Each expected string is worked out by hand from
// tests/data/tokenizer/qwen3/chat_template.jinja (the checkpoint's template), following the
// branch the template takes for those messages.

#include "io/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer_test_util.h"

namespace dscale {
namespace {

std::string Render(const std::vector<ChatMessage>& messages, ChatTemplateOptions options = {}) {
  Result<std::string> text = ApplyQwen3ChatTemplate(messages, options);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

// With enable_thinking=false the generation prompt carries an empty think block.
constexpr char kPrompt[] = "<|im_start|>assistant\n<think>\n\n</think>\n\n";

TEST(ChatTemplateTest, SystemAndUser) {
  EXPECT_EQ(Render({{"system", "You are a helpful assistant."}, {"user", "What is 2+2?"}}),
            std::string("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n") +
                kPrompt);
}

TEST(ChatTemplateTest, UserOnly) {
  EXPECT_EQ(Render({{"user", "Hi"}}), std::string("<|im_start|>user\nHi<|im_end|>\n") + kPrompt);
}

// Assistant turns before the last user query lose their <think> part.
TEST(ChatTemplateTest, MultiTurnDropsEarlierReasoning) {
  EXPECT_EQ(Render({{"system", "Be brief."},
                    {"user", "What is 2+2?"},
                    {"assistant", "<think>\nadd them\n</think>\n\n2+2 = 4."},
                    {"user", "And 3+3?"}}),
            std::string("<|im_start|>system\nBe brief.<|im_end|>\n"
                        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                        "<|im_start|>assistant\n2+2 = 4.<|im_end|>\n"
                        "<|im_start|>user\nAnd 3+3?<|im_end|>\n") +
                kPrompt);
  EXPECT_EQ(
      Render(
          {{"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "Tell me a joke."}}),
      std::string("<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
                  "<|im_start|>user\nTell me a joke.<|im_end|>\n") +
          kPrompt);
}

// The last message, an assistant turn after the last query, always gets a think block.
TEST(ChatTemplateTest, FinalAssistantTurnKeepsReasoning) {
  const ChatTemplateOptions no_prompt{.add_generation_prompt = false};
  EXPECT_EQ(Render({{"user", "Q"}, {"assistant", "<think>\nr\n</think>\n\nA"}}, no_prompt),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA"
            "<|im_end|>\n");
  EXPECT_EQ(Render({{"user", "Q"}, {"assistant", "A"}}, no_prompt),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA"
            "<|im_end|>\n");
  EXPECT_EQ(Render({{"user", "Q"}, {"assistant", "A", "\nthought\n"}}, no_prompt),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nthought\n</think>\n\nA"
            "<|im_end|>\n");
  // Reasoning is what lies between the last <think> before the first </think> and that
  // </think>; the answer follows the last </think>.
  EXPECT_EQ(
      Render({{"user", "Q"}, {"assistant", "\n<think>a<think>\nb\n\n</think>mid</think>\n\nans"}},
             no_prompt),
      "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nb\n</think>\n\nans"
      "<|im_end|>\n");
}

TEST(ChatTemplateTest, ToolResponsesAreGroupedIntoOneUserTurn) {
  EXPECT_EQ(
      Render({{"user", "Weather in Paris?"},
              {"assistant", "<think>\nneed tool\n</think>\n\nChecking."},
              {"tool", "sunny"},
              {"tool", "22C"},
              {"assistant", "<think>\ngot it\n</think>\n\nSunny, 22C."}}),
      std::string("<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\nneed tool\n</think>\n\nChecking.<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n"
                  "<tool_response>\n22C\n</tool_response><|im_end|>\n"
                  "<|im_start|>assistant\n<think>\ngot it\n</think>\n\nSunny, 22C.<|im_end|>\n") +
          kPrompt);
  // A user turn that only wraps a tool response is not a query.
  EXPECT_EQ(Render({{"user", "Q"},
                    {"assistant", "<think>\nx\n</think>\n\ncall"},
                    {"user", "<tool_response>\nr\n</tool_response>"},
                    {"assistant", "<think>\ny\n</think>\n\ndone"}},
                   {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nx\n</think>\n\ncall<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\ny\n</think>\n\ndone<|im_end|>\n");
}

TEST(ChatTemplateTest, ThinkingEnabledAndLateSystem) {
  EXPECT_EQ(Render({{"user", "Hi"}}, {.enable_thinking = true}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Render({{"user", "Hi"}, {"system", "Now be formal."}}),
            std::string("<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>system\nNow be formal.<|im_end|>\n") +
                kPrompt);
}

TEST(ChatTemplateTest, RefusesUnknownRolesAndEmptyLists) {
  Result<std::string> bad =
      ApplyQwen3ChatTemplate(std::vector<ChatMessage>{{"user", "a"}, {"robot", "b"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("messages[1].role"), std::string::npos);
  EXPECT_FALSE(ApplyQwen3ChatTemplate(std::vector<ChatMessage>{}).ok());
}

TEST(ChatTemplateTest, FormattedTurnEncodesWithControlTokens) {
  const std::vector<int32_t> expected = {151644, 872, 198,    13048, 151645, 198, 151644,
                                         77091,  198, 151667, 271,   151668, 271};
  EXPECT_EQ(testing::EncodeOrDie(testing::Qwen3Tokenizer(), Render({{"user", "Hi"}})), expected);
}

}  // namespace
}  // namespace dscale
