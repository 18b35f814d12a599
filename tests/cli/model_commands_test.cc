// make-tiny, logits, draft and generate end to end through the built binary.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/decoder_model.h"
#include "model/logit_bounds.h"
#include "run_command.h"

namespace dscale {
namespace {

using testing::RunDscale;

std::vector<int32_t> OutputIds(const nlohmann::json& generated) {
  return generated["requests"][0]["output_ids"].get<std::vector<int32_t>>();
}

class ModelCommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        (std::filesystem::temp_directory_path() / ("dscale_cli_" + std::to_string(::getpid())))
            .string());
    const testing::CommandResult r =
        RunDscale("make-tiny --out " + Target() + " --drafter-out " + Drafter() +
                  " --seed 4 --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 "
                  "--kv-heads 2 --head-dim 16 --draft-layers 2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    Result<DecoderModel> target = DecoderModel::Load(Target());
    ASSERT_TRUE(target.ok()) << target.status().message();
    tie_ = testing::GreedyTieTolerance(
        testing::TargetLogitBounds(*target, kMaxContext, KvDtype::kBf16));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string Target() { return *dir_ + "/target"; }
  static std::string Drafter() { return *dir_ + "/drafter"; }

  static nlohmann::json Json(const std::string& args) {
    const testing::CommandResult r = RunDscale(args, /*merge_stderr=*/false);
    EXPECT_EQ(r.exit_code, 0) << args;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  // Greedy `generate` of a fixed prompt on target and drafter gives plain decoding's tokens under
  // dflash and fixed:5, for each of `weights` (extra flags: "" as stored, " --weights int4", …).
  static void ExpectSpeculationEqualsPlain(const std::string& target, const std::string& drafter,
                                           int max_tokens,
                                           const std::vector<std::string>& weights) {
    const std::string common = " --target " + target + " --drafter " + drafter +
                               " --ids 5,9,14,3,3,70,41 --max-tokens " +
                               std::to_string(max_tokens) + " --json --spec ";
    for (const std::string& w : weights) {
      const nlohmann::json plain = Json("generate" + w + common + "none");
      for (const char* mode : {"dflash", "fixed:5"}) {
        SCOPED_TRACE(mode + w);
        EXPECT_EQ(OutputIds(Json("generate" + w + common + mode)), OutputIds(plain));
      }
    }
  }

  // The target's logits after `ids` (its last row), from `dscale logits` (`flags`: e.g. its
  // --kv-dtype or --weights).
  static std::vector<float> LastLogits(const std::vector<int32_t>& ids,
                                       const std::string& flags = "",
                                       const std::string& model = Target()) {
    std::string list;
    for (const int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
    const nlohmann::json j = Json("logits --model " + model + " --ids " + list + flags);
    return j["logits"].back().get<std::vector<float>>();
  }

  // `got` (from the GPU) equals `want` (the CPU's; both continuations of `prompt`), or they part
  // at a token where the target's top two logits (from `dscale logits` with `flags`) are within
  // `tie`: a device float-noise tie, where either choice is greedy. On the CPU alone no tie is
  // excused: every policy, concurrency and thread count gives the same tokens.
  static void ExpectSameUpToTie(const std::vector<int32_t>& prompt, const std::vector<int32_t>& got,
                                const std::vector<int32_t>& want, float tie,
                                const std::string& flags = "",
                                const std::string& model = Target()) {
    const size_t n = std::min(got.size(), want.size());
    const size_t at = std::mismatch(got.begin(), got.begin() + n, want.begin()).first - got.begin();
    if (at == n) {
      EXPECT_EQ(got.size(), want.size());
      return;
    }
    std::vector<int32_t> context = prompt;
    context.insert(context.end(), want.begin(), want.begin() + at);
    std::vector<float> row = LastLogits(context, flags, model);
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    EXPECT_LE(row[0] - row[1], tie)
        << "outputs part at token " << at << " where the target's top two logits are not tied";
  }

  // Contexts in these tests stay within this many positions.
  static constexpr int64_t kMaxContext = 64;
  static std::string* dir_;
  // The CPU tie tolerance of the order bound (model/logit_bounds.h) for the tiny target with the
  // commands' default BF16 KV cache (the device comparison's floor).
  static float tie_;
};
std::string* ModelCommandsTest::dir_ = nullptr;
float ModelCommandsTest::tie_ = 0;

int Argmax(const nlohmann::json& row) {
  const std::vector<float> v = row.get<std::vector<float>>();
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST_F(ModelCommandsTest, MakeTinyWritesTheHuggingFaceLayout) {
  for (const char* file : {"/config.json", "/model.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(Target() + file)) << file;
    EXPECT_TRUE(std::filesystem::exists(Drafter() + file)) << file;
  }
  std::ifstream config(Drafter() + "/config.json");
  const nlohmann::json j = nlohmann::json::parse(config, nullptr, false);
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_EQ(j["dflash_config"]["mask_token_id"], 95);
  // One id per draft layer, by the documented rule for 3 target layers: 1 + i·(0 − 1) → [1, 0].
  EXPECT_EQ(j["dflash_config"]["target_layer_ids"], nlohmann::json::parse("[1, 0]"));
}

// These two check the commands' plumbing on f32 caches.
TEST_F(ModelCommandsTest, LogitsHasOneFullRowPerPositionAndAgreesWithGenerate) {
  const nlohmann::json logits =
      Json("logits --model " + Target() + " --ids 5,17,3,42 --kv-dtype f32");
  ASSERT_EQ(logits["logits"].size(), 4u);
  for (const auto& row : logits["logits"]) EXPECT_EQ(row.size(), 97u);
  const nlohmann::json gen =
      Json("generate --target " + Target() +
           " --spec none --ids 5,17,3,42 --max-tokens 3 --json --kv-dtype f32");
  // generate computes the row in a forward of another shape, with the same bits.
  EXPECT_EQ(gen["requests"][0]["output_ids"][0], Argmax(logits["logits"][3]));
}

TEST_F(ModelCommandsTest, DraftPrintsGreedyCandidatesAndTheirLogits) {
  const nlohmann::json draft = Json("draft --target " + Target() + " --drafter " + Drafter() +
                                    " --ids 5,17,3 --kv-dtype f32");
  const nlohmann::json logits = Json("logits --model " + Target() + " --ids 5,17,3 --kv-dtype f32");
  EXPECT_EQ(draft["bonus"], Argmax(logits["logits"][2]));
  ASSERT_EQ(draft["draft"].size(), 15u);
  ASSERT_EQ(draft["draft_logits"].size(), 15u);
  for (size_t j = 0; j < 15; ++j) {
    EXPECT_EQ(draft["draft_logits"][j].size(), 97u);
    EXPECT_EQ(draft["draft"][j], Argmax(draft["draft_logits"][j]));
  }
}

// On the default BF16 cache and on --kv-dtype f32, and with each activation mode (a verified row
// computes what a decode row does, bit for bit), token for token.
TEST_F(ModelCommandsTest, SpeculativeGenerationEqualsPlainGreedy) {
  for (const std::string flags :
       {"", " --kv-dtype f32", " --activations bf16", " --activations f32"}) {
    const std::string common = " --target " + Target() + " --drafter " + Drafter() +
                               " --ids 9,8,7,6,5 --max-tokens 24 --json" + flags + " --spec ";
    const nlohmann::json plain = Json("generate" + common + "none");
    for (const char* mode : {"dflash", "fixed:5"}) {
      SCOPED_TRACE(mode + flags);
      const nlohmann::json spec = Json("generate" + common + mode);
      EXPECT_EQ(OutputIds(spec), OutputIds(plain));
      EXPECT_EQ(spec["stats"]["mode"], mode);
    }
  }
}

// --draft-sampling distribution: a seeded sampled run repeats itself, greedy output is plain
// decoding's, and --device cuda refuses it by name before any model loads; an unknown mode is a
// usage error.
TEST_F(ModelCommandsTest, DraftSamplingDistributionRunsOnTheCpuOnly) {
  const std::string common = "generate --target " + Target() + " --drafter " + Drafter() +
                             " --ids 9,8,7,6,5 --max-tokens 24 --json --spec dflash";
  const std::string sampled = " --temperature 1.2 --seed 3 --draft-sampling distribution";
  const nlohmann::json first = Json(common + sampled);
  EXPECT_FALSE(OutputIds(first).empty());
  EXPECT_EQ(OutputIds(Json(common + sampled)), OutputIds(first));
  EXPECT_EQ(OutputIds(Json(common + " --draft-sampling distribution")),
            OutputIds(Json(common + " --draft-sampling argmax")));
  testing::CommandResult r = RunDscale(common + sampled + " --device cuda");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--draft-sampling distribution: --device cuda drafts by argmax only"),
            std::string::npos)
      << r.out;
  r = RunDscale(common + " --draft-sampling sample");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--draft-sampling"), std::string::npos) << r.out;
}

// make-tiny --drafter-arch dspark writes DeepSpec's layout (Qwen3DSparkModel: the fields at the
// top level, the heads' tensors, the target's embedding and LM head copied); `dscale draft` gives
// B = block_size candidates and their confidence logits, and speculation on it equals plain
// greedy decoding.
TEST_F(ModelCommandsTest, DSparkDraftersAreMadeDraftedAndSpeculatedWith) {
  const std::string drafter = *dir_ + "/dspark";
  const std::string target = *dir_ + "/dspark-target";
  const testing::CommandResult r = RunDscale(
      "make-tiny --out " + target + " --drafter-out " + drafter +
      " --seed 4 --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 --kv-heads 2 "
      "--head-dim 16 --drafter-arch dspark --block-size 7 --markov-head-type gated "
      "--markov-rank 5 --confidence-head markov");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream config(drafter + "/config.json");
  const nlohmann::json j = nlohmann::json::parse(config, nullptr, false);
  EXPECT_EQ(j["architectures"], nlohmann::json::parse(R"(["Qwen3DSparkModel"])"));
  EXPECT_EQ(j["block_size"], 7);
  EXPECT_EQ(j["mask_token_id"], 95);
  EXPECT_EQ(j["markov_head_type"], "gated");
  EXPECT_EQ(j["confidence_head_with_markov"], true);
  const Result<Checkpoint> written = Checkpoint::Open(drafter);
  ASSERT_TRUE(written.ok()) << written.status().message();
  const Result<Checkpoint> target_written = Checkpoint::Open(target);
  ASSERT_TRUE(target_written.ok()) << target_written.status().message();
  EXPECT_EQ(written->ReadF32("lm_head.weight", {97, 64}).value(),
            target_written->ReadF32("lm_head.weight", {97, 64}).value());
  EXPECT_NE(written->Find("markov_head.gate_proj.weight"), nullptr);

  const nlohmann::json draft =
      Json("draft --target " + target + " --drafter " + drafter + " --ids 5,17,3 --kv-dtype f32");
  ASSERT_EQ(draft["draft"].size(), 7u);
  ASSERT_EQ(draft["draft_logits"].size(), 7u);
  ASSERT_EQ(draft["confidence"].size(), 7u);
  for (size_t k = 0; k < 7; ++k) EXPECT_EQ(draft["draft"][k], Argmax(draft["draft_logits"][k]));
  const std::string common = " --target " + target + " --drafter " + drafter +
                             " --ids 9,8,7,6,5 --max-tokens 24 --json --spec ";
  const nlohmann::json plain = Json("generate" + common + "none");
  for (const char* mode : {"dflash", "fixed:5"}) {
    EXPECT_EQ(OutputIds(Json("generate" + common + mode)), OutputIds(plain)) << mode;
  }
}

// DSpark as published, end to end: collect the confidence head's traces with full-width
// verification, fit its sequential temperature scaling, and run --spec dspark, which ranks by the
// calibrated head (and says so) without a predictor, and is the default policy for such a
// drafter; greedy output equals plain decoding. A
// calibration for another block, DVL traces for a block that is not 16, and confidence traces
// from a drafter without a head are refused naming the flag.
TEST_F(ModelCommandsTest, DSparkConfidenceIsCollectedCalibratedAndScheduledBy) {
  const std::string drafter = *dir_ + "/dspark-sts";
  const std::string target = *dir_ + "/dspark-sts-target";
  testing::CommandResult r = RunDscale(
      "make-tiny --out " + target + " --drafter-out " + drafter +
      " --seed 5 --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 --kv-heads 2 "
      "--head-dim 16 --drafter-arch dspark --block-size 7 --markov-rank 5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string prompts = *dir_ + "/dspark-prompts.jsonl";
  {
    std::ofstream file(prompts);
    for (int i = 0; i < 10; ++i) file << "{\"ids\": [" << (i * 7) % 90 << ", " << i + 3 << "]}\n";
  }
  const std::string models = " --target " + target + " --drafter " + drafter + " --prompts " +
                             prompts + " --max-tokens 16 --concurrency 4";
  const std::string traces = *dir_ + "/confidence.bin";
  r = RunDscale("collect" + models + " --confidence-out " + traces);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("from 10 prompts"), std::string::npos) << r.out;
  r = RunDscale("collect" + models + " --out " + *dir_ + "/dvl.bin");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--out: DVL traces need a drafter whose verify block has 16 rows"),
            std::string::npos)
      << r.out;
  r = RunDscale("collect --target " + Target() + " --drafter " + Drafter() + " --prompts " +
                prompts + " --confidence-out " + traces + ".dflash");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--confidence-out: the drafter"), std::string::npos) << r.out;

  const std::string calibration = drafter + "/confidence_calibration.json";
  r = RunDscale("calibrate-confidence --traces " + traces + " --out " + calibration +
                " --holdout-every 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_EQ(report["positions"].size(), 7u) << r.out;
  EXPECT_GT(report["held_out_records"], 0);

  const nlohmann::json plain = Json("generate --json --spec none" + models);
  r = RunDscale("generate --json --spec dspark" + models);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("ranks drafts by the drafter's confidence head, calibrated"),
            std::string::npos)
      << r.out;
  const nlohmann::json dspark = Json("generate --json --spec dspark" + models);
  ASSERT_EQ(dspark["requests"].size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(dspark["requests"][i]["output_ids"], plain["requests"][i]["output_ids"]) << i;
  }
  // Without --spec, a DSpark drafter with a confidence head and no predictor runs DSpark's own
  // scheduler.
  r = RunDscale("generate" + models);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--spec dspark (a DSpark drafter with a confidence head"), std::string::npos)
      << r.out;
  std::ofstream(calibration) << R"({"format": "dscale-confidence-calibration-v1", )"
                             << R"("temperatures": [1, 1]})";
  r = RunDscale("generate --spec dspark" + models);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--confidence-calibration"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected 7 entries"), std::string::npos) << r.out;
}

// make-tiny --arch llama writes a LlamaForCausalLM checkpoint (no q/k norms, llama3
// rope_scaling) and a drafter of Qwen3 layers with the target's RoPE; speculation on it equals
// plain greedy decoding over 60 positions, past the scaling's original context of 32.
TEST_F(ModelCommandsTest, LlamaTargetsAreMadeLoadedAndSpeculatedOn) {
  const std::string target = *dir_ + "/llama-target", drafter = *dir_ + "/llama-drafter";
  const testing::CommandResult r =
      RunDscale("make-tiny --arch llama --out " + target + " --drafter-out " + drafter +
                " --seed 6 --vocab 97 --hidden 64 --intermediate 96 --layers 3 --heads 4 "
                "--kv-heads 2 --head-dim 16 --rope-original-positions 32 --draft-layers 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream target_config(target + "/config.json");
  const nlohmann::json t = nlohmann::json::parse(target_config, nullptr, false);
  EXPECT_EQ(t["architectures"], nlohmann::json::parse(R"(["LlamaForCausalLM"])"));
  EXPECT_EQ(t["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(t["rope_scaling"]["original_max_position_embeddings"], 32);
  std::ifstream drafter_config(drafter + "/config.json");
  const nlohmann::json d = nlohmann::json::parse(drafter_config, nullptr, false);
  EXPECT_EQ(d["model_type"], "qwen3");
  EXPECT_EQ(d["rope_scaling"], t["rope_scaling"]);
  Result<DecoderModel> loaded = DecoderModel::Load(target);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_TRUE(loaded->weights().layers[0].q_norm.empty());
  std::vector<int32_t> prompt;
  std::string ids;
  for (int32_t i = 0; i < 20; ++i) {
    prompt.push_back((i * 37 + 11) % 90);
    ids += (ids.empty() ? "" : ",") + std::to_string(prompt.back());
  }
  const std::string common = " --target " + target + " --drafter " + drafter + " --ids " + ids +
                             " --max-tokens 40 --json --kv-dtype f32 --spec ";
  const nlohmann::json plain = Json("generate" + common + "none");
  for (const char* mode : {"dflash", "fixed:5"}) {
    SCOPED_TRACE(mode);
    const nlohmann::json spec = Json("generate" + common + mode);
    EXPECT_EQ(OutputIds(spec), OutputIds(plain));
  }
  const testing::CommandResult bad = RunDscale("make-tiny --arch mistral --out " + target);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(
      bad.out.find("--arch: expected qwen3, llama, qwen3_moe, qwen3_5 or qwen3_5_moe, got mistral"),
      std::string::npos)
      << bad.out;
}

// make-tiny --arch qwen3_moe writes a Qwen3MoeForCausalLM checkpoint (router and experts per
// layer) and a dense Qwen3 drafter; speculation on it equals plain greedy decoding, as stored and
// with the experts in int4. (--shape qwen3-30b-a3b's config: tests/io/qwen3_moe_config_test.cc.)
TEST_F(ModelCommandsTest, Qwen3MoeTargetsAreMadeLoadedAndSpeculatedOn) {
  const std::string target = *dir_ + "/moe-target", drafter = *dir_ + "/moe-drafter";
  const testing::CommandResult r = RunDscale(
      "make-tiny --arch qwen3_moe --out " + target + " --drafter-out " + drafter +
      " --seed 8 --vocab 97 --hidden 64 --layers 3 --heads 4 --kv-heads 2 --head-dim 16"
      " --experts 6 --experts-per-token 2 --expert-intermediate 40 --norm-topk-prob false");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream target_config(target + "/config.json");
  const nlohmann::json t = nlohmann::json::parse(target_config, nullptr, false);
  EXPECT_EQ(t["architectures"], nlohmann::json::parse(R"(["Qwen3MoeForCausalLM"])"));
  EXPECT_EQ(t["num_experts"], 6);
  EXPECT_EQ(t["norm_topk_prob"], false);
  std::ifstream drafter_config(drafter + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(drafter_config, nullptr, false)["model_type"], "qwen3");
  Result<DecoderModel> loaded = DecoderModel::Load(target);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->weights().layers[2].moe.experts.size(), 6u);
  ExpectSpeculationEqualsPlain(target, drafter, 30, {"", " --weights int4"});

  // --step-trace: a line per decode step, each with the experts its pass woke.
  const std::string trace = *dir_ + "/moe-trace.jsonl";
  const nlohmann::json run = Json("generate --target " + target + " --drafter " + drafter +
                                  " --ids 5,9,14,3 --max-tokens 12 --json --spec dflash"
                                  " --step-trace " +
                                  trace);
  std::ifstream lines(trace);
  int64_t count = 0, committed = 0;
  for (std::string text; std::getline(lines, text); ++count) {
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(line.is_discarded()) << text;
    EXPECT_GE(line["experts"].get<double>(), 2.0) << text;  // at least the anchor's top 2
    EXPECT_FALSE(line.contains("auto")) << text;            // not under --verify-budget auto
    committed += line["committed"].get<int64_t>();
  }
  EXPECT_EQ(count, run["stats"]["decode_steps"].get<int64_t>());
  EXPECT_EQ(committed, 11);  // the first token comes from the prompt's pass
}

// make-tiny --arch qwen3_5 writes a dense Qwen3.5 checkpoint (both layouts) with its Gated
// DeltaNet layers and a plain-attention DFlash drafter; speculation on it equals plain greedy
// decoding, as stored and with int8 and int4 weights.
TEST_F(ModelCommandsTest, Qwen3_5TargetsAreMadeLoadedAndSpeculatedOn) {
  for (const char* layout : {"", " --multimodal"}) {
    SCOPED_TRACE(layout);
    const std::string target = *dir_ + "/hybrid-target" + (*layout ? "-mm" : "");
    const std::string drafter = target + "-drafter";
    const testing::CommandResult r = RunDscale(
        "make-tiny --arch qwen3_5 --out " + target + " --drafter-out " + drafter +
        " --seed 3 --vocab 97 --hidden 64 --layers 4 --heads 3 --kv-heads 1 --head-dim 16"
        " --linear-key-heads 2 --linear-value-heads 4 --linear-key-dim 8 --linear-value-dim 12"
        " --conv-kernel 3 --full-attention-interval 2 --partial-rotary 0.5" +
        std::string(layout));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream target_config(target + "/config.json");
    const nlohmann::json t = nlohmann::json::parse(target_config, nullptr, false);
    const nlohmann::json& text = *layout ? t["text_config"] : t;
    EXPECT_EQ(t["architectures"][0],
              *layout ? "Qwen3_5ForConditionalGeneration" : "Qwen3_5ForCausalLM");
    EXPECT_EQ(text["layer_types"], nlohmann::json::parse(R"(["linear_attention", "full_attention",
        "linear_attention", "full_attention"])"));
    Result<DecoderModel> loaded = DecoderModel::Load(target);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_FALSE(loaded->weights().layers[0].linear.empty());
    ExpectSpeculationEqualsPlain(target, drafter, 20, {"", " --weights int8", " --weights int4"});
  }
}

// make-tiny --arch qwen3_5_moe writes a Qwen3_5MoeForConditionalGeneration checkpoint (fused
// experts and a shared expert in every layer, no dense MLP) and a dense drafter of 3 × hidden;
// speculation on it equals plain greedy decoding, as stored and with int4 weights.
TEST_F(ModelCommandsTest, Qwen3_5MoeTargetsAreMadeLoadedAndSpeculatedOn) {
  const std::string target = *dir_ + "/hybrid-moe-target", drafter = target + "-drafter";
  const testing::CommandResult r = RunDscale(
      "make-tiny --arch qwen3_5_moe --multimodal --out " + target + " --drafter-out " + drafter +
      " --seed 4 --vocab 97 --hidden 64 --layers 4 --heads 3 --kv-heads 1 --head-dim 16"
      " --linear-key-heads 2 --linear-value-heads 4 --linear-key-dim 8 --linear-value-dim 12"
      " --conv-kernel 3 --full-attention-interval 2 --partial-rotary 0.5 --experts 6"
      " --experts-per-token 2 --expert-intermediate 20 --shared-expert-intermediate 12");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream target_config(target + "/config.json");
  const nlohmann::json t = nlohmann::json::parse(target_config, nullptr, false);
  EXPECT_EQ(t["architectures"][0], "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(t["text_config"]["shared_expert_intermediate_size"], 12);
  EXPECT_FALSE(t["text_config"].contains("intermediate_size"));
  std::ifstream drafter_config(drafter + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(drafter_config, nullptr, false)["intermediate_size"], 3 * 64);
  Result<DecoderModel> loaded = DecoderModel::Load(target);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->weights().layers[0].moe.experts.size(), 6u);
  EXPECT_TRUE(loaded->weights().layers[3].moe.has_shared());
  ExpectSpeculationEqualsPlain(target, drafter, 20, {"", " --weights int4"});
}

// --threads sets the kernels' thread count; other counts split the work differently, and no
// output's bits depend on the split, so the tokens are the same.
TEST_F(ModelCommandsTest, ThreadsOptionSetsTheKernelThreads) {
  const std::string args = "generate --target " + Target() + " --drafter " + Drafter() +
                           " --ids 9,8,7,6,5 --max-tokens 12 --json --spec dflash";
  const nlohmann::json one = Json(args + " --threads 1");
  const nlohmann::json two = Json(args + " --threads 2");
  EXPECT_EQ(OutputIds(one), OutputIds(two));
  const testing::CommandResult bad = RunDscale(args + " --threads 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("--threads"), std::string::npos) << bad.out;
}

// --device cuda runs the target on the GPU where the CUDA backend is built and a device exists,
// and gives the CPU's tokens up to a device tie (testing::kBf16DeviceTieTolerance); anywhere
// else it must fail with a message saying which of the two is missing.
TEST_F(ModelCommandsTest, DeviceCudaRunsOrSaysWhyNot) {
  const std::string args = "generate --target " + Target() + " --drafter " + Drafter() +
                           " --ids 9,8,7,6,5 --max-tokens 12 --json --spec dflash --device ";
  const testing::CommandResult r = RunDscale(args + "cuda", /*merge_stderr=*/false);
  if (r.exit_code == 0) {
    const nlohmann::json out = nlohmann::json::parse(r.out);
    EXPECT_EQ(out["requests"][0]["output_ids"].size(), 12u) << r.out;
    const nlohmann::json cpu = Json(args + "cpu");
    ExpectSameUpToTie({9, 8, 7, 6, 5}, OutputIds(out), OutputIds(cpu),
                      testing::kBf16DeviceTieTolerance);
  } else {
    const testing::CommandResult why = RunDscale(args + "cuda");
    EXPECT_EQ(why.exit_code, 1) << why.out;
    const bool no_device =
        why.out.find("--device cuda: no usable CUDA device") != std::string::npos;
    const bool no_backend =
        why.out.find("--device cuda: this dscale was built without the CUDA backend") !=
        std::string::npos;
    EXPECT_TRUE(no_device || no_backend) << why.out;
  }
  const testing::CommandResult bad = RunDscale(args + "gpu");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--device"), std::string::npos) << bad.out;
}

// --weights mapped reads the same BF16 values in place: the same tokens as the default's copy,
// plainly and speculatively, on target and drafter.
TEST_F(ModelCommandsTest, MappedWeightsGiveTheCopiedWeightsTokens) {
  const std::string common = " --target " + Target() + " --drafter " + Drafter() +
                             " --ids 9,8,7,6,5 --max-tokens 24 --json --spec ";
  for (const char* spec : {"none", "dflash"}) {
    SCOPED_TRACE(spec);
    EXPECT_EQ(
        OutputIds(Json("generate" + common + spec + " --weights mapped --drafter-weights mapped")),
        OutputIds(Json("generate" + common + spec)));
  }
}

// --weights int8 and int4 (on generate, bench, serve, collect and logits): speculative
// generation equals plain greedy decoding of the quantised target, with int8 activations (the
// default) and f32 ones; the CUDA device and unknown values are refused.
TEST_F(ModelCommandsTest, QuantisedWeightsStayLosslessAndOnTheCpu) {
  for (const WeightsMode weights : {WeightsMode::kInt8, WeightsMode::kInt4}) {
    const Result<DecoderModel> quantised = DecoderModel::Load(Target(), weights);
    ASSERT_TRUE(quantised.ok()) << quantised.status().message();
    for (const std::string activations : {"", " --int8-activations f32"}) {
      const std::string flags = " --weights " + std::string(WeightsModeName(weights)) + activations;
      const std::string common = " --target " + Target() + " --drafter " + Drafter() + flags +
                                 " --ids 9,8,7,6,5 --max-tokens 24 --json --spec ";
      const nlohmann::json plain = Json("generate" + common + "none");
      for (const char* mode : {"dflash", "fixed:5"}) {
        SCOPED_TRACE(mode + flags);
        const nlohmann::json spec = Json("generate" + common + mode);
        EXPECT_EQ(OutputIds(spec), OutputIds(plain));
      }
    }
  }
  const std::string common = " --target " + Target() + " --drafter " + Drafter() +
                             " --weights int4 --ids 9,8,7,6,5 --max-tokens 24 --json --spec ";
  testing::CommandResult r = RunDscale("generate" + common + "dflash --device cuda");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--weights int4: quantised weights run on the CPU only"), std::string::npos)
      << r.out;
  r = RunDscale("generate --target " + Target() + " --spec none --ids 1 --weights int3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int3"), std::string::npos) << r.out;
}

TEST_F(ModelCommandsTest, Int8ActivationsAreInt8OrF32) {
  const testing::CommandResult r =
      RunDscale("generate --target " + Target() + " --spec none --ids 1 --int8-activations int4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--int8-activations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f32"), std::string::npos) << r.out;  // the accepted values
}

TEST_F(ModelCommandsTest, ActivationsAreBf16OrF32) {
  const testing::CommandResult r =
      RunDscale("generate --target " + Target() + " --spec none --ids 1 --activations fp8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--activations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fp8"), std::string::npos) << r.out;
}

// DSCALE_CPU_ISA (kernels/cpu/cpu_isa_cap.h) caps the kernels' instruction sets: an unknown
// value is a usage error naming the variable and the accepted values, whatever the command;
// under avx2 no AMX is used, so --activations defaults to f32 on any CPU, and speculation still
// equals plain greedy decoding.
TEST_F(ModelCommandsTest, CpuIsaCapIsAppliedAndAnUnknownOneRefused) {
  const std::string dscale = DSCALE_BINARY;
  for (const std::string& args :
       {"generate --target " + Target() + " --spec none --ids 1", std::string("tokenize --help")}) {
    const testing::CommandResult r =
        testing::RunCommand("DSCALE_CPU_ISA=avx3 " + dscale + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.out.find("DSCALE_CPU_ISA: expected portable, avx2, avx512 or amx, got \"avx3\""),
              std::string::npos)
        << r.out;
  }
  const std::string avx2 = "DSCALE_CPU_ISA=avx2 " + dscale + " ";
  const testing::CommandResult help = testing::RunCommand(avx2 + "generate --help");
  EXPECT_EQ(help.exit_code, 0) << help.out;
  EXPECT_NE(help.out.find("--activations TEXT:{bf16,f32}=f32"), std::string::npos) << help.out;
  const std::string common = "generate --target " + Target() + " --drafter " + Drafter() +
                             " --ids 9,8,7,6,5 --max-tokens 24 --json --spec ";
  const testing::CommandResult plain = testing::RunCommand(avx2 + common + "none", false);
  const testing::CommandResult spec = testing::RunCommand(avx2 + common + "dflash", false);
  ASSERT_EQ(plain.exit_code, 0);
  ASSERT_EQ(spec.exit_code, 0);
  EXPECT_EQ(OutputIds(nlohmann::json::parse(spec.out)),
            OutputIds(nlohmann::json::parse(plain.out)));
}

TEST_F(ModelCommandsTest, BadInputExitsWithAClearMessage) {
  testing::CommandResult r = RunDscale("logits --model " + Target() + " --ids 1,x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--ids"), std::string::npos) << r.out;
  r = RunDscale("logits --model " + Target() + " --ids 1,97");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("token id 97"), std::string::npos) << r.out;
  r = RunDscale("generate --target " + Target() + " --spec bogus --ids 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--spec"), std::string::npos) << r.out;
  r = RunDscale("generate --target " + Target() + " --spec dflash --ids 1");
  EXPECT_NE(r.out.find("needs --drafter"), std::string::npos) << r.out;
  // A flag's value refused once, under the flag's name (not "--verify-budget: --verify-budget:").
  r = RunDscale("generate --target " + Target() + " --spec none --ids 1 --verify-budget 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--verify-budget: expected auto, auto-rows or a fraction of W·N in (0, 1], "
                       "got \"2\""),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("--verify-budget: --verify-budget"), std::string::npos) << r.out;
  // A KV cache larger than the machine's memory is refused at start-up, with the sizes: 3 layers
  // × 2 KV heads × 16 × K and V × 2 bytes (BF16, the default) or 4 (f32) a position.
  r = RunDscale("generate --target " + Target() + " --spec none --ids 1 --kv-tokens 17179869184");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("KV cache of 17179869184 positions × 384 bytes"), std::string::npos)
      << r.out;
  r = RunDscale("generate --target " + Target() +
                " --spec none --ids 1 --kv-tokens 17179869184 --kv-dtype f32");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("KV cache of 17179869184 positions × 768 bytes"), std::string::npos)
      << r.out;
  r = RunDscale("generate --target " + Target() + " --spec none --ids 1 --kv-dtype f16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--kv-dtype"), std::string::npos) << r.out;
  r = RunDscale("generate --target " + Target() +
                " --spec none --ids 1 --step-trace /nonexistent-dir/trace.jsonl");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--step-trace /nonexistent-dir/trace.jsonl: cannot create it"),
            std::string::npos)
      << r.out;
  r = RunDscale("generate --target " + Target() + " --spec none --prompts /dev/zero");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--prompts: /dev/zero: not a regular file"), std::string::npos) << r.out;
  // Prompt files are checked like any JSON a user gives: ids as the numbers they are, fields of
  // the wrong type named, a key given twice refused.
  const std::string prompt_file = *dir_ + "/bad_prompts.jsonl";
  const std::pair<std::string, std::string> bad_prompts[] = {
      {R"({"ids": [1, 4294967297]})",
       ":1: \"ids\"[1]: expected an integer in [0, 2147483647], got 4294967297"},
      {R"({"ids": [2147483648]})", "\"ids\"[0]: expected an integer in [0, 2147483647]"},
      {R"({"ids": [18446744073709551615]})", "got 18446744073709551615"},
      {R"({"ids": [-1]})", "\"ids\"[0]: expected an integer in [0, 2147483647], got -1"},
      {R"({"ids": [1.0]})", "\"ids\"[0]: expected an integer in [0, 2147483647], got 1.0"},
      {R"({"ids": ["1"]})", "got \"1\""},
      {R"({"ids": 5})", "\"ids\": expected a list of token ids, got 5"},
      {R"({"ids": [1], "ids": [2]})", ":1: duplicate key \"ids\""},
      {R"([1, 2])", "expected a JSON object, got an array of 2 elements"},
  };
  for (const auto& [line, message] : bad_prompts) {
    std::ofstream(prompt_file) << line << "\n";
    r = RunDscale("generate --target " + Target() + " --spec none --prompts " + prompt_file);
    EXPECT_EQ(r.exit_code, 1) << line << "\n" << r.out;
    EXPECT_NE(r.out.find(prompt_file), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << line << "\n" << r.out;
  }
  r = RunDscale("logits --model /nonexistent/dir --ids 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("/nonexistent/dir"), std::string::npos) << r.out;

  // A checkpoint cut short names the file.
  const std::string broken = *dir_ + "/broken";
  std::filesystem::create_directories(broken);
  std::filesystem::copy_file(Target() + "/config.json", broken + "/config.json");
  std::filesystem::copy_file(Target() + "/model.safetensors", broken + "/model.safetensors");
  std::filesystem::resize_file(broken + "/model.safetensors", 5000);
  r = RunDscale("logits --model " + broken + " --ids 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
}

// Counts are range-checked with plain messages (not CLI11's 300-digit bound).
TEST_F(ModelCommandsTest, CountFlagsSayTheirBoundPlainly) {
  const testing::CommandResult r =
      RunDscale("generate --target " + Target() + " --spec none --ids 1 --concurrency 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--concurrency: must be at least 1, got 0"), std::string::npos) << r.out;
  // The most requests one engine runs at once, said by the help and checked alike.
  const testing::CommandResult many =
      RunDscale("generate --target " + Target() + " --spec none --ids 1 --concurrency 65");
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_NE(many.out.find("--concurrency: must be at most 64, got 65"), std::string::npos)
      << many.out;
  for (const std::string command : {"generate", "serve", "collect"}) {
    const testing::CommandResult help = RunDscale(command + " --help");
    EXPECT_EQ(help.exit_code, 0) << help.out;
    EXPECT_NE(help.out.find(command == "generate" ? "INT in [1, 64]" : "[1 - 64]"),
              std::string::npos)
        << command << ":\n"
        << help.out;
    EXPECT_EQ(help.out.find("1 - 1024"), std::string::npos) << help.out;
  }
}

// A tokenizer whose ids exceed the model's vocabulary is refused at start-up, naming the file.
TEST_F(ModelCommandsTest, ATokenizerBeyondTheVocabularyIsRefused) {
  const std::string qwen3 = std::string(DSCALE_TEST_DATA_DIR) + "/tokenizer/qwen3";
  for (const std::string& command :
       {"generate --target " + Target() + " --spec none --prompt hello --tokenizer " + qwen3,
        "collect --target " + Target() + " --drafter " + Drafter() + " --prompts /dev/null --out " +
            *dir_ + "/t.bin --tokenizer " + qwen3}) {
    const testing::CommandResult r = RunDscale(command);
    EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.out;
    EXPECT_NE(r.out.find("tokenizer/qwen3/added_tokens.json"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("has id 151668, outside the model's vocabulary of 97 ids"),
              std::string::npos)
        << r.out;
  }
}

// A NaN in any weight is refused at load, naming the tensor.
TEST_F(ModelCommandsTest, NonFiniteWeightsAreRefusedAtLoad) {
  const std::string poisoned = *dir_ + "/poisoned";
  const std::string path = poisoned + "/model.safetensors";
  std::filesystem::create_directories(poisoned);
  std::filesystem::copy_file(Target() + "/config.json", poisoned + "/config.json");
  std::filesystem::copy_file(Target() + "/model.safetensors", path);
  const std::string tensor = "model.layers.1.mlp.up_proj.weight";
  uint64_t position = 0;
  DType dtype = DType::kF32;
  {
    Result<SafetensorsFile> file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    const TensorInfo* info = file->Find(tensor);
    ASSERT_NE(info, nullptr);
    dtype = info->dtype;
    uint64_t header_bytes = 0;
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&header_bytes), sizeof header_bytes);
    // Element 3 of the tensor: data region after the length and the header.
    position = sizeof header_bytes + header_bytes + info->begin + 3 * DTypeSize(dtype);
  }
  std::vector<unsigned char> nan(DTypeSize(dtype));
  const float quiet_nan = std::numeric_limits<float>::quiet_NaN();
  ConvertFromF32(dtype, &quiet_nan, 1, nan.data());
  {
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(position));
    out.write(reinterpret_cast<const char*>(nan.data()), static_cast<std::streamsize>(nan.size()));
  }
  for (const std::string& command : {"logits --model " + poisoned + " --ids 1",
                                     "generate --target " + poisoned + " --spec none --ids 1"}) {
    const testing::CommandResult r = RunDscale(command);
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_NE(r.out.find("\"" + tensor + "\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("element 3 is NaN or infinite"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace dscale

namespace dscale {
namespace {

// The predictor pipeline end to end: collect traces with full-width DFlash, train a predictor
// on them, then serve --spec dscale with it; greedy output equals plain decoding.
TEST_F(ModelCommandsTest, CollectTrainAndServeDScale) {
  const std::string prompts = *dir_ + "/prompts.jsonl";
  {
    std::ofstream file(prompts);
    for (int i = 0; i < 12; ++i) {
      file << "{\"ids\": [" << (i * 7) % 90 << ", " << (i * 13) % 90 << ", " << (i * 29) % 90
           << ", 4, 5]}\n";
    }
  }
  const std::string traces = *dir_ + "/traces.bin";
  const std::string predictor = *dir_ + "/predictor.bin";
  testing::CommandResult r =
      RunDscale("collect --target " + Target() + " --drafter " + Drafter() + " --prompts " +
                prompts + " --out " + traces + " --max-tokens 16 --concurrency 8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("from 12 prompts"), std::string::npos) << r.out;
  r = RunDscale("train-predictor --traces " + traces + " --out " + predictor + " --epochs 3");
  ASSERT_EQ(r.exit_code, 0) << r.out;

  const std::string common = " --target " + Target() + " --drafter " + Drafter() + " --prompts " +
                             prompts + " --max-tokens 16 --concurrency 8 --json";
  const nlohmann::json plain = Json("generate --spec none" + common);
  const nlohmann::json dscale = Json("generate --spec dscale --predictor " + predictor + common);
  ASSERT_EQ(plain["requests"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(dscale["requests"][i]["output_ids"], plain["requests"][i]["output_ids"]) << i;
  }

  // Without --predictor the drafter folder's predictor.bin is used; this drafter has none.
  r = RunDscale("generate --spec dscale" + common);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--predictor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(Drafter() + "/predictor.bin"), std::string::npos) << r.out;
  const std::string shipped = *dir_ + "/drafter-with-predictor";
  std::filesystem::copy(Drafter(), shipped);
  std::filesystem::copy_file(predictor, shipped + "/predictor.bin");
  const nlohmann::json by_default =
      Json("generate --spec dscale --target " + Target() + " --drafter " + shipped + " --prompts " +
           prompts + " --max-tokens 16 --concurrency 8 --json");
  ASSERT_EQ(by_default["requests"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(by_default["requests"][i]["output_ids"], dscale["requests"][i]["output_ids"]) << i;
  }

  // Without --spec, generate runs the fastest lossless policy the folders allow and says which on
  // stderr: dscale with the auto budget where a predictor is at hand (the drafter folder's, or
  // --predictor), DFlash where none is, plain decoding without a drafter. Every choice commits
  // plain decoding's tokens.
  const std::string rest = " --prompts " + prompts + " --max-tokens 16 --concurrency 8";
  const std::pair<std::string, std::string> defaults[] = {
      {" --drafter " + shipped,
       "--spec dscale --verify-budget auto (predictor " + shipped + "/predictor.bin;"},
      {" --drafter " + Drafter() + " --predictor " + predictor,
       "--spec dscale --verify-budget auto (--predictor given;"},
      {" --drafter " + shipped + " --verify-budget 0.25", "--spec dscale --verify-budget 0.25 ("},
      {" --drafter " + Drafter(),
       "--spec dflash (no predictor at " + Drafter() + "/predictor.bin;"},
      {"", "--spec none (no --drafter;"},
  };
  for (const auto& [folders, said] : defaults) {
    const std::string args = "generate --target " + Target() + folders + rest;
    r = RunDscale(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("dscale generate: " + said), std::string::npos) << args << "\n" << r.out;
    const nlohmann::json out = Json(args + " --json");
    ASSERT_EQ(out["requests"].size(), 12u) << args;
    for (size_t i = 0; i < 12; ++i) {
      EXPECT_EQ(out["requests"][i]["output_ids"], plain["requests"][i]["output_ids"])
          << args << " " << i;
    }
  }

  // --verify-budget auto and the dspark baseline (its SPS table profiled, stored, reloaded).
  const std::string sps = *dir_ + "/sps.json";
  const std::string with_predictor = " --predictor " + predictor + common;
  const nlohmann::json automatic =
      Json("generate --spec dscale --verify-budget auto" + with_predictor);
  EXPECT_TRUE(automatic["stats"].contains("auto_budget"));
  // A dense target: no expert model.
  EXPECT_FALSE(automatic["stats"]["auto_budget"].contains("experts"));
  const nlohmann::json profiled =
      Json("generate --spec dspark --sps-table-out " + sps + with_predictor);
  ASSERT_TRUE(std::filesystem::exists(sps));
  const nlohmann::json loaded = Json("generate --spec dspark --sps-table " + sps + with_predictor);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(automatic["requests"][i]["output_ids"], plain["requests"][i]["output_ids"]) << i;
    EXPECT_EQ(profiled["requests"][i]["output_ids"], plain["requests"][i]["output_ids"]) << i;
    EXPECT_EQ(loaded["requests"][i]["output_ids"], plain["requests"][i]["output_ids"]) << i;
  }
  r = RunDscale("generate --spec dscale --verify-budget half" + with_predictor);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--verify-budget"), std::string::npos) << r.out;
  r = RunDscale("generate --spec dspark --sps-table " + *dir_ + "/missing.json" + with_predictor);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("--sps-table"), std::string::npos) << r.out;
  // A table of the wrong types is an error naming the field, in generate and in serve (which
  // reads it before it listens), never an exception out of the JSON library.
  const std::string bad_sps = *dir_ + "/bad_sps.json";
  const std::pair<std::string, std::string> bad_tables[] = {
      {R"({"format": 5})", "field \"format\": expected \"dscale-sps-v1\", got 5"},
      {R"({"format": null})", "field \"format\": expected \"dscale-sps-v1\", got nothing"},
      {R"({"format": ["dscale-sps-v1"]})",
       "field \"format\": expected \"dscale-sps-v1\", got an array of 1 element"},
      {R"({"format": {"a": 1}})", "field \"format\": expected \"dscale-sps-v1\", got an object"},
      {R"({"format": "dscale-sps-v1", "verify_tokens": [4294967297], "steps_per_second": [1]})",
       "field \"verify_tokens[0]\": expected an integer in [1, 2147483648], got 4294967297"},
      {R"({"format": "dscale-sps-v1", "verify_tokens": [1], "steps_per_second": [1],
           "target": 5})",
       "field \"target\": expected a string, got 5"},
  };
  for (const auto& [table, message] : bad_tables) {
    std::ofstream(bad_sps) << table;
    for (const std::string& command :
         {"generate --spec dspark --sps-table " + bad_sps + with_predictor,
          // The bundled pair: serve needs a tokenizer, which this tiny target lacks.
          "serve --spec dspark --target " + std::string(DSCALE_MODELS_DIR) + "/tiny-target" +
              " --drafter " + std::string(DSCALE_MODELS_DIR) + "/tiny-dflash" +
              " --host 127.0.0.1 --port 0 --sps-table " + bad_sps}) {
      r = RunDscale(command);
      EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.out;
      EXPECT_NE(r.out.find("--sps-table: " + bad_sps + ": " + message), std::string::npos)
          << table << "\n"
          << r.out;
    }
  }

  // Seeded sampling emits the same tokens with or without speculation, at any budget.
  const std::string sampled = " --temperature 0.9 --seed 5";
  const nlohmann::json plain_sampled = Json("generate --spec none" + common + sampled);
  const nlohmann::json auto_sampled =
      Json("generate --spec dscale --verify-budget auto" + with_predictor + sampled);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(auto_sampled["requests"][i]["output_ids"], plain_sampled["requests"][i]["output_ids"])
        << "request " << i;
  }
}

}  // namespace
}  // namespace dscale
