// End-to-end: `dscale dvl-allocate` through the built binary.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "dvl/scoped_temp_dir.h"
#include "run_command.h"

namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult RunDvlAllocate(const std::string& json_text) {
  const dscale::test_util::ScopedTempDir dir;
  const std::string path = dir.File("scores.json");
  std::ofstream(path) << json_text;
  const dscale::testing::CommandResult r =
      dscale::testing::RunDscale("dvl-allocate --scores '" + path + "'");
  return {.exit_code = r.exit_code, .output = r.out};
}

// The paper's worked example: seeds [5, 10, 7, 9], budget 32, R1 grows.
constexpr const char* kWorkedExample = R"({"probs": [
  [1,1,1,1,0.95,0,0,0,0,0,0,0,0,0,0],
  [1,1,1,1,1,1,1,1,1,0.6,0,0,0,0,0],
  [1,1,1,1,1,1,0.5,0,0,0,0,0,0,0,0],
  [1,1,1,1,1,1,1,1,0.5,0,0,0,0,0,0]], "budget": 32})";

TEST(DvlAllocateCliTest, WorkedExample) {
  const CommandResult r = RunDvlAllocate(kWorkedExample);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out["seed"], nlohmann::json({5, 10, 7, 9}));
  EXPECT_EQ(out["k"], nlohmann::json({6, 10, 7, 9}));
  EXPECT_EQ(out["offsets"], nlohmann::json({0, 6, 16, 23, 32}));
}

TEST(DvlAllocateCliTest, DefaultBudgetIsHalfTheBlock) {
  std::string text = R"({"probs": [)";
  for (int i = 0; i < 3; ++i) {
    text += std::string(i ? "," : "") + "[0.9,0.9,0.8,0.8,0.7,0.5,0.4,0.3,0.2,0.1,0,0,0,0,0]";
  }
  text += "]}";
  const CommandResult r = RunDvlAllocate(text);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out["offsets"].back(), 24);
}

TEST(DvlAllocateCliTest, BadInputExitsOneWithMessage) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"probs\": [", "not valid JSON"},
      {"{\"scores\": []}", "\"probs\" array"},
      {"{\"probs\": []}", "at least one request"},
      {"{\"probs\": [[0.5, 0.5]]}", "probs[0] must be an array of 15"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,1.5]]}",
       "probs[0][14] must be a probability"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,\"x\"]]}",
       "probs[0][14] must be a probability"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]], "
       "\"budget\": 17}",
       "outside [N, W·N] = [1, 16]"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]], "
       "\"budget\": 2.5}",
       "\"budget\" must be an integer"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]], "
       "\"budget\": 18446744073709551615}",
       "\"budget\" must be an integer, got 18446744073709551615"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]], "
       "\"budget\": 4294967297}",
       "outside [N, W·N] = [1, 16]"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]], "
       "\"budget\": \"4\"}",
       "\"budget\" must be an integer, got \"4\""},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,true]]}",
       "probs[0][14] must be a probability in [0, 1], got true"},
      {"{\"probs\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]], "
       "\"probs\": []}",
       "duplicate key \"probs\""},
      {"[1, 2]", "expected an object with a \"probs\" array"},
      {"{\"probs\": 5}", "expected an object with a \"probs\" array"},
  };
  for (const auto& [json_text, message] : cases) {
    const CommandResult r = RunDvlAllocate(json_text);
    EXPECT_EQ(r.exit_code, 1) << json_text << "\n" << r.output;
    EXPECT_NE(r.output.find("dscale dvl-allocate: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

}  // namespace
