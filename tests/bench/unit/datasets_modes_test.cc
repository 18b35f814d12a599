#include <gtest/gtest.h>

#include <string>

#include "bench/datasets.h"
#include "bench/in_process.h"
#include "bench/modes.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale::bench {
namespace {

TEST(Datasets, PromptFormats) {
  EXPECT_EQ(FormatPrompt("gsm8k", "Q?"),
            "Q?\nPlease reason step by step, and put your final answer within \\boxed{}.");
  EXPECT_EQ(FormatPrompt("math500", "P"), FormatPrompt("gsm8k", "P"));
  EXPECT_EQ(FormatPrompt("humaneval", "def f():\n"),
            "Write a solution to the following problem and make sure that it passes the "
            "tests:\n```python\ndef f():\n\n```");
  EXPECT_EQ(FormatPrompt("mbpp", "Write a function."), "Write a function.");
}

TEST(Datasets, LoadsTheBundledFiles) {
  Result<Dataset> gsm8k = LoadDataset(DSCALE_DATA_DIR, "gsm8k", 256);
  ASSERT_TRUE(gsm8k.ok()) << gsm8k.status().ToString();
  EXPECT_EQ(gsm8k->prompts.size(), 256u);
  EXPECT_EQ(gsm8k->prompts[0].rfind("Janet", 0), 0u);
  Result<Dataset> humaneval = LoadDataset(DSCALE_DATA_DIR, "humaneval", 1000);
  ASSERT_TRUE(humaneval.ok());
  EXPECT_EQ(humaneval->prompts.size(), 164u);
  Result<Dataset> math = LoadDataset(DSCALE_DATA_DIR, "math500", 1000);
  ASSERT_TRUE(math.ok());
  EXPECT_EQ(math->prompts.size(), 500u);
  // MBPP's test split is task ids 11..510.
  Result<Dataset> mbpp = LoadDataset(DSCALE_DATA_DIR, "mbpp", 1000);
  ASSERT_TRUE(mbpp.ok());
  EXPECT_EQ(mbpp->prompts.size(), 500u);
  EXPECT_EQ(mbpp->prompts[0].rfind("Write a python function to remove first and last", 0), 0u);
}

TEST(Datasets, ErrorsNameTheProblem) {
  Result<Dataset> unknown = LoadDataset(DSCALE_DATA_DIR, "squad", 4);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("squad"), std::string::npos);
  Result<Dataset> missing = LoadDataset("/nonexistent", "gsm8k", 4);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("gsm8k/test.jsonl"), std::string::npos);
  EXPECT_NE(missing.status().message().find("--data-dir"), std::string::npos);
}

TEST(Datasets, ChatPromptsUseTheTemplateWithThinkingOff) {
  Result<Tokenizer> tok = Tokenizer::Load(DSCALE_TEST_DATA_DIR "/tokenizer/qwen3");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<std::string> texts = {"Hi there"};
  auto ids = EncodeChatPrompts(*tok, texts);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(tok->Decode((*ids)[0]).value(),
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(Modes, ParseWithAutomaticTiles) {
  auto modes = ParseModes("none, dflash,fixed:8,dscale", TileRouting::kAuto);
  ASSERT_TRUE(modes.ok());
  ASSERT_EQ(modes->size(), 4u);
  EXPECT_EQ((*modes)[2].label, "fixed:8");
  EXPECT_TRUE((*modes)[0].tile_routing);
  EXPECT_FALSE((*modes)[1].tile_routing);  // the DFlash baseline: one 128-row tile
  EXPECT_TRUE((*modes)[3].tile_routing);
  auto off = ParseModes("dscale", TileRouting::kOff);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE((*off)[0].tile_routing);
  EXPECT_FALSE(ParseModes("fast", TileRouting::kAuto).ok());
  EXPECT_FALSE(ParseModes("", TileRouting::kAuto).ok());
}

// The report keys each cell by its mode's label, so a mode given twice (also under another
// spelling of the same policy) is refused, naming --repeats for alternating runs.
TEST(Modes, AModeListedTwiceIsRefused) {
  for (const char* list : {"none,dscale:auto,none", "fixed:8,dflash,fixed:08"}) {
    const auto twice = ParseModes(list, TileRouting::kAuto);
    ASSERT_FALSE(twice.ok()) << list;
    EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos);
    EXPECT_NE(twice.status().message().find("--repeats"), std::string::npos);
  }
  EXPECT_TRUE(ParseModes("dscale,dscale:auto,dscale:auto-rows", TileRouting::kAuto).ok());
}

TEST(Modes, DScaleWithItsOwnBudgetAndTheDSparkBaseline) {
  auto modes = ParseModes("dscale,dscale:auto,dscale:0.25,dspark", TileRouting::kAuto);
  ASSERT_TRUE(modes.ok()) << modes.status().message();
  ASSERT_EQ(modes->size(), 4u);
  EXPECT_EQ((*modes)[0].verify_budget, "");  // the run's --verify-budget
  EXPECT_FALSE((*modes)[0].adaptive);
  EXPECT_EQ((*modes)[1].label, "dscale:auto");
  EXPECT_EQ((*modes)[1].policy, "dscale");
  EXPECT_EQ((*modes)[1].verify_budget, "auto");
  EXPECT_TRUE((*modes)[1].adaptive);
  EXPECT_EQ((*modes)[2].verify_budget, "0.25");
  EXPECT_FALSE((*modes)[2].adaptive);
  EXPECT_EQ((*modes)[3].policy, "dspark");
  EXPECT_TRUE((*modes)[3].adaptive);
  EXPECT_NE((*modes)[3].note.find("DSpark scheduler on the DFlash drafter"), std::string::npos);
  const auto bad = ParseModes("dscale:2", TileRouting::kAuto);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--verify-budget"), std::string::npos);
}

TEST(Modes, DominoRowsDraftThroughTheHead) {
  auto modes = ParseModes("dflash,domino,domino+dscale", TileRouting::kAuto);
  ASSERT_TRUE(modes.ok()) << modes.status().message();
  ASSERT_EQ(modes->size(), 3u);
  EXPECT_EQ((*modes)[0].drafter, ModeDrafter::kMain);
  EXPECT_EQ((*modes)[1].label, "domino");
  EXPECT_EQ((*modes)[1].policy, "dflash");  // full-block verification, as Domino runs it
  EXPECT_EQ((*modes)[1].drafter, ModeDrafter::kDomino);
  EXPECT_FALSE((*modes)[1].tile_routing);
  EXPECT_EQ((*modes)[2].label, "domino+dscale");
  EXPECT_EQ((*modes)[2].policy, "dscale");
  EXPECT_EQ((*modes)[2].drafter, ModeDrafter::kDomino);
  EXPECT_TRUE((*modes)[2].tile_routing);
  const auto bad = ParseModes("domino+dspark", TileRouting::kAuto);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("domino+dscale"), std::string::npos);
}

// dspark-drafter alone is DSpark as published (its drafter, the dspark policy); with +P any
// policy on that drafter.
TEST(Modes, DSparkDrafterRowsDraftWithDSparksDrafter) {
  auto modes = ParseModes("dspark,dspark-drafter,dspark-drafter+dscale:auto,dspark-drafter+dflash",
                          TileRouting::kAuto);
  ASSERT_TRUE(modes.ok()) << modes.status().message();
  ASSERT_EQ(modes->size(), 4u);
  EXPECT_EQ((*modes)[0].drafter, ModeDrafter::kMain);
  EXPECT_EQ((*modes)[1].label, "dspark-drafter");
  EXPECT_EQ((*modes)[1].policy, "dspark");
  EXPECT_EQ((*modes)[1].drafter, ModeDrafter::kDSpark);
  EXPECT_NE((*modes)[1].note.find("DSpark as published"), std::string::npos);
  EXPECT_EQ((*modes)[2].policy, "dscale");
  EXPECT_EQ((*modes)[2].verify_budget, "auto");
  EXPECT_EQ((*modes)[2].drafter, ModeDrafter::kDSpark);
  EXPECT_EQ((*modes)[3].policy, "dflash");
  EXPECT_FALSE((*modes)[3].tile_routing);
  const auto bad = ParseModes("dspark-drafter+fast", TileRouting::kAuto);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dspark-drafter+fast"), std::string::npos);
}

TEST(Modes, PresetsAndLists) {
  const std::vector<BenchMode> ablation = AblationModes(false);
  ASSERT_EQ(ablation.size(), 4u);
  EXPECT_FALSE(ablation[0].tile_routing);
  EXPECT_TRUE(ablation[1].tile_routing);
  EXPECT_EQ(ablation[2].policy, "dscale");
  EXPECT_FALSE(ablation[3].runnable);
  EXPECT_NE(ablation[3].note.find("n/a on CPU"), std::string::npos);
  EXPECT_TRUE(AblationModes(true)[3].runnable);
  auto widths = WidthModes("4,16");
  ASSERT_TRUE(widths.ok());
  EXPECT_EQ((*widths)[1].policy, "fixed:16");
  EXPECT_FALSE(WidthModes("1").ok());
  auto list = ParsePositiveList("8, 16,32", "--concurrency");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<int32_t>{8, 16, 32}));
  auto bad = ParsePositiveList("8,x", "--concurrency");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos);
}

}  // namespace
}  // namespace dscale::bench
