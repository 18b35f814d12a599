// Qwen3.5's chat format (Qwen3.6 ships the same template). Each expected string is what the
// chat_template.jinja of the published Qwen3.5 / Qwen3.6 checkpoints renders for those messages
// (Jinja with Hugging Face's trim_blocks and lstrip_blocks, text content, no tools), and each
// refusal is one the template raises. The format is told from Qwen3's by the template the
// tokenizer folder ships.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/tokenizer/bpe_vocab.h"
#include "io/tokenizer/chat_format.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace dscale {
namespace {

std::string Render(const std::vector<ChatMessage>& messages, ChatTemplateOptions options = {}) {
  Result<std::string> text = ApplyQwen3_5ChatTemplate(messages, options);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

constexpr char kThinkingOff[] = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
constexpr char kThinkingOn[] = "<|im_start|>assistant\n<think>\n";

// Content is trimmed; thinking off closes an empty block, thinking on opens one.
TEST(Qwen3_5ChatTemplateTest, TrimsContentAndOpensOrClosesTheThinkingBlock) {
  EXPECT_EQ(Render({{"system", "  You are helpful.\n"}, {"user", " Hi there \n"}}),
            std::string("<|im_start|>system\nYou are helpful.<|im_end|>\n"
                        "<|im_start|>user\nHi there<|im_end|>\n") +
                kThinkingOff);
  EXPECT_EQ(Render({{"user", "Hi"}}, {.enable_thinking = true}),
            std::string("<|im_start|>user\nHi<|im_end|>\n") + kThinkingOn);
  EXPECT_EQ(Render({{"user", "Hi"}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nHi<|im_end|>\n");
}

// Turns before the last query drop their reasoning; turns after it always show a block (its
// reasoning trimmed), an empty one too, unlike Qwen3's template.
TEST(Qwen3_5ChatTemplateTest, ReasoningAfterTheLastQueryOnly) {
  const ChatTemplateOptions no_prompt = {.add_generation_prompt = false};
  EXPECT_EQ(Render({{"user", "Q1"},
                    {"assistant", "<think>\nr1\n</think>\n\nA1"},
                    {"user", "Q2"},
                    {"assistant", "<think>\n r2 \n</think>\n\nA2 "}},
                   no_prompt),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n");
  EXPECT_EQ(Render({{"user", "Q1"}, {"assistant", "plain answer"}}, no_prompt),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nplain answer<|im_end|>\n");
  EXPECT_EQ(Render({{"user", "Q1"}, {"assistant", "A1", "  why \n"}}, no_prompt),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nwhy\n</think>\n\nA1<|im_end|>\n");
}

TEST(Qwen3_5ChatTemplateTest, ToolResultsShareOneUserTurn) {
  EXPECT_EQ(Render({{"user", "Q"},
                    {"assistant", "call"},
                    {"tool", " r1 "},
                    {"tool", "r2"},
                    {"assistant", "done"}}),
            std::string("<|im_start|>user\nQ<|im_end|>\n"
                        "<|im_start|>assistant\n<think>\n\n</think>\n\ncall<|im_end|>\n"
                        "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n"
                        "<tool_response>\nr2\n</tool_response><|im_end|>\n"
                        "<|im_start|>assistant\n<think>\n\n</think>\n\ndone<|im_end|>\n") +
                kThinkingOff);
  // A tool result first in the list opens no turn (the template's loop.previtem is undefined).
  EXPECT_EQ(Render({{"tool", "r0"}, {"user", "Q"}}),
            std::string("\n<tool_response>\nr0\n</tool_response><|im_end|>\n"
                        "<|im_start|>user\nQ<|im_end|>\n") +
                kThinkingOff);
}

TEST(Qwen3_5ChatTemplateTest, RefusesWhatTheTemplateRaisesOn) {
  auto message_of = [](const std::vector<ChatMessage>& messages) {
    const Result<std::string> text = ApplyQwen3_5ChatTemplate(messages);
    EXPECT_FALSE(text.ok());
    return text.ok() ? std::string() : std::string(text.status().message());
  };
  EXPECT_NE(message_of({{"user", "Q"}, {"system", "late"}}).find("messages[1].role"),
            std::string::npos);
  EXPECT_NE(message_of({{"system", "s"}}).find("no user query"), std::string::npos);
  EXPECT_NE(message_of({{"user", "<tool_response>x</tool_response>"}}).find("no user query"),
            std::string::npos);
  EXPECT_NE(message_of({}).find("at least one message"), std::string::npos);
  EXPECT_NE(message_of({{"user", "Q"}, {"narrator", "b"}}).find("messages[1].role"),
            std::string::npos);
}

// The format follows the template the tokenizer folder ships: Qwen3.5's (tokenizer_config.json's
// chat_template, or chat_template.jinja) makes a Qwen3-token tokenizer speak Qwen3.5's format;
// Qwen3's folder stays Qwen3's.
TEST(Qwen3_5ChatTemplateTest, TheShippedTemplateChoosesTheFormat) {
  const Tokenizer qwen3 = Tokenizer::Load(testing::kQwen3TokenizerDir).value();
  EXPECT_FALSE(qwen3.chat_template().empty());
  EXPECT_EQ(ChatFormatOf(qwen3), ChatFormat::kQwen3);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("dscale_qwen3_5_format_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"vocab.json", "merges.txt", "added_tokens.json"}) {
    std::filesystem::copy_file(testing::kQwen3TokenizerDir / name, dir / name);
  }
  // The generation prompt's statements of Qwen3.5's template, as its file spells them.
  const std::string tail =
      "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
      "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
      "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- else %}\n"
      "        {{- '<think>\\n' }}\n    {%- endif %}\n{%- endif %}";
  { std::ofstream(dir / "chat_template.jinja") << tail; }
  const Tokenizer from_jinja = Tokenizer::Load(dir).value();
  EXPECT_EQ(from_jinja.chat_template(), tail);
  EXPECT_EQ(ChatFormatOf(from_jinja), ChatFormat::kQwen3_5);
  EXPECT_EQ(TraitsOf(ChatFormat::kQwen3_5).name, "qwen3.5");
  EXPECT_EQ(EndOfTurnTokenIds(from_jinja), EndOfTurnTokenIds(qwen3));

  std::filesystem::remove(dir / "chat_template.jinja");
  {
    nlohmann::json config = {
        {"chat_template",
         {{{"name", "tool_use"}, {"template", "x"}}, {{"name", "default"}, {"template", tail}}}}};
    std::ofstream(dir / "tokenizer_config.json") << config.dump();
  }
  EXPECT_EQ(ChatFormatOf(Tokenizer::Load(dir).value()), ChatFormat::kQwen3_5);
  const std::vector<ChatMessage> messages = {{"user", " Hi "}};
  EXPECT_EQ(ApplyChatTemplate(ChatFormat::kQwen3_5, messages).value(),
            ApplyQwen3_5ChatTemplate(messages).value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dscale
