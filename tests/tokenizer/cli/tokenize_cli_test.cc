// `dscale tokenize` end to end: JSON on stdout, exit codes 0 / 1 (runtime) / 2 (usage).

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

// A file in the test's temporary folder holding `contents`; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::vector<nlohmann::json> ParseLines(const std::string& out) {
  std::vector<nlohmann::json> docs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) docs.push_back(ParseLine(line));
  return docs;
}

// --jsonl gives, line by line, what one call per text gives; blank lines are skipped.
TEST(TokenizeCliTest, JsonlEncodesAndDecodesManyInOneCall) {
  const std::string texts = WriteTempFile("texts.jsonl", R"({"text": "Hello world"})"
                                                         "\n\n"
                                                         R"({"text": "Hi", "chat": true})"
                                                         "\n"
                                                         R"({"text": "caf\u00e9 \u4e2d\u6587"})"
                                                         "\n");
  RunResult r = RunTokenize("--jsonl " + texts);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<nlohmann::json> got = ParseLines(r.out);
  const std::vector<std::string> alone = {"--text 'Hello world'", "--text Hi --chat",
                                          "--text 'café 中文'"};
  ASSERT_EQ(got.size(), alone.size()) << r.out;
  for (size_t i = 0; i < alone.size(); ++i) {
    const RunResult one = RunTokenize(alone[i]);
    ASSERT_EQ(one.exit_code, 0) << one.out;
    EXPECT_EQ(got[i], ParseLine(one.out)) << alone[i];
  }

  const std::string ids = WriteTempFile(
      "ids.jsonl", "{\"ids\": [9707, 1879]}\n{\"ids\": [151644, 872]}\n{\"ids\": []}\n");
  r = RunTokenize("--decode --skip-special --jsonl " + ids);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<nlohmann::json> decoded = ParseLines(r.out);
  ASSERT_EQ(decoded.size(), 3u) << r.out;
  EXPECT_EQ(decoded[0]["text"], "Hello world");
  EXPECT_EQ(decoded[1]["text"], "user");
  EXPECT_EQ(decoded[2]["text"], "");
}

// A bad line names the file and the line (PATH:LINE), and ends the run with exit code 1.
TEST(TokenizeCliTest, JsonlBadLinesNameTheFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"a\"}\nnot json\n", ":2: not valid JSON"},
      {"{\"txt\": \"a\"}\n", ":1: expected \"text\" (string)"},
      {"{\"text\": \"a\", \"chat\": 1}\n", ":1: \"chat\": expected true or false, got 1"},
  };
  for (const auto& [contents, message] : cases) {
    const std::string path = WriteTempFile("bad.jsonl", contents);
    const RunResult r = RunTokenize("--jsonl " + path);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(path + message), std::string::npos) << r.out;
  }
  const std::string ids = WriteTempFile("bad_ids.jsonl", "{\"ids\": [1, -3]}\n");
  const RunResult r = RunTokenize("--decode --jsonl " + ids);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find(ids + ":1: \"ids\"[1]: expected an integer in [0, 2147483647], got -3"),
            std::string::npos)
      << r.out;
}

TEST(TokenizeCliTest, UsageErrorsExitWithTwo) {
  for (const char* args :
       {"", "--text a --file b", "--decode", "--decode --ids 1 --text a", "--ids 1 --text a",
        "--decode --ids 1,x", "--no-such-option", "--jsonl f --text a", "--jsonl f --decode --chat",
        "--jsonl f --skip-special"}) {
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
