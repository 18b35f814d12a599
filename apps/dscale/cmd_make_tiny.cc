// dscale make-tiny: writes a random Qwen3, Llama, Qwen3-MoE, Qwen3.5 or Qwen3.5-MoE checkpoint in
// the real Hugging Face layout, at the sizes given or at a named real shape (--shape qwen3-8b,
// llama-3.1-8b, qwen3-30b-a3b, qwen3.5-35b-a3b, ...), optionally with fewer layers (--layers), and
// optionally a matching drafter: z-lab's DFlash layout, or DeepSpec's DSpark layout (--drafter-arch
// dspark) with its heads and its copies of the target's embedding and LM head.

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "io/dflash_config.h"
#include "io/llama_shapes.h"
#include "io/qwen3_5_config.h"
#include "io/qwen3_shapes.h"
#include "io/safetensors.h"
#include "model/random_checkpoint.h"

namespace dscale::cli {
namespace {

struct MakeTinyArgs {
  std::string out;
  uint64_t seed = 0;
  std::string dtype = "BF16";
  DecoderConfig config = TinyQwen3Config();
  std::string arch = "qwen3";
  std::string shape;  // a named real config (family, sizes, RoPE, ε, BOS/EOS); excludes the sizes
  bool layers_given = false;  // --layers: with --shape, the shape's first layers only
  // qwen3_moe, qwen3_5_moe: the sparse MLP (TinyQwen3MoeConfig's by default), and qwen3_5_moe's
  // shared expert.
  MoeConfig moe = TinyQwen3MoeConfig().moe;
  int64_t shared_expert_intermediate = 64;
  // qwen3_5, qwen3_5_moe: the Gated DeltaNet sizes, the attention layers' spacing, the rotated
  // share of each head and the checkpoint layout (TinyQwen3_5Config's by default).
  GatedDeltaNetConfig linear = TinyQwen3_5Config().hybrid.linear;
  int64_t full_attention_interval = 4;
  double partial_rotary_factor = 0.25;
  bool multimodal = false;
  // Llama only: θ and the llama3 rope_scaling (--rope-factor 0 leaves RoPE unscaled).
  double rope_theta = 500000.0;
  RopeScaling llama3 = TinyLlamaConfig().rope_scaling;
  int64_t eos = -1;
  std::string drafter_out;
  int64_t draft_layers = 1;
  int32_t block_size = 0;  // the config's block_size; 0: 16 for DFlash (W), 15 for DSpark (B)
  // --drafter-arch dspark: DeepSpec's Qwen3DSparkModel with these heads (io/dspark_config.h).
  std::string drafter_arch = "dflash";
  std::string markov_head_type = "vanilla";
  int64_t markov_rank = 16;
  // none, plain (proj · h) or markov (proj · [h; W1[prev]])
  std::string confidence_head = "markov";
};

// The DSpark heads the flags ask for; errors name the flag.
Result<DSparkHeadConfig> DSparkHeadsFromFlags(const MakeTinyArgs& args) {
  DSparkHeadConfig heads{.markov_rank = args.markov_rank};
  if (args.markov_rank > 0) {
    Result<DSparkHeadConfig> parsed =
        ParseDSparkHeadConfig({{"markov_rank", args.markov_rank},
                               {"markov_head_type", args.markov_head_type},
                               {"enable_confidence_head", false}},
                              "--markov-head-type");
    if (!parsed.ok()) return parsed.status();
    heads.markov_head_type = parsed->markov_head_type;
  }
  if (args.confidence_head == "none") return heads;
  heads.confidence_head = true;
  heads.confidence_with_markov = args.confidence_head == "markov";
  if (heads.confidence_with_markov && !heads.has_markov_head()) {
    return InvalidArgument("--confidence-head markov: needs a Markov head (--markov-rank > 0)");
  }
  return heads;
}

// A DFlash drafter matching `target`: the same attention geometry and RoPE, Qwen3 layers
// (whatever the target's family), `layers` draft layers, target layer ids by the documented
// rule, mask id vocab − 2 (EOS is vocab − 1 by default).
DFlashConfig TinyDrafterConfig(const DecoderConfig& target, int64_t layers, int32_t block) {
  DFlashConfig c;
  c.draft = target;
  c.draft.family = ModelFamily::kQwen3;
  c.draft.qk_norm = true;
  c.draft.moe = {};     // and dense
  c.draft.hybrid = {};  // and every layer plain attention
  // A target without a dense MLP (every layer sparse) leaves the width to the drafter: Qwen3's
  // 3 × hidden.
  if (c.draft.intermediate_size == 0) c.draft.intermediate_size = 3 * target.hidden_size;
  c.draft.num_hidden_layers = layers;
  c.block_size = block;
  c.mask_token_id = target.vocab_size - 2;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = DeriveTargetLayerIds(target.num_hidden_layers, layers);
  return c;
}

// The target's embedding and LM head as written to `target_dir`: a DSpark drafter's copies.
Status ReadTargetCopies(const std::string& target_dir, const DecoderConfig& target,
                        std::vector<float>* embed, std::vector<float>* lm_head) {
  DSCALE_ASSIGN_OR_RETURN(const Checkpoint written, Checkpoint::Open(target_dir));
  const std::vector<int64_t> shape{target.vocab_size, target.hidden_size};
  DSCALE_ASSIGN_OR_RETURN(*embed, written.ReadF32(TargetEmbedName(target), shape));
  if (target.tie_word_embeddings) {
    *lm_head = *embed;
    return Status::Ok();
  }
  DSCALE_ASSIGN_OR_RETURN(*lm_head, written.ReadF32(kTargetLmHeadName, shape));
  return Status::Ok();
}

// The drafter --drafter-out asks for, matching `target` (already written to --out).
Status WriteDrafter(const MakeTinyArgs& args, const DecoderConfig& target, DType dtype) {
  const bool dspark = args.drafter_arch == "dspark";
  const int32_t block = args.block_size > 0 ? args.block_size : (dspark ? 15 : 16);
  DFlashConfig draft = TinyDrafterConfig(target, args.draft_layers, block);
  if (dspark) {
    DSCALE_ASSIGN_OR_RETURN(draft.dspark, DSparkHeadsFromFlags(args));
  }
  // Validate exactly as loading will.
  DSCALE_ASSIGN_OR_RETURN(const DFlashConfig checked,
                          ParseDFlashConfig(DFlashConfigToJson(draft), "--drafter-out", target));
  if (!dspark) {
    return WriteRandomDFlashCheckpoint(args.drafter_out, checked, target.hidden_size, args.seed + 1,
                                       dtype);
  }
  std::vector<float> embed, lm_head;
  DSCALE_RETURN_IF_ERROR(ReadTargetCopies(args.out, target, &embed, &lm_head));
  return WriteRandomDSparkCheckpoint(args.drafter_out, checked, target.hidden_size, args.seed + 1,
                                     dtype, std::move(embed), std::move(lm_head));
}

int RunMakeTiny(const MakeTinyArgs& args) {
  if (args.drafter_arch == "dspark") {
    // The heads' flags are checked before anything is written.
    if (Result<DSparkHeadConfig> heads = DSparkHeadsFromFlags(args); !heads.ok()) {
      return ReportError("make-tiny", heads.status());
    }
  }
  const std::optional<DType> dtype = DTypeFromName(args.dtype);
  if (!dtype) {
    return ReportError("make-tiny",
                       InvalidArgument("--dtype: expected F32, BF16 or F16, got " + args.dtype));
  }
  const std::optional<ModelFamily> family = ModelFamilyFromName(args.arch);
  if (!family) {
    return ReportError(
        "make-tiny",
        InvalidArgument("--arch: expected qwen3, llama, qwen3_moe, qwen3_5 or qwen3_5_moe, got " +
                        args.arch));
  }
  DecoderConfig config = args.config;
  if (!args.shape.empty()) {
    std::optional<DecoderConfig> named = NamedQwen3Config(args.shape);
    if (!named) named = NamedLlamaConfig(args.shape);
    if (!named) {
      std::string names;
      for (const auto* list : {&NamedQwen3ConfigNames(), &NamedLlamaConfigNames()}) {
        for (const std::string& name : *list) names += (names.empty() ? "" : ", ") + name;
      }
      return ReportError("make-tiny", InvalidArgument("--shape: expected one of " + names +
                                                      ", got \"" + args.shape + "\""));
    }
    config = *named;
    if (args.eos >= 0) config.eos_token_ids = {args.eos};
    if (args.layers_given) config = ShapeWithLayers(config, args.config.num_hidden_layers);
  } else if (*family == ModelFamily::kQwen3Moe) {
    config.family = ModelFamily::kQwen3Moe;
    config.moe = args.moe;
  } else if (*family == ModelFamily::kQwen3_5 || *family == ModelFamily::kQwen3_5Moe) {
    config.family = *family;
    config.rope_theta = TinyQwen3_5Config().rope_theta;
    config.hybrid = {.linear = args.linear,
                     .partial_rotary_factor = args.partial_rotary_factor,
                     .attention_output_gate = true,
                     .zero_centred_norms = true,
                     .multimodal_layout = args.multimodal};
    config.hybrid.layer_types =
        IntervalLayerTypes(config.num_hidden_layers, args.full_attention_interval);
    if (*family == ModelFamily::kQwen3_5Moe) {
      // Every layer sparse, the top k renormalised, the experts fused, a shared expert.
      config.intermediate_size = 0;
      config.moe = {.num_experts = args.moe.num_experts,
                    .experts_per_token = args.moe.experts_per_token,
                    .expert_intermediate_size = args.moe.expert_intermediate_size,
                    .norm_topk_prob = true,
                    .shared_expert_intermediate_size = args.shared_expert_intermediate,
                    .fused_experts = true};
    }
  } else if (*family == ModelFamily::kLlama) {
    config.family = ModelFamily::kLlama;
    config.qk_norm = false;
    config.rope_theta = args.rope_theta;
    config.rope_scaling = args.llama3;
    if (args.llama3.factor == 0) config.rope_scaling = {};
  }
  if (args.shape.empty()) config.eos_token_ids = {args.eos >= 0 ? args.eos : config.vocab_size - 1};
  // Round-trip through the validating parser so bad sizes get the same messages as config.json.
  Result<DecoderConfig> checked = ParseDecoderConfig(DecoderConfigToJson(config), "--sizes");
  if (!checked.ok()) return ReportError("make-tiny", checked.status());
  Status status = WriteRandomCheckpoint(args.out, *checked, args.seed, *dtype);
  if (!status.ok()) return ReportError("make-tiny", status);
  std::printf("wrote %s (config.json, model.safetensors)\n", args.out.c_str());
  if (args.drafter_out.empty()) return 0;
  status = WriteDrafter(args, *checked, *dtype);
  if (!status.ok()) return ReportError("make-tiny", status);
  std::printf("wrote %s (%s drafter)\n", args.drafter_out.c_str(),
              args.drafter_arch == "dspark" ? "DSpark" : "DFlash");
  return 0;
}

}  // namespace

void RegisterMakeTinyCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<MakeTinyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "make-tiny",
      "Write a random Qwen3, Llama, Qwen3-MoE, Qwen3.5 or Qwen3.5-MoE checkpoint (HF layout)");
  cmd->add_option("--out", args->out, "Output directory")->required();
  CLI::Option* shape = cmd->add_option(
      "--shape", args->shape,
      "A real model's config: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-30b-a3b, "
      "qwen3.5-4b, qwen3.5-9b, qwen3.5-27b, qwen3.5-35b-a3b, llama-3.2-1b, llama-3.2-3b or "
      "llama-3.1-8b (excludes --arch, the RoPE, size and expert flags and --tie; --layers keeps "
      "its first layers)");
  // The flags a named shape fixes.
  std::vector<CLI::Option*> fixed;
  fixed.push_back(cmd->add_option("--arch", args->arch,
                                  "Model family: qwen3, llama, qwen3_moe, qwen3_5 or qwen3_5_moe")
                      ->capture_default_str());
  fixed.push_back(cmd->add_option("--rope-theta", args->rope_theta, "RoPE theta (llama)")
                      ->capture_default_str());
  RopeScaling& s = args->llama3;
  fixed.push_back(
      cmd->add_option("--rope-factor", s.factor, "llama3 rope_scaling factor (llama; 0: unscaled)")
          ->capture_default_str());
  fixed.push_back(
      cmd->add_option("--rope-low-freq-factor", s.low_freq_factor, "llama3 low_freq_factor")
          ->capture_default_str());
  fixed.push_back(
      cmd->add_option("--rope-high-freq-factor", s.high_freq_factor, "llama3 high_freq_factor")
          ->capture_default_str());
  fixed.push_back(cmd->add_option("--rope-original-positions", s.original_max_position_embeddings,
                                  "llama3 original_max_position_embeddings")
                      ->capture_default_str());
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Storage dtype: F32, BF16, F16")->capture_default_str();
  DecoderConfig& c = args->config;
  fixed.push_back(
      cmd->add_option("--vocab", c.vocab_size, "Vocabulary size")->capture_default_str());
  fixed.push_back(cmd->add_option("--hidden", c.hidden_size, "Hidden size")->capture_default_str());
  fixed.push_back(
      cmd->add_option("--intermediate", c.intermediate_size, "MLP size")->capture_default_str());
  cmd->add_option("--layers", c.num_hidden_layers, "Decoder layers")
      ->check(AtLeast(1))
      ->capture_default_str()
      ->each([args](const std::string&) { args->layers_given = true; });
  MoeConfig& moe = args->moe;
  fixed.push_back(
      cmd->add_option("--experts", moe.num_experts, "Experts per layer (qwen3_moe, qwen3_5_moe)")
          ->capture_default_str());
  fixed.push_back(cmd->add_option("--experts-per-token", moe.experts_per_token,
                                  "Experts each token is routed to (qwen3_moe, qwen3_5_moe)")
                      ->capture_default_str());
  fixed.push_back(cmd->add_option("--expert-intermediate", moe.expert_intermediate_size,
                                  "Each expert's MLP size (qwen3_moe, qwen3_5_moe)")
                      ->capture_default_str());
  fixed.push_back(cmd->add_option("--shared-expert-intermediate", args->shared_expert_intermediate,
                                  "The shared expert's MLP size (qwen3_5_moe)")
                      ->check(AtLeast(1))
                      ->capture_default_str());
  fixed.push_back(cmd->add_option("--norm-topk-prob", moe.norm_topk_prob,
                                  "Renormalise the routing weights (qwen3_moe: true or false)")
                      ->capture_default_str());
  GatedDeltaNetConfig& l = args->linear;
  fixed.push_back(cmd->add_option("--linear-key-heads", l.key_heads,
                                  "Gated DeltaNet key heads (qwen3_5, qwen3_5_moe)")
                      ->check(AtLeast(1))
                      ->capture_default_str());
  fixed.push_back(
      cmd->add_option(
             "--linear-value-heads", l.value_heads,
             "Gated DeltaNet value heads, a multiple of the key heads (qwen3_5, qwen3_5_moe)")
          ->check(AtLeast(1))
          ->capture_default_str());
  fixed.push_back(cmd->add_option("--linear-key-dim", l.key_head_dim,
                                  "Gated DeltaNet key head dimension (qwen3_5, qwen3_5_moe)")
                      ->check(AtLeast(1))
                      ->capture_default_str());
  fixed.push_back(cmd->add_option("--linear-value-dim", l.value_head_dim,
                                  "Gated DeltaNet value head dimension (qwen3_5, qwen3_5_moe)")
                      ->check(AtLeast(1))
                      ->capture_default_str());
  fixed.push_back(cmd->add_option("--conv-kernel", l.conv_kernel,
                                  "Gated DeltaNet causal conv kernel (qwen3_5, qwen3_5_moe)")
                      ->check(AtLeast(1))
                      ->capture_default_str());
  fixed.push_back(
      cmd->add_option("--full-attention-interval", args->full_attention_interval,
                      "Every this many layers one full attention (qwen3_5, qwen3_5_moe)")
          ->check(AtLeast(1))
          ->capture_default_str());
  fixed.push_back(
      cmd->add_option("--partial-rotary", args->partial_rotary_factor,
                      "Share of each attention head RoPE rotates (qwen3_5, qwen3_5_moe)")
          ->capture_default_str());
  fixed.push_back(cmd->add_flag("--multimodal", args->multimodal,
                                "Qwen3_5ForConditionalGeneration layout: text_config, weights "
                                "under model.language_model. (qwen3_5, qwen3_5_moe)"));
  fixed.push_back(
      cmd->add_option("--heads", c.num_attention_heads, "Query heads")->capture_default_str());
  fixed.push_back(
      cmd->add_option("--kv-heads", c.num_key_value_heads, "KV heads")->capture_default_str());
  fixed.push_back(
      cmd->add_option("--head-dim", c.head_dim, "Head dimension")->capture_default_str());
  fixed.push_back(cmd->add_option("--max-positions", c.max_position_embeddings, "Context length")
                      ->capture_default_str());
  cmd->add_option("--eos", args->eos, "EOS token id (default: vocab - 1, or the shape's)");
  fixed.push_back(cmd->add_flag("--tie", c.tie_word_embeddings, "Tie lm_head to the embedding"));
  for (CLI::Option* option : fixed) shape->excludes(option);
  cmd->add_option("--drafter-out", args->drafter_out, "Also write a matching drafter here");
  cmd->add_option("--drafter-arch", args->drafter_arch,
                  "Drafter layout: dflash (z-lab's DFlashDraftModel) or dspark (DeepSpec's "
                  "Qwen3DSparkModel, with the heads below)")
      ->check(CLI::IsMember({"dflash", "dspark"}))
      ->capture_default_str();
  cmd->add_option("--markov-head-type", args->markov_head_type,
                  "DSpark Markov head: vanilla, gated or rnn (dspark)")
      ->capture_default_str();
  cmd->add_option("--markov-rank", args->markov_rank,
                  "DSpark Markov head rank, 0: no Markov head (dspark)")
      ->check(CLI::Range(int64_t{0}, int64_t{4096}))
      ->capture_default_str();
  cmd->add_option("--confidence-head", args->confidence_head,
                  "DSpark confidence head: none, plain (proj · h) or markov (proj · [h; "
                  "W1[prev]]) (dspark)")
      ->check(CLI::IsMember({"none", "plain", "markov"}))
      ->capture_default_str();
  cmd->add_option("--draft-layers", args->draft_layers, "Drafter layers")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--block-size", args->block_size,
                  "The drafter config's block_size: W for DFlash (default 16), the rows drafted "
                  "B = W - 1 for DSpark (default 15)")
      ->check(CLI::Range(1, 64));
  cmd->callback([args, exit_code] { *exit_code = RunMakeTiny(*args); });
}

}  // namespace dscale::cli
