// Llama 3.1 chat formatting. Each expected string is worked out by hand from the Llama 3.1
// Instruct checkpoints' Jinja template (no tools, its default date), following the branch the
// template takes for those messages; and the format is chosen by the tokenizer's added tokens.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/tokenizer/bpe_vocab.h"
#include "io/tokenizer/byte_level.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace dscale {
namespace {

std::string Render(const std::vector<ChatMessage>& messages, ChatTemplateOptions options = {}) {
  Result<std::string> text = ApplyLlama3ChatTemplate(messages, options);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

constexpr char kDates[] = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
constexpr char kPrompt[] = "<|start_header_id|>assistant<|end_header_id|>\n\n";

TEST(Llama3ChatTemplateTest, UserAloneGetsTheSystemTurnWithTheDates) {
  EXPECT_EQ(Render({{"user", "What is 7 * 8?"}}),
            std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n") +
                kDates +
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 7 * 8?<|eot_id|>" +
                kPrompt);
}

// A conversation: the leading system message after the dates, every content trimmed (Python's
// str.strip(), U+3000 included), a tool result as an ipython turn holding it as a JSON string
// (the template's tojson of the content), a later system
// message as an ordinary turn, thinking options ignored.
TEST(Llama3ChatTemplateTest, AConversation) {
  const std::vector<ChatMessage> messages = {
      {"system", "  Be brief.\n"},
      {"user", "\u3000Hi \xf0\x9f\x98\x80\n\n"},
      {"assistant", "Hello!", "thinking that is dropped"},
      {"tool", " {\"x\": 1}\n"},
      {"system", "Answer in French."},
      {"user", "Bye"},
  };
  EXPECT_EQ(Render(messages, {.enable_thinking = true}),
            std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n") +
                kDates + "Be brief.<|eot_id|>" +
                "<|start_header_id|>user<|end_header_id|>\n\nHi \xf0\x9f\x98\x80<|eot_id|>" +
                "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
                "<|start_header_id|>ipython<|end_header_id|>\n\n\" {\\\"x\\\": 1}\\n\"<|eot_id|>" +
                "<|start_header_id|>system<|end_header_id|>\n\nAnswer in French.<|eot_id|>" +
                "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" + kPrompt);
  EXPECT_EQ(Render({{"user", "x"}}, {.add_generation_prompt = false}),
            std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n") +
                kDates + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
}

TEST(Llama3ChatTemplateTest, BadMessagesAreRefusedByName) {
  EXPECT_FALSE(ApplyLlama3ChatTemplate({}).ok());
  const std::vector<ChatMessage> bad = {{"user", "a"}, {"narrator", "b"}};
  const Result<std::string> text = ApplyLlama3ChatTemplate(bad);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("messages[1].role"), std::string::npos)
      << text.status().message();
}

// The format follows the tokenizer: Qwen3's files have no <|start_header_id|>; a byte-level
// vocabulary with Llama 3's header and end-of-turn tokens speaks Llama 3's, and encodes the
// rendered prompt's control text as those tokens.
TEST(Llama3ChatTemplateTest, TheTokenizerChoosesTheFormat) {
  Result<Tokenizer> qwen = Tokenizer::Load(testing::kQwen3TokenizerDir);
  ASSERT_TRUE(qwen.ok()) << qwen.status().ToString();
  EXPECT_EQ(ChatFormatOf(*qwen), ChatFormat::kQwen3);
  // Its end-of-turn tokens: <|im_end|> and <|endoftext|>, as the tokenizer numbers them.
  EXPECT_EQ(EndOfTurnTokenIds(*qwen), (std::vector<int32_t>{*qwen->AddedTokenId("<|im_end|>"),
                                                            *qwen->AddedTokenId("<|endoftext|>")}));
  BpeVocab vocab;
  for (int b = 0; b < 256; ++b) {
    std::string spelled;
    const char byte = static_cast<char>(b);
    byte_level::AppendEncoded(std::string_view(&byte, 1), &spelled);
    vocab.vocab.emplace_back(spelled, b);
  }
  vocab.nfc = false;
  vocab.added_tokens = {{"<|begin_of_text|>", 256, true},
                        {"<|start_header_id|>", 257, true},
                        {"<|end_header_id|>", 258, true},
                        {"<|eot_id|>", 259, true}};
  Result<Tokenizer> llama = Tokenizer::FromVocab(vocab);
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(ChatFormatOf(*llama), ChatFormat::kLlama3);
  EXPECT_EQ(EndOfTurnTokenIds(*llama), std::vector<int32_t>{259});  // no <|eom_id|> here
  EXPECT_EQ(TraitsOf(ChatFormat::kLlama3).name, "llama3");
  const std::vector<int32_t> ids =
      testing::EncodeOrDie(*llama, Render({{"user", "Hi"}}, {.add_generation_prompt = false}));
  EXPECT_EQ(ids.front(), 256);
  EXPECT_EQ(ids[1], 257);
  EXPECT_EQ(ids.back(), 259);
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(ApplyChatTemplate(ChatFormat::kQwen3, messages).value(),
            ApplyQwen3ChatTemplate(messages).value());
  EXPECT_EQ(ApplyChatTemplate(ChatFormat::kLlama3, messages).value(),
            ApplyLlama3ChatTemplate(messages).value());
}

}  // namespace
}  // namespace dscale
