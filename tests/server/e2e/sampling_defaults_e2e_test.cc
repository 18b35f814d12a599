// --sampling-defaults end to end: a target folder whose generation_config.json recommends
// temperature 0 serves requests that leave the temperature out greedily (whatever their seeds),
// --sampling-defaults openai samples them at temperature 1, and a recommendation no request
// could send stops the server before it listens, naming the file and key.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "server_process.h"

namespace dscale::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A copy of the fixture's tiny target whose generation_config.json is `text`; removed after.
class TargetWithGenerationConfig {
 public:
  explicit TargetWithGenerationConfig(const std::string& text)
      : dir_(fs::temp_directory_path() /
             ("dscale_sampling_defaults_" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::copy(fs::path(E2eDir()) / "tiny", dir_, fs::copy_options::recursive);
    std::ofstream(dir_ / "generation_config.json") << text;
  }
  ~TargetWithGenerationConfig() { fs::remove_all(dir_); }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

// The texts of requests with seeds 1 .. 6 that give no temperature.
std::set<std::string> TextsOfSeeds(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120s);
  std::set<std::string> texts;
  for (int seed = 1; seed <= 6; ++seed) {
    const nlohmann::json body = {
        {"model", "tiny"}, {"prompt", "Hello there"}, {"max_tokens", 8}, {"seed", seed}};
    const httplib::Result res = client.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    if (res) texts.insert(nlohmann::json::parse(res->body)["choices"][0]["text"]);
  }
  return texts;
}

TEST(SamplingDefaultsE2eTest, TheTargetsRecommendationFillsWhatRequestsLeaveOut) {
  const TargetWithGenerationConfig target(R"({"eos_token_id": 509, "temperature": 0})");
  {
    auto server = ServerProcess::Start({"--target", target.path(), "--served-model-name", "tiny"});
    EXPECT_EQ(TextsOfSeeds(server->port()).size(), 1u) << "greedy: one text whatever the seed";
    EXPECT_NE(server->Log().find("generation_config.json's temperature 0"), std::string::npos)
        << server->Log();
    EXPECT_EQ(server->Terminate(), 0);
  }
  auto openai = ServerProcess::Start(
      {"--target", target.path(), "--served-model-name", "tiny", "--sampling-defaults", "openai"});
  EXPECT_GT(TextsOfSeeds(openai->port()).size(), 1u) << "temperature 1: the seeds differ";
}

TEST(SamplingDefaultsE2eTest, ARecommendationNoRequestCouldSendIsRefusedAtStartUp) {
  const TargetWithGenerationConfig target(R"({"top_p": 1.5})");
  auto server = ServerProcess::Spawn({"--target", target.path()}, 30s);
  EXPECT_EQ(server->port(), -1);
  EXPECT_EQ(server->WaitExit(30s), 1);
  EXPECT_NE(server->Log().find(target.path() + "/generation_config.json: \"top_p\""),
            std::string::npos)
      << server->Log();
}

}  // namespace
}  // namespace dscale::e2e
