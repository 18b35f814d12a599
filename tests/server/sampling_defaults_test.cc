// A checkpoint's generation_config.json as the server's sampling defaults, and PrepareRequest
// giving them to the fields a request leaves out.

#include "server/sampling_defaults.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "server/prompt_builder.h"
#include "server_test_util.h"

namespace dscale::server {
namespace {

namespace fs = std::filesystem;

// A folder holding `text` as generation_config.json (or no file when text is empty).
class GenerationConfigDir {
 public:
  explicit GenerationConfigDir(const std::string& text)
      : dir_(fs::temp_directory_path() / ("dscale_generation_config_" + std::to_string(::getpid()) +
                                          "_" + std::to_string(counter_++))) {
    fs::create_directories(dir_);
    if (!text.empty()) std::ofstream(dir_ / "generation_config.json") << text;
  }
  ~GenerationConfigDir() { fs::remove_all(dir_); }
  std::string path() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

// Qwen3-8B's file as published.
constexpr char kQwen3[] = R"({"bos_token_id": 151643, "do_sample": true,
  "eos_token_id": [151645, 151643], "pad_token_id": 151643, "temperature": 0.6, "top_k": 20,
  "top_p": 0.95, "transformers_version": "4.51.0"})";

TEST(SamplingDefaultsTest, ReadsTheRecommendedKeys) {
  const Result<SamplingDefaults> d = LoadSamplingDefaults(GenerationConfigDir(kQwen3).path());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->temperature, 0.6f);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_EQ(d->top_p, 0.95f);
  EXPECT_FALSE(d->min_p.has_value());
  EXPECT_FALSE(d->repetition_penalty.has_value());
  EXPECT_EQ(d->Describe(), "temperature 0.6, top_k 20, top_p 0.95");
  const Result<SamplingDefaults> more = LoadSamplingDefaults(
      GenerationConfigDir(R"({"min_p": 0.05, "repetition_penalty": 1.05, "top_k": null})").path());
  ASSERT_TRUE(more.ok()) << more.status().message();
  EXPECT_EQ(more->Describe(), "min_p 0.05, repetition_penalty 1.05");
}

TEST(SamplingDefaultsTest, NoFileOrNoKeysMeansNoDefaults) {
  EXPECT_TRUE(LoadSamplingDefaults(GenerationConfigDir("").path())->empty());
  EXPECT_TRUE(
      LoadSamplingDefaults(GenerationConfigDir(R"({"do_sample": false, "eos_token_id": 2})").path())
          ->empty());
}

TEST(SamplingDefaultsTest, AValueNoRequestCouldSendIsAnErrorNamingTheFileAndKey) {
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"temperature": -1})", "temperature"},
           {R"({"temperature": "0.6"})", "temperature"},
           {R"({"top_p": 1.5})", "top_p"},
           {R"({"top_p": 0})", "top_p"},
           {R"({"top_k": 2.5})", "top_k"},
           {R"({"top_k": -1})", "top_k"},
           {R"({"min_p": 2})", "min_p"},
           {R"({"repetition_penalty": 0})", "repetition_penalty"},
           {R"([1, 2])", "a JSON object"},
       }) {
    const GenerationConfigDir dir(text);
    const Result<SamplingDefaults> d = LoadSamplingDefaults(dir.path());
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find(dir.path() + "/generation_config.json"), std::string::npos)
        << d.status().message();
    EXPECT_NE(d.status().message().find(key), std::string::npos) << d.status().message();
  }
}

PreparedRequest Prepared(const std::string& body, const SamplingDefaults& defaults) {
  ModelInfo model = testing::TinyModelInfo();
  model.sampling_defaults = defaults;
  ApiRequest request;
  EXPECT_FALSE(ParseApiRequest(Endpoint::kCompletions, body, &request).has_value());
  PreparedRequest out;
  EXPECT_FALSE(PrepareRequest(request, testing::ServerTokenizer(), model, 1, &out).has_value());
  return out;
}

TEST(SamplingDefaultsTest, FillOnlyWhatTheRequestLeavesOut) {
  const SamplingDefaults model{
      .temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .min_p = 0.05f, .repetition_penalty = 1.1f};
  const SamplingParams filled =
      Prepared(R"({"model": "tiny", "prompt": "x"})", model).params.sampling;
  EXPECT_EQ(filled.temperature, 0.6f);
  EXPECT_EQ(filled.top_k, 20);
  EXPECT_EQ(filled.top_p, 0.95f);
  EXPECT_EQ(filled.min_p, 0.05f);
  EXPECT_EQ(filled.rules.repetition_penalty, 1.1f);
  const SamplingParams own = Prepared(R"({"model": "tiny", "prompt": "x", "temperature": 0,
      "top_k": -1, "top_p": 1, "min_p": 0, "repetition_penalty": 1})",
                                      model)
                                 .params.sampling;
  EXPECT_TRUE(own.greedy());
  EXPECT_EQ(own.top_k, 0);
  EXPECT_EQ(own.top_p, 1.0f);
  EXPECT_EQ(own.min_p, 0.0f);
  EXPECT_TRUE(own.rules.empty());
  // Without the model's: OpenAI's (temperature 1, no filter, no penalty).
  const SamplingParams openai = Prepared(R"({"model": "tiny", "prompt": "x"})", {}).params.sampling;
  EXPECT_EQ(openai.temperature, 1.0f);
  EXPECT_EQ(openai.top_k, 0);
  EXPECT_EQ(openai.top_p, 1.0f);
  EXPECT_EQ(openai.min_p, 0.0f);
  EXPECT_TRUE(openai.rules.empty());
}

}  // namespace
}  // namespace dscale::server
