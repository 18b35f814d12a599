// The inflation plan's arithmetic, without weights: named shapes, layer placement, head grouping,
// RoPE frequencies, the residual scale and constant dims, and the errors for shapes that do not
// fit the source.

#include "inflate/inflate_plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "io/llama_shapes.h"
#include "io/qwen3_shapes.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::OddTinyConfig;
using testing::TestDrafterConfig;

// The bundled pair's geometry: hidden 256, 6 layers, 4/2 heads × 64, drafter ids {1, 3, 5}.
DecoderConfig BundledLikeTarget() {
  DecoderConfig c = OddTinyConfig();
  c.vocab_size = 4160;
  c.hidden_size = 256;
  c.intermediate_size = 640;
  c.num_hidden_layers = 6;
  c.head_dim = 64;
  c.rope_theta = 1e6;
  return c;
}

DFlashConfig BundledLikeDrafter(const DecoderConfig& target) {
  DFlashConfig d = TestDrafterConfig(target);
  d.draft.num_hidden_layers = 1;
  d.target_layer_ids = {1, 3, 5};
  return d;
}

InflateShape Shape(const std::string& name) { return *NamedInflateShape(name); }

TEST(InflatePlanTest, NamedShapesAreQwen3s) {
  const InflateShape s8 = Shape("qwen3-8b");
  EXPECT_EQ(s8.hidden_size, 4096);
  EXPECT_EQ(s8.intermediate_size, 12288);
  EXPECT_EQ(s8.num_hidden_layers, 36);
  EXPECT_EQ(s8.num_attention_heads, 32);
  EXPECT_FALSE(s8.tie_word_embeddings);
  for (const char* name : {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"}) {
    const InflateShape s = Shape(name);
    EXPECT_EQ(s.vocab_size, 151936) << name;
    EXPECT_EQ(s.head_dim, 128) << name;
    EXPECT_EQ(s.num_key_value_heads, 8) << name;
    EXPECT_EQ(s.tie_word_embeddings, std::string(name) != "qwen3-8b") << name;
  }
  EXPECT_EQ(Shape("qwen3-0.6b").hidden_size, 1024);
  EXPECT_EQ(Shape("qwen3-1.7b").intermediate_size, 6144);
  EXPECT_EQ(Shape("qwen3-4b").hidden_size, 2560);
  EXPECT_FALSE(NamedInflateShape("qwen3-14b").has_value());
  EXPECT_EQ(Shape("qwen3-4b").family, ModelFamily::kQwen3);
}

// Llama 3.2-1B / 3B and 3.1-8B as their config.json files give them.
TEST(InflatePlanTest, NamedShapesAreLlamas) {
  const InflateShape s1 = Shape("llama-3.2-1b");
  EXPECT_EQ(s1.hidden_size, 2048);
  EXPECT_EQ(s1.num_hidden_layers, 16);
  EXPECT_EQ(s1.num_attention_heads, 32);
  EXPECT_EQ(s1.head_dim, 64);
  EXPECT_EQ(s1.intermediate_size, 8192);
  EXPECT_TRUE(s1.tie_word_embeddings);
  const InflateShape s3 = Shape("llama-3.2-3b");
  EXPECT_EQ(s3.hidden_size, 3072);
  EXPECT_EQ(s3.num_hidden_layers, 28);
  EXPECT_EQ(s3.num_attention_heads, 24);
  EXPECT_EQ(s3.head_dim, 128);
  EXPECT_EQ(s3.intermediate_size, 8192);
  EXPECT_TRUE(s3.tie_word_embeddings);
  const InflateShape s8 = Shape("llama-3.1-8b");
  EXPECT_EQ(s8.hidden_size, 4096);
  EXPECT_EQ(s8.num_hidden_layers, 32);
  EXPECT_EQ(s8.num_attention_heads, 32);
  EXPECT_EQ(s8.head_dim, 128);
  EXPECT_EQ(s8.intermediate_size, 14336);
  EXPECT_FALSE(s8.tie_word_embeddings);
  for (const char* name : {"llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"}) {
    const InflateShape s = Shape(name);
    EXPECT_EQ(s.family, ModelFamily::kLlama) << name;
    EXPECT_EQ(s.vocab_size, 128256) << name;
    EXPECT_EQ(s.num_key_value_heads, 8) << name;
    const DecoderConfig c = *NamedLlamaConfig(name);
    EXPECT_EQ(c.rope_theta, 500000.0) << name;
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3) << name;
    EXPECT_EQ(c.rope_scaling.factor, std::string(name) == "llama-3.1-8b" ? 8.0 : 32.0) << name;
    EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0) << name;
    EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0) << name;
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192) << name;
    EXPECT_FALSE(c.qk_norm) << name;
    // What a checkpoint of this shape's config.json reads back as.
    EXPECT_EQ(ParseDecoderConfig(DecoderConfigToJson(c), name).value(), c) << name;
  }
  EXPECT_NE(NamedInflateShapes().find("llama-3.1-8b"), std::string::npos);
}

// A named shape's family must be the source's; sizes alone carry none.
TEST(InflatePlanTest, ANamedShapeOfAnotherFamilyIsRefused) {
  const DecoderConfig qwen = BundledLikeTarget();
  const Result<InflatePlan> plan =
      PlanInflation(qwen, BundledLikeDrafter(qwen), Shape("llama-3.2-1b"));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("llama"), std::string::npos) << plan.status().message();
  InflateShape sizes = Shape("llama-3.2-1b");
  sizes.family.reset();
  EXPECT_TRUE(PlanInflation(qwen, BundledLikeDrafter(qwen), sizes).ok());
}

// The drafter's feature layers move to the DFlash ids of the large depth, each small layer before
// them in order, with identity layers filling the gaps; where the small layers do not fit, the
// ids stay and the identity layers go last.
TEST(InflatePlanTest, LayersLandUnderTheLargeFeatureIds) {
  const LayerPlacement p28 = PlaceLayers(6, 28, {1, 3, 5});
  EXPECT_EQ(p28.feature_ids, (std::vector<int32_t>{1, 13, 25}));
  std::vector<int32_t> want(28, -1);
  want[0] = 0, want[1] = 1, want[12] = 2, want[13] = 3, want[24] = 4, want[25] = 5;
  EXPECT_EQ(p28.layers, want);
  EXPECT_EQ(PlaceLayers(6, 36, {1, 3, 5}).feature_ids, (std::vector<int32_t>{1, 17, 33}));

  // Two small layers after the last id need two large ones after it.
  const LayerPlacement tail = PlaceLayers(3, 8, {0});
  EXPECT_EQ(tail.feature_ids, (std::vector<int32_t>{4}));
  EXPECT_EQ(tail.layers, (std::vector<int32_t>{-1, -1, -1, -1, 0, 1, 2, -1}));

  const LayerPlacement tight = PlaceLayers(3, 5, {0, 2});  // DFlash ids {1, 2}: no room for 1
  EXPECT_EQ(tight.feature_ids, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(tight.layers, (std::vector<int32_t>{0, 1, 2, -1, -1}));
  const LayerPlacement unsorted = PlaceLayers(4, 12, {3, 1});
  EXPECT_EQ(unsorted.feature_ids, (std::vector<int32_t>{3, 1}));
}

// A second drafter of the target, inflated beside the first: it reads the large target the
// first's ids placed, at the large layers its own small ids went to, at 28 layers (the 1.7B
// shape) and where the first's ids did not fit and the identity layers go last.
TEST(InflatePlanTest, ADrafterBesideAnotherReadsWhereItsLayersWent) {
  const DecoderConfig target = BundledLikeTarget();
  DFlashConfig other = BundledLikeDrafter(target);
  other.target_layer_ids = {0, 2, 4};
  for (const auto& [layers, want] : {std::pair{int64_t{28}, std::vector<int32_t>{0, 12, 24}},
                                     std::pair{int64_t{7}, std::vector<int32_t>{0, 2, 4}}}) {
    InflateShape shape = Shape("qwen3-1.7b");
    shape.num_hidden_layers = layers;
    const InflatePlan first = PlanInflation(target, BundledLikeDrafter(target), shape).value();
    InflatePlan beside = PlanInflation(target, other, shape).value();
    PlaceBeside(first, &beside);
    EXPECT_EQ(beside.large_drafter.target_layer_ids, want) << layers;
    EXPECT_EQ(beside.target.layers, first.target.layers) << layers;
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(first.target.layers[want[k]], other.target_layer_ids[k]) << layers;
    }
  }
}

// The residual stream of layer l' equals the small one's at the layer placed last at or before l'.
TEST(InflatePlanTest, FeatureLayersSeeTheSmallFeatureLayersOutputs) {
  for (const int64_t large : {6, 7, 12, 28, 36}) {
    const std::vector<int32_t> ids = {1, 3, 5};
    const LayerPlacement p = PlaceLayers(6, large, ids);
    int32_t last = -1;
    std::vector<int32_t> state(static_cast<size_t>(large));
    for (int64_t l = 0; l < large; ++l) {
      if (p.layers[l] >= 0) {
        EXPECT_EQ(p.layers[l], last + 1) << "small layers in order";
        last = p.layers[l];
      }
      state[l] = last;
    }
    EXPECT_EQ(last, 5) << large;
    for (size_t k = 0; k < ids.size(); ++k) EXPECT_EQ(state[p.feature_ids[k]], ids[k]) << large;
  }
}

// Each small query head keeps its KV head: q head j and its KV head's rows map to one large KV
// group, copied when the large groups are smaller; the RoPE pairs (i, i + h/2) land on pairs
// (r·i, r·i + h'/2).
TEST(InflatePlanTest, HeadsKeepTheirGroupsAndRopePairs) {
  const DecoderConfig t = OddTinyConfig();  // 4 heads over 2 KV heads, head_dim 32
  InflateShape shape = ShapeOf(t);
  shape.hidden_size = 90;
  shape.num_attention_heads = 6;
  shape.num_key_value_heads = 6;  // groups of 1: each small KV head twice
  shape.head_dim = 64;
  Result<InflatePlan> plan = PlanInflation(t, TestDrafterConfig(t), shape);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const int64_t hd = 64, small_hd = 32;
  for (int64_t q = 0; q < 6; ++q) {
    const int64_t small_q = plan->target.q_rows[q * hd];
    if (small_q < 0) continue;
    const int64_t small_head = small_q / small_hd;
    const int64_t small_kv = small_head / 2;
    const int64_t large_kv = q / (6 / 6);
    EXPECT_EQ(plan->target.kv_rows[large_kv * hd] / small_hd, small_kv) << "query head " << q;
  }
  int64_t mapped = 0;
  for (const int64_t r : plan->target.q_rows) mapped += r >= 0;
  EXPECT_EQ(mapped, 4 * small_hd);
  for (int64_t i = 0; i < small_hd / 2; ++i) {
    EXPECT_EQ(plan->head_dim[2 * i], i);
    EXPECT_EQ(plan->head_dim[2 * i + hd / 2], i + small_hd / 2);
  }
  EXPECT_EQ(plan->large_target.rope_theta, t.rope_theta);

  // h' = 1.5·h: r = 1 and rope_theta' = θ^1.5 keeps every frequency.
  shape.head_dim = 48;
  plan = PlanInflation(t, TestDrafterConfig(t), shape);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const double theta = t.rope_theta, large_theta = plan->large_target.rope_theta;
  for (int64_t j = 0; j < 24; ++j) {
    const int64_t i = plan->head_dim[j];
    if (i < 0) continue;
    EXPECT_NEAR(std::pow(large_theta, -2.0 * j / 48.0), std::pow(theta, -2.0 * i / 32.0), 1e-15);
  }
}

// The constants' squares make up the hidden norms' ε exactly where the q/k norms get ε' = σ·ε:
// Σc² = D·(κ·ε − ε') with κ = λ²·d/D ≥ 2σ, λ the least such power of two.
TEST(InflatePlanTest, ConstantsCompleteEveryNormsEpsilon) {
  const DecoderConfig t = BundledLikeTarget();
  for (const char* name : {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"}) {
    Result<InflatePlan> plan = PlanInflation(t, BundledLikeDrafter(t), Shape(name));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const double d = 256, big = static_cast<double>(plan->large_target.hidden_size);
    const double sigma = 64.0 / 128.0;
    const double eps = static_cast<float>(t.rms_norm_eps);
    const double eps_large = static_cast<float>(plan->large_target.rms_norm_eps);
    EXPECT_EQ(eps_large, sigma * eps) << "ε' = σ·ε exactly in float";
    const double lambda = plan->residual_scale;
    const double kappa = lambda * lambda * d / big;
    EXPECT_GE(kappa, 2 * sigma) << name;
    EXPECT_LT(kappa / 4, 2 * sigma) << name << ": λ is the least power of two";
    double squares = 0;
    for (const float c : plan->constant_values) {
      EXPECT_EQ(Bf16ToF32(F32ToBf16(c)), c) << "constants are exact in BF16";
      squares += double{c} * c;
    }
    const double want = big * (kappa * eps - eps_large);
    EXPECT_NEAR(squares, want, want * 0x1p-30) << name;
    EXPECT_EQ(plan->constant_values[0], plan->constant_values[1]);
    EXPECT_EQ(plan->constant_dims.front(), 256);
    EXPECT_DOUBLE_EQ(plan->hidden_gain_scale, std::sqrt(d / big));
    EXPECT_DOUBLE_EQ(plan->key_gain_scale, std::sqrt(sigma));
    // The untied source keeps a separate LM head even where Qwen3 ties it.
    EXPECT_FALSE(plan->large_target.tie_word_embeddings);
    EXPECT_EQ(plan->large_drafter.draft.hidden_size, plan->large_target.hidden_size);
    EXPECT_EQ(plan->large_drafter.num_target_layers, plan->large_target.num_hidden_layers);
  }
}

// With the width unchanged nothing needs constants: ε and the gains stay as they are.
TEST(InflatePlanTest, SameWidthNeedsNoConstants) {
  const DecoderConfig t = OddTinyConfig();
  InflateShape shape = ShapeOf(t);
  shape.num_hidden_layers = 5;
  shape.intermediate_size = 128;
  shape.num_attention_heads = 8;
  Result<InflatePlan> plan = PlanInflation(t, TestDrafterConfig(t), shape);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->constant_dims.empty());
  EXPECT_EQ(plan->residual_scale, 1.0f);
  EXPECT_EQ(plan->large_target.rms_norm_eps, 1e-6);
  EXPECT_EQ(plan->hidden_gain_scale, 1.0);
  EXPECT_TRUE(SetPadRows({}, &*plan).ok());
}

void ExpectError(const DecoderConfig& t, const DFlashConfig& d, const InflateShape& shape,
                 const std::string& needle) {
  const Result<InflatePlan> plan = PlanInflation(t, d, shape);
  ASSERT_FALSE(plan.ok()) << needle;
  EXPECT_NE(plan.status().message().find(needle), std::string::npos) << plan.status().message();
}

// A mixture of experts is not a source, but it is a shape: qwen3-30b-a3b's experts, routed in
// groups of 8 that split the dense source's MLP (member m holds units [m·u, (m + 1)·u)).
TEST(InflatePlanTest, MixturesOfExpertsAreShapesNotSources) {
  EXPECT_FALSE(NamedInflateShape("qwen3.5-4b").has_value());
  const std::optional<InflateShape> a3b = NamedInflateShape("qwen3-30b-a3b");
  ASSERT_TRUE(a3b.has_value());
  EXPECT_EQ(a3b->family, ModelFamily::kQwen3);
  EXPECT_EQ(a3b->moe, NamedQwen3Config("qwen3-30b-a3b")->moe);
  EXPECT_NE(NamedInflateShapes().find("qwen3-30b-a3b"), std::string::npos);

  const DecoderConfig t = BundledLikeTarget();  // intermediate 640
  InflateShape shape = Shape("qwen3-1.7b");
  shape.moe = {.num_experts = 16,
               .experts_per_token = 4,
               .expert_intermediate_size = 200,
               .norm_topk_prob = true};
  const InflatePlan plan = PlanInflation(t, BundledLikeDrafter(t), shape).value();
  EXPECT_EQ(plan.large_target.family, ModelFamily::kQwen3Moe);
  EXPECT_EQ(plan.large_target.moe, shape.moe);
  EXPECT_TRUE(plan.large_drafter.draft.moe.num_experts == 0) << "the drafter stays dense";
  ASSERT_EQ(plan.target.expert_units.size(), 4u);
  for (int64_t m = 0; m < 4; ++m) {
    const IndexMap& rows = plan.target.expert_units[m];
    ASSERT_EQ(rows.size(), 200u);
    for (int64_t j = 0; j < 200; ++j) EXPECT_EQ(rows[j], j < 160 ? m * 160 + j : -1) << m;
  }
  EXPECT_TRUE(plan.drafter.expert_units.empty());

  auto with = [&](auto change) {
    InflateShape s = shape;
    change(s);
    return s;
  };
  const DFlashConfig d = BundledLikeDrafter(t);
  ExpectError(t, d, with([](InflateShape& s) { s.moe.num_experts = 18; }),
              "field \"num_experts\" (--experts): 18 is not a multiple of num_experts_per_tok 4");
  ExpectError(t, d, with([](InflateShape& s) { s.moe.expert_intermediate_size = 159; }),
              "field \"moe_intermediate_size\" (--expert-intermediate): 159 cannot hold");
  ExpectError(t, d, with([](InflateShape& s) { s.moe.norm_topk_prob = false; }),
              "field \"norm_topk_prob\"");
  ExpectError(t, d, with([](InflateShape& s) { s.moe.mlp_only_layers = {2}; }),
              "every layer must be sparse");
  const DecoderConfig moe = testing::EngineTestMoeConfig(true);
  ExpectError(moe, TestDrafterConfig(moe), ShapeOf(moe),
              "inflate: a mixture-of-experts target (qwen3_moe) cannot be inflated yet");
}

// Nor does it take a hybrid target's Gated DeltaNet layers.
TEST(InflatePlanTest, HybridTargetsAreRefused) {
  const DecoderConfig t = testing::EngineTestHybridConfig(2, 4);
  ExpectError(t, TestDrafterConfig(t), ShapeOf(t),
              "inflate: a hybrid target (qwen3_5) with linear_attention layers cannot be inflated "
              "yet");
}

TEST(InflatePlanTest, ShapesThatDoNotFitNameTheField) {
  const DecoderConfig t = OddTinyConfig();
  const DFlashConfig d = TestDrafterConfig(t);
  const InflateShape base = ShapeOf(t);
  auto with = [&](auto change) {
    InflateShape s = base;
    change(s);
    return s;
  };
  ExpectError(t, d, with([](InflateShape& s) { s.hidden_size = 64; }),
              "field \"hidden_size\" (--hidden): 64 is smaller than the source target's 72");
  ExpectError(t, d, with([](InflateShape& s) { s.intermediate_size = 99; }),
              "field \"intermediate_size\" (--intermediate): 99 is smaller");
  ExpectError(t, d, with([](InflateShape& s) { s.num_hidden_layers = 2; }),
              "field \"num_hidden_layers\" (--layers): 2 is smaller");
  ExpectError(t, d, with([](InflateShape& s) { s.vocab_size = 130; }),
              "field \"vocab_size\" (--vocab): 130 is smaller");
  ExpectError(t, d, with([](InflateShape& s) { s.head_dim = 16; }),
              "field \"head_dim\" (--head-dim): 16 is smaller");
  ExpectError(t, d, with([](InflateShape& s) { s.head_dim = 33; }), "33 is odd");
  ExpectError(
      t, d, with([](InflateShape& s) {
        s.num_attention_heads = 6;
        s.num_key_value_heads = 4;
      }),
      "field \"num_attention_heads\" (--heads): 6 is not a multiple of num_key_value_heads 4");
  ExpectError(t, d, with([](InflateShape& s) {
                s.num_attention_heads = 3;
                s.num_key_value_heads = 3;
              }),
              "field \"num_attention_heads\" (--heads): 3 is smaller");
  // Six query heads over two KV heads cannot keep their groups in groups of two over three.
  DecoderConfig six = t;
  six.num_attention_heads = 6;
  InflateShape regroup = ShapeOf(six);
  regroup.num_key_value_heads = 3;
  ExpectError(six, TestDrafterConfig(six), regroup,
              "field \"num_key_value_heads\" (--kv-heads): the source target's 2 KV heads of 3 "
              "query heads each need 4 KV heads in groups of 2, got 3");
  ExpectError(
      t, d, with([](InflateShape& s) { s.draft_layers = 1; }),
      "field \"num_hidden_layers\" (--draft-layers): 1 is smaller than the source drafter's 2");
  ExpectError(
      t, d, with([](InflateShape& s) { s.vocab_size = 140; }),
      "field \"hidden_size\" (--hidden): a wider head_dim or vocabulary needs constant dims");
  ExpectError(t, d, with([](InflateShape& s) {
                s.hidden_size = 73;
                s.vocab_size = 140;
              }),
              "73 leaves no room for");

  DFlashConfig other_eps = d;
  other_eps.draft.rms_norm_eps = 1e-5;
  ExpectError(t, other_eps, base, "drafter config: field \"rms_norm_eps\"");
  DFlashConfig wide_drafter = d;
  wide_drafter.draft.intermediate_size = 200;
  ExpectError(t, wide_drafter, base,
              "field \"intermediate_size\" (--intermediate): 100 is smaller than the source "
              "drafter's 200");
}

// M puts every pad logit kPadLogitMargin below the top real logit for residual rows up to the
// stated bound: −2·M·β·g / (√κ·R) ≤ −(Λ + margin).
TEST(InflatePlanTest, PadWeightCoversTheBounds) {
  const DecoderConfig t = BundledLikeTarget();
  Result<InflatePlan> plan = PlanInflation(t, BundledLikeDrafter(t), Shape("qwen3-1.7b"));
  ASSERT_TRUE(plan.ok());
  const SourceBounds bounds{.target_final_gain = 3.0,
                            .drafter_final_gain = 0.7,
                            .logit_bound = 50.0,
                            .residual_rms_bound = 1e4};
  ASSERT_TRUE(SetPadRows(bounds, &*plan).ok());
  const double g = std::min(plan->target_constant_gain, plan->drafter_constant_gain);
  EXPECT_LE(g, plan->final_gain_scale() * 0.7);
  EXPECT_GT(g, plan->final_gain_scale() * 0.7 / 2);
  const double lambda = plan->residual_scale;
  const double kappa = lambda * lambda * 256.0 / 2048.0;
  const double beta = plan->constant_values[0];
  const double pad = -2.0 * plan->pad_weight * beta * g / (std::sqrt(kappa) * 1e4);
  EXPECT_LE(pad, -(50.0 + kPadLogitMargin));
  EXPECT_GT(pad, -(50.0 + kPadLogitMargin) * 1.01) << "M rounded up by less than a BF16 step";

  const SourceBounds absurd{.target_final_gain = 1,
                            .drafter_final_gain = 1,
                            .logit_bound = 1,
                            .residual_rms_bound = 1e38};
  const Status too_big = SetPadRows(absurd, &*plan);
  EXPECT_NE(too_big.message().find("beyond BF16"), std::string::npos) << too_big.message();
}

// A DSpark drafter keeps its heads (rank, type, confidence inputs) and DeepSpec's layout; its
// backbone is planned as a DFlash drafter's, and its written config loads as DeepSpec's again.
TEST(InflatePlanTest, ADSparkDrafterKeepsItsHeads) {
  const DecoderConfig t = BundledLikeTarget();
  const DSparkHeadConfig heads{.markov_rank = 4,
                               .markov_head_type = MarkovHeadType::kRnn,
                               .confidence_head = true,
                               .confidence_with_markov = true};
  DFlashConfig drafter = testing::TestDSparkConfig(t, heads, 15);
  drafter.target_layer_ids = {1, 3};
  const Result<InflatePlan> plan = PlanInflation(t, drafter, Shape("qwen3-1.7b"));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(plan->large_drafter.is_dspark());
  EXPECT_EQ(*plan->large_drafter.dspark, heads);
  EXPECT_EQ(plan->large_drafter.block_size, 15);
  EXPECT_EQ(plan->large_drafter.draft.hidden_size, 2048);
  EXPECT_EQ(plan->large_drafter.target_layer_ids, (std::vector<int32_t>{1, 25}));
  const Result<DFlashConfig> written = ParseDFlashConfig(DFlashConfigToJson(plan->large_drafter),
                                                         "inflated drafter", plan->large_target);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->dspark, plan->large_drafter.dspark);
  // The LM head is tied at 1.7B only for a tied source: then a final-normed row is z/λ, and every
  // matrix reading one multiplies its small columns by λ.
  EXPECT_EQ(plan->final_row_scale(), 1.0f);
  DecoderConfig tied = t;
  tied.tie_word_embeddings = true;
  const Result<InflatePlan> tied_plan = PlanInflation(tied, drafter, Shape("qwen3-1.7b"));
  ASSERT_TRUE(tied_plan.ok()) << tied_plan.status().message();
  EXPECT_EQ(tied_plan->final_row_scale(), tied_plan->residual_scale);
}

}  // namespace
}  // namespace dscale
