// Qwen3.5 checkpoints at the weights seam: the tensor list of a hybrid model (Gated DeltaNet
// layers in place of the attention tensors, q_proj doubled by the output gate), both layouts'
// names, the zero-centred norms held as 1 + w (the gated norm as stored), the mixture of experts'
// fused experts and shared expert, and a missing tensor refused by name.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>

#include "io/safetensors.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

std::string TempDir(const std::string& tag) {
  return std::filesystem::temp_directory_path() /
         ("dscale_qwen3_5_weights_" + tag + "_" + std::to_string(getpid()));
}

TEST(Qwen3_5WeightsTest, TensorListHasTheLinearAttentionLayers) {
  DecoderConfig config = TinyQwen3_5Config();
  const TensorShapes shapes = DecoderTensorShapes(config);
  // 3 linear layers of 14 tensors, 1 attention layer of 11, embedding, final norm, LM head.
  EXPECT_EQ(shapes.size(), 3u * 14u + 11u + 3u);
  std::map<std::string, std::vector<int64_t>> by_name(shapes.begin(), shapes.end());
  const GatedDeltaNetConfig& l = config.hybrid.linear;
  EXPECT_EQ(by_name.at("model.layers.0.linear_attn.in_proj_qkv.weight"),
            (std::vector<int64_t>{2 * 32 + 64, 128}));
  EXPECT_EQ(by_name.at("model.layers.2.linear_attn.conv1d.weight"),
            (std::vector<int64_t>{l.conv_dim(), 1, 4}));
  EXPECT_EQ(by_name.at("model.layers.1.linear_attn.A_log"), (std::vector<int64_t>{4}));
  EXPECT_EQ(by_name.at("model.layers.1.linear_attn.dt_bias"), (std::vector<int64_t>{4}));
  EXPECT_EQ(by_name.at("model.layers.1.linear_attn.norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(by_name.at("model.layers.3.self_attn.q_proj.weight"),
            (std::vector<int64_t>{2 * 4 * 32, 128}));
  EXPECT_EQ(by_name.count("model.layers.0.self_attn.q_proj.weight"), 0u);
  EXPECT_EQ(by_name.count("model.layers.3.linear_attn.out_proj.weight"), 0u);

  config.hybrid.multimodal_layout = true;
  for (const auto& [name, shape] : DecoderTensorShapes(config)) {
    EXPECT_TRUE(name == "lm_head.weight" || name.starts_with("model.language_model.")) << name;
  }
}

// Loads the written checkpoint and checks each layer against the values written.
void ExpectLoadsAsWritten(const DecoderConfig& config, const std::string& dir) {
  ASSERT_TRUE(WriteRandomCheckpoint(dir, config, 11, DType::kBF16).ok());
  Result<Checkpoint> opened = Checkpoint::Open(dir);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened).value());
  Result<DecoderConfig> read_config = LoadCheckpointConfig(dir);
  ASSERT_TRUE(read_config.ok()) << read_config.status().message();
  EXPECT_EQ(*read_config, config);
  Result<DecoderWeights> w = LoadDecoderWeights(config, CheckpointTensorReader(checkpoint));
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::map<std::string, std::vector<float>> written;
  for (TensorToWrite& t : RandomDecoderTensors(config, 11, DType::kBF16)) {
    written[t.name] = std::move(t.values);
  }
  const std::string p = config.TensorPrefix();
  const GatedDeltaNetConfig& l = config.hybrid.linear;
  for (int64_t layer = 0; layer < 4; ++layer) {
    const DecoderLayerWeights& lw = w->layers[static_cast<size_t>(layer)];
    const std::string at = p + "layers." + std::to_string(layer) + ".";
    const std::vector<float>& input_norm = written.at(at + "input_layernorm.weight");
    for (size_t i = 0; i < input_norm.size(); ++i) {
      EXPECT_EQ(lw.input_norm[i], input_norm[i] + 1.0f);
    }
    if (layer < 3) {
      EXPECT_TRUE(lw.qkv.empty());
      EXPECT_EQ(lw.linear.in_proj.rows(), l.conv_dim() + l.value_dim() + 2 * l.value_heads);
      EXPECT_EQ(lw.linear.in_proj.cols(), config.hidden_size);
      // conv1d.weight [conv_dim, 1, kernel], kept tap-major: [kernel, conv_dim].
      const std::vector<float>& conv = written.at(at + "linear_attn.conv1d.weight");
      ASSERT_EQ(lw.linear.conv.size(), conv.size());
      for (int64_t c = 0; c < l.conv_dim(); ++c) {
        for (int64_t j = 0; j < l.conv_kernel; ++j) {
          EXPECT_EQ(lw.linear.conv[j * l.conv_dim() + c], conv[c * l.conv_kernel + j]);
        }
      }
      EXPECT_EQ(lw.linear.a_log, written.at(at + "linear_attn.A_log"));
      EXPECT_EQ(lw.linear.dt_bias, written.at(at + "linear_attn.dt_bias"));
      EXPECT_EQ(lw.linear.norm, written.at(at + "linear_attn.norm.weight"));  // plain gain
      EXPECT_EQ(lw.linear.out_proj.cols(), l.value_dim());
    } else {
      EXPECT_TRUE(lw.linear.empty());
      EXPECT_EQ(lw.qkv.rows(), 2 * config.q_dim() + 2 * config.kv_dim());
      const std::vector<float>& q_norm = written.at(at + "self_attn.q_norm.weight");
      for (size_t i = 0; i < q_norm.size(); ++i) EXPECT_EQ(lw.q_norm[i], q_norm[i] + 1.0f);
    }
  }
  EXPECT_EQ(w->final_norm[0], written.at(p + "norm.weight")[0] + 1.0f);
}

TEST(Qwen3_5WeightsTest, LoadsBothLayoutsWithCentredNormsAsOnePlusW) {
  for (const bool multimodal : {false, true}) {
    DecoderConfig config = TinyQwen3_5Config();
    config.hybrid.multimodal_layout = multimodal;
    const std::string dir = TempDir(multimodal ? "mm" : "text");
    ExpectLoadsAsWritten(config, dir);
    std::filesystem::remove_all(dir);
  }
}

// Qwen3.5-MoE: a sparse layer's MLP tensors are the router, the two fused expert tensors
// (parameters, named without ".weight") and the shared expert's four; loaded, expert e's matrices
// are the fused tensors' slice e, the shared expert's gate/up stacked.
TEST(Qwen3_5WeightsTest, MoeLoadsFusedExpertsAndTheSharedExpertAsWritten) {
  const DecoderConfig config = TinyQwen3_5MoeConfig();
  const MoeConfig& m = config.moe;
  const int64_t h = config.hidden_size, e = m.num_experts, i = m.expert_intermediate_size;
  const int64_t si = m.shared_expert_intermediate_size;
  const TensorShapes layer = DecoderLayerShapes(config, "model.", 3);
  const std::string at = "model.layers.3.";
  const TensorShapes want = {{at + "mlp.gate.weight", {e, h}},
                             {at + "mlp.experts.gate_up_proj", {e, 2 * i, h}},
                             {at + "mlp.experts.down_proj", {e, h, i}},
                             {at + "mlp.shared_expert.gate_proj.weight", {si, h}},
                             {at + "mlp.shared_expert.up_proj.weight", {si, h}},
                             {at + "mlp.shared_expert.down_proj.weight", {h, si}},
                             {at + "mlp.shared_expert_gate.weight", {1, h}}};
  EXPECT_EQ(TensorShapes(layer.end() - 7, layer.end()), want);

  const std::string dir = TempDir("moe");
  ASSERT_TRUE(WriteRandomCheckpoint(dir, config, 11, DType::kBF16).ok());
  Result<Checkpoint> opened = Checkpoint::Open(dir);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened).value());
  Result<DecoderWeights> w = LoadDecoderWeights(config, CheckpointTensorReader(checkpoint));
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::map<std::string, std::vector<float>> written;
  for (TensorToWrite& t : RandomDecoderTensors(config, 11, DType::kBF16)) {
    written[t.name] = std::move(t.values);
  }
  const SparseMlpWeights& moe = w->layers[3].moe;
  ASSERT_EQ(static_cast<int64_t>(moe.experts.size()), e);
  const std::vector<float>& gate_up = written.at(at + "mlp.experts.gate_up_proj");
  const std::vector<float>& down = written.at(at + "mlp.experts.down_proj");
  for (const int64_t expert : {int64_t{0}, int64_t{5}, e - 1}) {
    const ExpertWeights& x = moe.experts[static_cast<size_t>(expert)];
    EXPECT_EQ(x.gate_up.rows(), 2 * i);
    EXPECT_EQ(x.down.rows(), h);
    EXPECT_EQ(x.gate_up.ToF32(), std::vector<float>(gate_up.begin() + expert * 2 * i * h,
                                                    gate_up.begin() + (expert + 1) * 2 * i * h));
    EXPECT_EQ(x.down.ToF32(), std::vector<float>(down.begin() + expert * h * i,
                                                 down.begin() + (expert + 1) * h * i));
  }
  std::vector<float> shared_gate_up = written.at(at + "mlp.shared_expert.gate_proj.weight");
  const std::vector<float>& up = written.at(at + "mlp.shared_expert.up_proj.weight");
  shared_gate_up.insert(shared_gate_up.end(), up.begin(), up.end());
  EXPECT_EQ(moe.shared.gate_up.ToF32(), shared_gate_up);
  EXPECT_EQ(moe.shared.down.ToF32(), written.at(at + "mlp.shared_expert.down_proj.weight"));
  EXPECT_EQ(moe.shared_gate.ToF32(), written.at(at + "mlp.shared_expert_gate.weight"));
  EXPECT_TRUE(w->layers[3].gate_up.empty());
  std::filesystem::remove_all(dir);
}

TEST(Qwen3_5WeightsTest, MissingTensorIsRefusedByName) {
  const DecoderConfig config = TinyQwen3_5Config();
  const std::string dir = TempDir("missing");
  std::filesystem::create_directories(dir);
  std::vector<TensorToWrite> tensors = RandomDecoderTensors(config, 3, DType::kF32);
  std::erase_if(tensors,
                [](const TensorToWrite& t) { return t.name.ends_with("2.linear_attn.dt_bias"); });
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
  Result<Checkpoint> opened = Checkpoint::Open(dir);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened).value());
  const Result<DecoderWeights> w = LoadDecoderWeights(config, CheckpointTensorReader(checkpoint));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("model.layers.2.linear_attn.dt_bias"), std::string::npos)
      << w.status().message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dscale
