// dscale inflate: a trained small target + DFlash or DSpark drafter rewritten at a Qwen3 or Llama 3
// shape, computing the same function (docs/INFLATE.md).

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "inflate/inflate_checkpoint.h"

namespace dscale::cli {
namespace {

struct InflateArgs {
  InflateOptions options;
  std::vector<std::string> drafters, out_drafters;  // paired in order
  std::string shape;
  std::optional<int64_t> hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
  std::optional<int64_t> draft_layers;
  std::optional<bool> tie;
  std::optional<int64_t> experts, experts_per_token, expert_intermediate;
};

// The named shape (or the source target's own), then the overrides.
Result<InflateShape> ResolveShape(const InflateArgs& args) {
  InflateShape shape;
  if (args.shape.empty()) {
    DSCALE_ASSIGN_OR_RETURN(DecoderConfig source,
                            LoadDecoderConfig(args.options.target_dir + "/config.json"));
    shape = ShapeOf(source);
  } else {
    const std::optional<InflateShape> named = NamedInflateShape(args.shape);
    if (!named) {
      return InvalidArgument("--shape: expected one of " + NamedInflateShapes() + ", got \"" +
                             args.shape + "\"");
    }
    shape = *named;
  }
  auto apply = [](const std::optional<int64_t>& flag, int64_t* field) {
    if (flag) *field = *flag;
  };
  apply(args.hidden, &shape.hidden_size);
  apply(args.intermediate, &shape.intermediate_size);
  apply(args.layers, &shape.num_hidden_layers);
  apply(args.heads, &shape.num_attention_heads);
  apply(args.kv_heads, &shape.num_key_value_heads);
  apply(args.head_dim, &shape.head_dim);
  apply(args.vocab, &shape.vocab_size);
  apply(args.draft_layers, &shape.draft_layers);
  if (args.tie) shape.tie_word_embeddings = *args.tie;
  // Expert flags make (or resize) a mixture of experts: renormalised, every layer sparse.
  if (args.experts || args.experts_per_token || args.expert_intermediate) {
    MoeConfig& moe = shape.moe;
    apply(args.experts, &moe.num_experts);
    apply(args.experts_per_token, &moe.experts_per_token);
    apply(args.expert_intermediate, &moe.expert_intermediate_size);
    moe.norm_topk_prob = true;
    if (moe.num_experts == 0 || moe.experts_per_token == 0 || moe.expert_intermediate_size == 0) {
      return InvalidArgument(
          "--experts, --experts-per-token and --expert-intermediate: a mixture of experts needs "
          "all three (or a named mixture-of-experts --shape)");
    }
  }
  return shape;
}

// One output drafter: where it reads the target, and what it holds.
void PrintDrafter(const InflateArgs& args, const InflatedDrafter& d, size_t index) {
  const DFlashConfig& large = d.plan.large_drafter;
  std::string ids;
  for (const int32_t id : large.target_layer_ids) {
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  }
  std::string head;
  if (large.domino.has_value()) {
    head = ", Domino head " + large.domino->head_file;
  } else if (large.is_dspark()) {
    head = ", DSpark heads";
  }
  std::string predictors;
  for (const std::string& name : d.predictors) predictors += ", " + name;
  std::printf("wrote %s (%.2f GB of tensors%s%s; target_layer_ids [%s])\n",
              args.options.drafters[index].out.c_str(), static_cast<double>(d.bytes) * 1e-9,
              predictors.c_str(), head.c_str(), ids.c_str());
}

void PrintSummary(const InflateArgs& args, const InflateResult& r) {
  const InflatePlan& p = r.plan();
  const DecoderConfig& s = p.small_target;
  const DecoderConfig& l = p.large_target;
  std::printf(
      "hidden %lld -> %lld, intermediate %lld -> %lld, layers %lld -> %lld, heads %lld/%lld "
      "-> %lld/%lld, head_dim %lld -> %lld, vocab %lld -> %lld, %s\n",
      static_cast<long long>(s.hidden_size), static_cast<long long>(l.hidden_size),
      static_cast<long long>(s.intermediate_size), static_cast<long long>(l.intermediate_size),
      static_cast<long long>(s.num_hidden_layers), static_cast<long long>(l.num_hidden_layers),
      static_cast<long long>(s.num_attention_heads), static_cast<long long>(s.num_key_value_heads),
      static_cast<long long>(l.num_attention_heads), static_cast<long long>(l.num_key_value_heads),
      static_cast<long long>(s.head_dim), static_cast<long long>(l.head_dim),
      static_cast<long long>(s.vocab_size), static_cast<long long>(l.vocab_size),
      l.tie_word_embeddings ? "tied" : "untied");
  if (l.moe.num_experts > 0) {
    std::printf("mixture of experts: %lld experts of %lld, top %lld, routed in %lld groups\n",
                static_cast<long long>(l.moe.num_experts),
                static_cast<long long>(l.moe.expert_intermediate_size),
                static_cast<long long>(l.moe.experts_per_token),
                static_cast<long long>(l.moe.num_experts / l.moe.experts_per_token));
  }
  if (args.options.shape.tie_word_embeddings && !l.tie_word_embeddings) {
    std::printf(
        "note: the source's LM head is not its embedding, so the output keeps a separate "
        "lm_head\n");
  }
  std::printf(
      "residual scale %g, %zu constant dims, rms_norm_eps %g, rope_theta %g, pad-row weight %g\n",
      p.residual_scale, p.constant_dims.size(), l.rms_norm_eps, l.rope_theta, p.pad_weight);
  std::printf("wrote %s (%.2f GB of tensors)\n", args.options.out_target.c_str(),
              static_cast<double>(r.target_bytes) * 1e-9);
  for (size_t i = 0; i < r.drafters.size(); ++i) PrintDrafter(args, r.drafters[i], i);
}

int RunInflate(InflateArgs args) {
  Result<InflateShape> shape = ResolveShape(args);
  if (!shape.ok()) return ReportError("inflate", shape.status());
  args.options.shape = *shape;
  if (args.drafters.size() != args.out_drafters.size()) {
    return ReportError("inflate",
                       InvalidArgument("--out-drafter: one per --drafter, in order (" +
                                       std::to_string(args.drafters.size()) + " drafters, " +
                                       std::to_string(args.out_drafters.size()) + " outputs)"));
  }
  for (size_t i = 0; i < args.drafters.size(); ++i) {
    args.options.drafters.push_back({.source = args.drafters[i], .out = args.out_drafters[i]});
  }
  Result<InflateResult> result = Inflate(args.options);
  if (!result.ok()) return ReportError("inflate", result.status());
  PrintSummary(args, *result);
  return 0;
}

}  // namespace

void RegisterInflateCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<InflateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inflate",
      "Rewrite a target + DFlash or DSpark drafter at a larger shape, computing the same "
      "function");
  InflateOptions& o = args->options;
  cmd->add_option("--target", o.target_dir, "Source target checkpoint directory")->required();
  cmd->add_option("--drafter", args->drafters,
                  "Its DFlash or DSpark drafter directory; repeat for more drafters of the same "
                  "target (the first places the target's layers)")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--shape", args->shape,
                  "qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-30b-a3b (Qwen3 sources), "
                  "llama-3.2-1b, llama-3.2-3b or llama-3.1-8b (Llama sources); default: the "
                  "source's own");
  cmd->add_option("--hidden", args->hidden, "Override the hidden size");
  cmd->add_option("--intermediate", args->intermediate, "Override the MLP size");
  cmd->add_option("--layers", args->layers, "Override the target's decoder layers");
  cmd->add_option("--heads", args->heads, "Override the query heads");
  cmd->add_option("--kv-heads", args->kv_heads, "Override the KV heads");
  cmd->add_option("--head-dim", args->head_dim, "Override the head dimension");
  cmd->add_option("--vocab", args->vocab, "Override the vocabulary rows");
  cmd->add_option("--draft-layers", args->draft_layers,
                  "Drafter layers (default: the source drafter's)");
  cmd->add_option("--experts", args->experts,
                  "A mixture-of-experts target: its experts (with --experts-per-token and "
                  "--expert-intermediate)");
  cmd->add_option("--experts-per-token", args->experts_per_token,
                  "Experts a row is routed to (they are routed in groups of that many)");
  cmd->add_option("--expert-intermediate", args->expert_intermediate, "Each expert's MLP width");
  cmd->add_option("--tie", args->tie,
                  "true: LM head tied to the embedding (needs a tied source), false: separate");
  cmd->add_option("--out-target", o.out_target, "Output target directory (new or empty)")
      ->required();
  cmd->add_option("--out-drafter", args->out_drafters,
                  "Output drafter directory (new or empty), one per --drafter in order")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--max-shard-bytes", o.max_shard_bytes, "Tensor bytes per safetensors shard")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([args, exit_code] { *exit_code = RunInflate(*args); });
}

}  // namespace dscale::cli
