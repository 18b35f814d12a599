// `dscale tokenize` end to end: JSON on stdout, exit codes 0 / 1 (runtime) / 2 (usage).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"

namespace dscale {
namespace {

using RunResult = testing::CommandResult;

// Runs `dscale tokenize --tokenizer <qwen3 test files> <args>`.
RunResult RunTokenize(const std::string& args) {
  return testing::RunDscale("tokenize --tokenizer " + std::string(DSCALE_TEST_DATA_DIR) +
                            "/tokenizer/qwen3 " + args);
}

nlohmann::json ParseLine(const std::string& out) {
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

TEST(TokenizeCliTest, EncodesAndDecodes) {
  RunResult r = RunTokenize("--text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ParseLine(r.out), nlohmann::json::parse(R"({"ids": [9707, 1879]})"));
  r = RunTokenize("--decode --ids 9707,1879");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ParseLine(r.out), nlohmann::json::parse(R"({"text": "Hello world"})"));
}

TEST(TokenizeCliTest, ChatAndFileInput) {
  RunResult r = RunTokenize("--text Hi --chat");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(
      ParseLine(r.out)["ids"],
      nlohmann::json::parse(
          "[151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271]"));
  r = RunTokenize(std::string("--file ") + DSCALE_TEST_DATA_DIR +
                  "/llama_cpp_vocab_tests/ggml-vocab-qwen2.gguf.inp");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GT(ParseLine(r.out)["ids"].size(), 100u);
}

// A cut character decodes to U+FFFD so that the output stays valid JSON.
TEST(TokenizeCliTest, DecodingPartOfACharacterStaysValidJson) {
  RunResult r = RunTokenize("--decode --ids 9284,104");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ParseLine(r.out)["text"], "\uFFFD");
}

TEST(TokenizeCliTest, UsageErrorsExitWithTwo) {
  for (const char* args : {"", "--text a --file b", "--decode", "--decode --ids 1 --text a",
                           "--ids 1 --text a", "--decode --ids 1,x", "--no-such-option"}) {
    const RunResult r = RunTokenize(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_FALSE(r.out.empty()) << args;
  }
}

TEST(TokenizeCliTest, RuntimeErrorsExitWithOne) {
  RunResult r = RunTokenize("--decode --ids 999999");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("dscale tokenize: ids[0] = 999999 is not a token id"), std::string::npos);
  r = RunTokenize("--text \"$(printf '\\377')\"");  // /bin/sh: no $'...' quoting
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("not valid UTF-8"), std::string::npos) << r.out;
  r = RunTokenize("--file /nonexistent/prompt.txt");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/prompt.txt: cannot open: No such file"), std::string::npos)
      << r.out;
  // A device is refused before it is read (it would grow without bound).
  r = RunTokenize("--file /dev/zero");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("/dev/zero: not a regular file"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dscale
