// dscale draft-vocab and --draft-vocab end to end through the built binary: the command writes a
// valid subset with EOS in it, generation over it emits plain greedy decoding's tokens, and bad
// files are refused naming the file and the entry.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"

namespace dscale {
namespace {

using testing::RunDscale;

class DraftVocabCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("dscale_draft_vocab_cli_" + std::to_string(::getpid())))
               .string();
    const testing::CommandResult r =
        RunDscale("make-tiny --out " + dir_ + "/target --drafter-out " + dir_ +
                  "/drafter --seed 4 --vocab 97 --hidden 64 --intermediate 96 --layers 3 "
                  "--heads 4 --kv-heads 2 --head-dim 16 --draft-layers 2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ofstream(dir_ + "/corpus.jsonl")
        << "{\"ids\": [5, 5, 5, 7, 7, 9]}\n{\"ids\": [9, 9, 9, 9]}\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Generate(const std::string& flags) {
    const testing::CommandResult r =
        RunDscale("generate --target " + dir_ + "/target --drafter " + dir_ +
                      "/drafter --ids 3,1,4,1,5 --max-tokens 24 --kv-dtype f32 --json " + flags,
                  /*merge_stderr=*/false);
    EXPECT_EQ(r.exit_code, 0) << flags;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j["requests"][0]["output_ids"].dump();
  }

  std::string dir_;
};

TEST_F(DraftVocabCommandTest, WritesASubsetThatGeneratesPlainGreedyTokens) {
  const std::string file = dir_ + "/drafter/draft_vocab.json";
  const testing::CommandResult made =
      RunDscale("draft-vocab --target " + dir_ + "/target --corpus " + dir_ +
                "/corpus.jsonl --size 20 --out " + file);
  ASSERT_EQ(made.exit_code, 0) << made.out;
  EXPECT_NE(made.out.find("20 of 97 tokens"), std::string::npos) << made.out;
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  const auto ids = j["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 20u);
  for (const int32_t counted : {5, 7, 9}) {
    EXPECT_TRUE(std::binary_search(ids.begin(), ids.end(), counted)) << counted;
  }
  const std::string plain = Generate("--spec none");
  EXPECT_EQ(Generate("--spec dflash --draft-vocab subset"), plain);
  EXPECT_EQ(Generate("--spec dflash --draft-vocab full"), plain);
}

TEST_F(DraftVocabCommandTest, BadFilesAndMissingOnesAreRefusedNamingThem) {
  const std::string file = dir_ + "/drafter/draft_vocab.json";
  testing::CommandResult r = RunDscale("generate --target " + dir_ + "/target --drafter " + dir_ +
                                       "/drafter --ids 3,1 --spec dflash --draft-vocab subset");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("draft_vocab.json: missing"), std::string::npos) << r.out;
  std::string ids;
  for (int i = 0; i < 16; ++i) ids += std::to_string(i) + ", ";
  std::ofstream(file) << "{\"format\": \"dscale-draft-vocab\", \"version\": 1, "
                         "\"target_vocab_size\": 97, \"token_ids\": [" +
                             ids + "3]}";
  r = RunDscale("generate --target " + dir_ + "/target --drafter " + dir_ +
                "/drafter --ids 3,1 --spec dflash");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(file + ": field \"token_ids\"[16]: token id 3 after 15"), std::string::npos)
      << r.out;
  r = RunDscale("draft-vocab --target " + dir_ + "/target --corpus " + dir_ +
                "/corpus.jsonl --size 0 --out " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--size"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dscale
