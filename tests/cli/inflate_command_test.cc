// dscale inflate end to end through the built binary: the checkpoints it writes load in every
// command and give the source's logits and tokens (a DSpark pair's proposals and confidence too);
// bad shapes, a foreign drafter, a used output directory and drafters without one output each are
// refused with the field or flag named.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../inflate/pair_bounds.h"
#include "inflate/inflate_plan.h"
#include "run_command.h"

namespace dscale {
namespace {

using testing::RunDscale;

class InflateCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        (std::filesystem::temp_directory_path() / ("dscale_inflate_" + std::to_string(::getpid())))
            .string());
    const std::string sizes =
        " --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 --kv-heads 2 "
        "--head-dim 16 --draft-layers 2";
    ASSERT_EQ(RunDscale("make-tiny --out " + Path("small") + " --drafter-out " +
                        Path("small-drafter") + " --seed 4" + sizes)
                  .exit_code,
              0);
    // Another pair, whose drafter belongs to a wider target.
    ASSERT_EQ(RunDscale("make-tiny --out " + Path("other") + " --drafter-out " +
                        Path("other-drafter") + " --seed 5 --hidden 96 --vocab 97")
                  .exit_code,
              0);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  static testing::CommandResult Inflate(const std::string& out, const std::string& flags,
                                        const std::string& drafter = "small-drafter") {
    return RunDscale("inflate --target " + Path("small") + " --drafter " + Path(drafter) +
                     " --out-target " + Path(out) + " --out-drafter " + Path(out + "-drafter") +
                     " " + flags);
  }

  static nlohmann::json Json(const std::string& args) {
    const testing::CommandResult r = RunDscale(args, /*merge_stderr=*/false);
    EXPECT_EQ(r.exit_code, 0) << args;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  static std::string* dir_;
};
std::string* InflateCommandTest::dir_ = nullptr;

// Sharded output (a small --max-shard-bytes) that `logits`, `draft` and `generate` read like any
// checkpoint: every real logit within the pair bound (pair_bounds.h), pad logits far below, and
// speculative generation with the source's tokens and acceptance.
TEST_F(InflateCommandTest, WritesACheckpointEveryCommandLoads) {
  const testing::CommandResult r =
      Inflate("wide",
              "--hidden 128 --intermediate 160 --layers 5 --heads 8 --kv-heads 4 "
              "--head-dim 32 --vocab 120 --max-shard-bytes 200000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("hidden 64 -> 128"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(Path("wide/model.safetensors.index.json")));
  EXPECT_TRUE(std::filesystem::exists(Path("wide-drafter/config.json")));

  const std::string ids = "5,17,3,42,8,8,1,60,33";
  const nlohmann::json small = Json("logits --model " + Path("small") + " --ids " + ids);
  const nlohmann::json large = Json("logits --model " + Path("wide") + " --ids " + ids);
  const DecoderModel small_model = DecoderModel::Load(Path("small")).value();
  const DecoderModel large_model = DecoderModel::Load(Path("wide")).value();
  // `dscale logits` caches K/V as BF16 by default.
  const std::vector<double> bounds =
      testing::TargetPairBounds(small_model, large_model, 64, KvDtype::kBf16);
  ASSERT_EQ(large["logits"].size(), small["logits"].size());
  for (size_t row = 0; row < small["logits"].size(); ++row) {
    const std::vector<float> s = small["logits"][row].get<std::vector<float>>();
    const std::vector<float> l = large["logits"][row].get<std::vector<float>>();
    ASSERT_EQ(l.size(), 120u);
    const float top = *std::max_element(s.begin(), s.end());
    for (size_t v = 0; v < s.size(); ++v) EXPECT_LE(std::fabs(double{s[v]} - l[v]), bounds[v]);
    for (size_t v = s.size(); v < l.size(); ++v) EXPECT_LE(l[v], top - kPadLogitMargin);
  }

  const nlohmann::json draft = Json("draft --target " + Path("wide") + " --drafter " +
                                    Path("wide-drafter") + " --ids " + ids);
  EXPECT_EQ(draft["draft"].size(), 15u);
  const std::string args = " --ids 9,8,7,6,5 --max-tokens 24 --json --spec dflash";
  const nlohmann::json a =
      Json("generate --target " + Path("small") + " --drafter " + Path("small-drafter") + args);
  const nlohmann::json b =
      Json("generate --target " + Path("wide") + " --drafter " + Path("wide-drafter") + args);
  // The random pair's tokens part only at a float-noise tie of the source's top two logits.
  const float tie = testing::GreedyTieTolerance(bounds);
  const std::vector<int32_t> want = a["requests"][0]["output_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> got = b["requests"][0]["output_ids"].get<std::vector<int32_t>>();
  const size_t at = std::mismatch(want.begin(), want.end(), got.begin()).first - want.begin();
  if (at < want.size()) {
    std::string context = "9,8,7,6,5";
    for (size_t i = 0; i < at; ++i) context += "," + std::to_string(want[i]);
    const nlohmann::json row = Json("logits --model " + Path("small") + " --ids " + context);
    std::vector<float> last = row["logits"].back().get<std::vector<float>>();
    EXPECT_LE(testing::TopGap(last.data(), static_cast<int64_t>(last.size())), tie)
        << "outputs part at token " << at << " where the source's top two are not tied";
  } else {
    EXPECT_EQ(b["stats"]["tau"], a["stats"]["tau"]);
  }
}

TEST_F(InflateCommandTest, RefusesShapesThatDoNotFitNamingTheField) {
  struct Case {
    const char* flags;
    const char* needle;
  } cases[] = {
      {"--shape qwen3-3b", "--shape: expected one of qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b"},
      {"--hidden 32",
       "field \"hidden_size\" (--hidden): 32 is smaller than the source target's 64"},
      {"--heads 6 --kv-heads 4",
       "field \"num_attention_heads\" (--heads): 6 is not a multiple of num_key_value_heads 4"},
      {"--layers 2", "field \"num_hidden_layers\" (--layers): 2 is smaller"},
      {"--vocab 100 --hidden 64", "a wider head_dim or vocabulary needs constant dims"},
      {"--draft-layers 1", "(--draft-layers): 1 is smaller than the source drafter's 2"},
      {"--experts 16", "a mixture of experts needs all three"},
      {"--experts 18 --experts-per-token 4 --expert-intermediate 32",
       "field \"num_experts\" (--experts): 18 is not a multiple of num_experts_per_tok 4"},
      {"--experts 16 --experts-per-token 4 --expert-intermediate 16",
       "(--expert-intermediate): 16 cannot hold the source's 96 MLP units split 4 ways (24 "
       "each)"},
  };
  for (const Case& c : cases) {
    const testing::CommandResult r = Inflate("refused", c.flags);
    EXPECT_EQ(r.exit_code, 1) << c.flags;
    EXPECT_NE(r.out.find("dscale inflate: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.flags << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(Path("refused/config.json"))) << c.flags;
  }
}

TEST_F(InflateCommandTest, RefusesAForeignDrafterAndAUsedDirectory) {
  testing::CommandResult r = Inflate("foreign", "--hidden 128", "other-drafter");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.out.find("field \"hidden_size\": drafter hidden size 96 differs from the target's 64"),
      std::string::npos)
      << r.out;

  std::filesystem::create_directories(Path("used"));
  { std::ofstream(Path("used/notes.txt")) << "keep"; }
  r = Inflate("used", "--hidden 128");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--out-target: " + Path("used") + " is not empty"), std::string::npos)
      << r.out;

  r = RunDscale("inflate --target " + Path("small") + " --drafter " + Path("small-drafter"));
  EXPECT_EQ(r.exit_code, 2) << "missing --out-target is a usage error";

  // Several drafters: one output each, all different.
  const std::string two = "inflate --hidden 128 --target " + Path("small") + " --drafter " +
                          Path("small-drafter") + " --drafter " + Path("small-drafter") +
                          " --out-target " + Path("two");
  r = RunDscale(two + " --out-drafter " + Path("two-a"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--out-drafter: one per --drafter, in order (2 drafters, 1 outputs)"),
            std::string::npos)
      << r.out;
  r = RunDscale(two + " --out-drafter " + Path("two-a") + " --out-drafter " + Path("two-a"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--out-drafter: " + Path("two-a") + " is also another --out-drafter"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(Path("two"))) << "nothing is written before the checks";
}

// The small pair inflated to a mixture of experts through the binary: a Qwen3-MoE checkpoint
// whose speculative generation gives plain decoding's tokens.
TEST_F(InflateCommandTest, InflatesToAMixtureOfExperts) {
  const testing::CommandResult r =
      Inflate("moe", "--hidden 96 --experts 16 --experts-per-token 4 --expert-intermediate 32");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("mixture of experts: 16 experts of 32, top 4, routed in 4 groups"),
            std::string::npos)
      << r.out;
  std::ifstream config(Path("moe") + "/config.json");
  const nlohmann::json j = nlohmann::json::parse(config, nullptr, false);
  EXPECT_EQ(j["architectures"], nlohmann::json::parse(R"(["Qwen3MoeForCausalLM"])"));
  EXPECT_EQ(j["num_experts"], 16);
  const std::string args = " --ids 9,8,7,6,5 --max-tokens 24 --json --spec ";
  const std::string pair = "generate --target " + Path("moe") + " --drafter " + Path("moe-drafter");
  EXPECT_EQ(Json(pair + args + "dflash")["requests"][0]["output_ids"],
            Json(pair + args + "none")["requests"][0]["output_ids"]);
}

// A tiny Llama pair (make-tiny --arch llama) inflated through the binary to a Llama-like size
// with a doubled head dim: the output is a Llama checkpoint with the source's RoPE scaling, and
// speculative generation on it gives plain decoding's tokens. A named shape of the other family
// is refused, as is make-tiny --shape with a size flag.
TEST_F(InflateCommandTest, InflatesALlamaPair) {
  ASSERT_EQ(RunDscale("make-tiny --arch llama --rope-original-positions 16 --out " + Path("llama") +
                      " --drafter-out " + Path("llama-drafter") +
                      " --seed 6 --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 "
                      "--kv-heads 2 --head-dim 16 --draft-layers 2")
                .exit_code,
            0);
  testing::CommandResult r = RunDscale(
      "inflate --target " + Path("llama") + " --drafter " + Path("llama-drafter") +
      " --out-target " + Path("llama-wide") + " --out-drafter " + Path("llama-wide-drafter") +
      " --hidden 128 --intermediate 160 --layers 5 --heads 8 --kv-heads 4 --head-dim 32 "
      "--vocab 120");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const DecoderModel large = DecoderModel::Load(Path("llama-wide")).value();
  EXPECT_EQ(large.config().family, ModelFamily::kLlama);
  EXPECT_EQ(large.config().rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(large.config().head_dim, 32);
  const std::string args =
      " --ids 9,8,7,6,5,4,3,2,1,11,12,13,14,15,16,17,18 --max-tokens 24 --json";
  const nlohmann::json plain =
      Json("generate --target " + Path("llama-wide") + args + " --spec none");
  const nlohmann::json spec = Json("generate --target " + Path("llama-wide") + " --drafter " +
                                   Path("llama-wide-drafter") + args + " --spec dflash");
  EXPECT_EQ(spec["requests"][0]["output_ids"], plain["requests"][0]["output_ids"]);

  r = Inflate("refused", "--shape llama-3.2-1b");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("a llama shape for a qwen3 target"), std::string::npos) << r.out;
  r = RunDscale("make-tiny --out " + Path("refused") + " --shape llama-3.2-1b --hidden 64");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = RunDscale("make-tiny --out " + Path("refused") + " --shape llama-9b");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("llama-3.1-8b"), std::string::npos) << r.out;
}

// A make-tiny DSpark pair (DeepSpec's layout, an rnn Markov head, a confidence head on h and e)
// with a calibration, inflated through the binary: the output drafter is DeepSpec's again, with
// the calibration copied, and `draft` and greedy speculation give the source's proposals,
// confidence logits (within the tests' 1e-3), tokens and τ.
TEST_F(InflateCommandTest, InflatesADSparkPair) {
  ASSERT_EQ(
      RunDscale("make-tiny --out " + Path("dspark") + " --drafter-out " + Path("dspark-drafter") +
                " --seed 8 --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 "
                "--kv-heads 2 --head-dim 16 --drafter-arch dspark --block-size 7 "
                "--markov-head-type rnn --markov-rank 5 --confidence-head markov")
          .exit_code,
      0);
  const std::string calibration = "/confidence_calibration.json";
  {
    std::ofstream(Path("dspark-drafter") + calibration)
        << R"({"format": "dscale-confidence-calibration-v1", "temperatures": )"
        << "[1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 0.9]}";
  }
  testing::CommandResult r = RunDscale(
      "inflate --target " + Path("dspark") + " --drafter " + Path("dspark-drafter") +
      " --out-target " + Path("dspark-wide") + " --out-drafter " + Path("dspark-wide-drafter") +
      " --hidden 128 --intermediate 160 --layers 5 --heads 8 --kv-heads 4 --head-dim 32 "
      "--vocab 120");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("DSpark heads"), std::string::npos) << r.out;
  std::ifstream config(Path("dspark-wide-drafter") + "/config.json");
  const nlohmann::json j = nlohmann::json::parse(config, nullptr, false);
  EXPECT_EQ(j["architectures"], nlohmann::json::parse(R"(["Qwen3DSparkModel"])"));
  EXPECT_EQ(j["markov_head_type"], "rnn");
  EXPECT_EQ(j["hidden_size"], 128);
  std::ifstream copied(Path("dspark-wide-drafter") + calibration);
  std::ifstream original(Path("dspark-drafter") + calibration);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(copied), {}),
            std::string(std::istreambuf_iterator<char>(original), {}));

  const std::string ids = " --ids 5,17,3,42,8,8,1,60,33 --kv-dtype f32";
  const nlohmann::json a =
      Json("draft --target " + Path("dspark") + " --drafter " + Path("dspark-drafter") + ids);
  const nlohmann::json b = Json("draft --target " + Path("dspark-wide") + " --drafter " +
                                Path("dspark-wide-drafter") + ids);
  EXPECT_EQ(b["draft"], a["draft"]);
  ASSERT_EQ(b["confidence"].size(), 7u);
  for (size_t k = 0; k < 7; ++k) {
    EXPECT_NEAR(b["confidence"][k].get<double>(), a["confidence"][k].get<double>(), 1e-3) << k;
  }
  for (const char* spec : {"dflash", "fixed:5"}) {
    const std::string args = " --ids 9,8,7,6,5 --max-tokens 24 --json --spec " + std::string(spec);
    const nlohmann::json small =
        Json("generate --target " + Path("dspark") + " --drafter " + Path("dspark-drafter") + args);
    const nlohmann::json large = Json("generate --target " + Path("dspark-wide") + " --drafter " +
                                      Path("dspark-wide-drafter") + args);
    EXPECT_EQ(large["requests"][0]["output_ids"], small["requests"][0]["output_ids"]) << spec;
    EXPECT_EQ(large["requests"][0]["accepted"], small["requests"][0]["accepted"]) << spec;
    EXPECT_EQ(large["stats"]["tau"], small["stats"]["tau"]) << spec;
  }
}

}  // namespace
}  // namespace dscale
