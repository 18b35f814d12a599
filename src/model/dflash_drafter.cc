#include "model/dflash_drafter.h"

#include <cstring>

#include "io/safetensors.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"

namespace dscale {
namespace {

constexpr const char* kFcName = "fc.weight";
constexpr const char* kHiddenNormName = "hidden_norm.weight";
constexpr const char* kFinalNormName = "norm.weight";

}  // namespace

std::string DFlashTensorPrefix(const Checkpoint& checkpoint) {
  if (checkpoint.Find(kFcName) == nullptr &&
      checkpoint.Find(std::string(kQwen3Prefix) + kFcName) != nullptr) {
    return kQwen3Prefix;
  }
  return "";
}

TensorShapes DFlashTensorShapes(const DFlashConfig& c, int64_t target_hidden) {
  const int64_t h = c.draft.hidden_size;
  const auto features = static_cast<int64_t>(c.target_layer_ids.size()) * target_hidden;
  TensorShapes shapes;
  shapes.emplace_back(kFcName, std::vector<int64_t>{h, features});
  shapes.emplace_back(kHiddenNormName, std::vector<int64_t>{h});
  for (int64_t layer = 0; layer < c.draft.num_hidden_layers; ++layer) {
    for (auto& entry : DecoderLayerShapes(c.draft, "", layer)) shapes.push_back(std::move(entry));
  }
  shapes.emplace_back(kFinalNormName, std::vector<int64_t>{h});
  return shapes;
}

Result<DFlashWeights> LoadDFlashWeights(const DFlashConfig& c, int64_t target_hidden,
                                        const TensorReader& read) {
  const int64_t h = c.draft.hidden_size;
  const auto features = static_cast<int64_t>(c.target_layer_ids.size()) * target_hidden;
  DFlashWeights w;
  // The fc shape check is the documented validation: input width = #layer ids × target hidden.
  DSCALE_ASSIGN_OR_RETURN(w.fc, read(kFcName, {h, features}));
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix hidden_norm, read(kHiddenNormName, {h}));
  w.hidden_norm = hidden_norm.ToF32();
  for (int64_t layer = 0; layer < c.draft.num_hidden_layers; ++layer) {
    DSCALE_ASSIGN_OR_RETURN(Qwen3LayerWeights lw, LoadDecoderLayer(c.draft, "", layer, read));
    w.layers.push_back(std::move(lw));
  }
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix final_norm, read(kFinalNormName, {h}));
  w.final_norm = final_norm.ToF32();
  return w;
}

Result<DFlashDrafter> DFlashDrafter::Load(const std::string& dir, const Qwen3Model& target,
                                          DrafterHead head) {
  const std::string config_path = dir + "/config.json";
  DSCALE_ASSIGN_OR_RETURN(DFlashConfig config, LoadDFlashConfig(config_path, target.config()));
  if (head == DrafterHead::kDomino && !config.domino.has_value()) {
    return InvalidArgument(config_path +
                           ": field \"domino_config\": missing (--drafter-head domino needs a "
                           "drafter that declares a Domino head; docs/DOMINO.md)");
  }
  DSCALE_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(dir));
  const std::string prefix = DFlashTensorPrefix(checkpoint);
  const TensorReader read =
      CheckpointTensorReader(std::make_shared<const Checkpoint>(std::move(checkpoint)), prefix);
  const Qwen3Config& t = target.config();
  DSCALE_ASSIGN_OR_RETURN(DFlashWeights weights, LoadDFlashWeights(config, t.hidden_size, read));
  std::optional<DominoHeadWeights> head_weights;
  if (head == DrafterHead::kDomino) {
    DSCALE_ASSIGN_OR_RETURN(head_weights,
                            LoadDominoHeadFile(dir, *config.domino, t.hidden_size, t.vocab_size));
  }
  DFlashDrafter drafter(config, std::move(weights), target);
  if (head_weights.has_value()) {
    drafter.AttachHead(
        DominoHead(*config.domino, std::move(*head_weights), target.weights().embed));
  }
  return drafter;
}

void DFlashDrafter::AttachHead(DominoHead head) {
  DSCALE_CHECK(head.weights().gru_input.cols() == config_.draft.hidden_size);
  head_.emplace(std::move(head));
}

DFlashDrafter::DFlashDrafter(DFlashConfig config, DFlashWeights weights, const Qwen3Model& target)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      target_(&target),
      dims_(LayerDims::From(config_.draft)) {
  DSCALE_CHECK(config_.draft.hidden_size == target.config().hidden_size);
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.draft.num_hidden_layers);
  for (const Qwen3LayerWeights& w : weights_.layers) {
    context_kv_.push_back(w.qkv.RowRange(dims_.q_dim(), 2 * dims_.kv_dim()));
  }
}

int64_t DFlashDrafter::feature_width() const {
  return static_cast<int64_t>(config_.target_layer_ids.size()) * target_->config().hidden_size;
}

void DFlashDrafter::Bind(const PagedKvCache& cache) {
  store_.emplace(static_cast<int32_t>(config_.draft.num_hidden_layers), dims_.kv_heads,
                 dims_.head_dim, cache.num_slots(), cache.shape().page_size, cache.shape().dtype);
}

int64_t DFlashDrafter::KvBytesPerPosition(KvDtype dtype) const {
  return int64_t{2} * config_.draft.num_hidden_layers * dims_.kv_heads * dims_.head_dim *
         KvDtypeSize(dtype);
}

void DFlashDrafter::AppendContext(const ContextRows& context) {
  DSCALE_CHECK_MSG(store_.has_value(), "Bind the drafter to a KV cache first");
  KvStore& store = *store_;
  const std::span<const float> features = context.features;
  const std::span<const int32_t> positions = context.positions;
  const std::span<const int32_t> slots = context.slots;
  const auto rows = static_cast<int64_t>(positions.size());
  DSCALE_CHECK(slots.size() == positions.size());
  DSCALE_CHECK(static_cast<int64_t>(features.size()) == rows * feature_width());
  if (rows == 0) return;
  const int64_t h = dims_.hidden, kv_dim = dims_.kv_dim();
  // c = hidden_norm(fc(features)), computed once and shared by every layer.
  float* c = GrowBuffer(x_, rows * h);
  Project(features.data(), weights_.fc, c, rows);
  cpu::RmsNorm(c, weights_.hidden_norm.data(), c, rows, h, dims_.eps);
  float* kv = GrowBuffer(kv_, rows * 2 * kv_dim);
  for (int32_t layer = 0; layer < store.num_layers(); ++layer) {
    const Qwen3LayerWeights& w = weights_.layers[layer];
    // The k and v rows of the stacked [q; k; v] matrix, applied without the input norm.
    Project(c, context_kv_[layer], kv, rows);
    cpu::HeadRmsNorm(kv, w.k_norm.data(), rows, dims_.kv_heads, dims_.head_dim, 2 * kv_dim,
                     dims_.eps);
    cpu::ApplyRope(kv, positions.data(), rows, dims_.kv_heads, dims_.head_dim, 2 * kv_dim,
                   dims_.rope_theta);
    for (int64_t r = 0; r < rows; ++r) {
      store.Store(layer, slots[r], kv + r * 2 * kv_dim, kv + r * 2 * kv_dim + kv_dim);
    }
  }
}

Status DFlashDrafter::Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                            int tile_rows, DraftOutput* out) {
  DSCALE_CHECK_MSG(store_.has_value(), "Bind the drafter to a KV cache first");
  DSCALE_CHECK(store_->num_slots() == cache.num_slots());
  KvStore& store = *store_;
  const int32_t block = config_.block_size;
  const int64_t vocab = target_->config().vocab_size;
  const int64_t h = dims_.hidden;
  StageDraftBlocks(requests, cache, static_cast<int32_t>(config_.mask_token_id), block, vocab,
                   blocks_);
  blocks_.tile_rows = tile_rows;
  const int32_t rows = blocks_.rows();
  float* x = GrowBuffer(x_, rows * h);
  GatherRows(target_->weights().embed, blocks_.tokens().data(), rows, x);
  for (int32_t layer = 0; layer < store.num_layers(); ++layer) {
    RunDecoderLayer(weights_.layers[layer], dims_, blocks_, layer, store, scratch_, x);
  }

  // Rows 1 .. block−1 of each request: final norm, the target's LM head, argmax.
  const int32_t candidates = block - 1;
  const auto n = static_cast<int64_t>(requests.size()) * candidates;
  out->candidates = candidates;
  out->hidden.resize(n * h);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::memcpy(out->hidden.data() + i * candidates * h, x + (i * block + 1) * h,
                candidates * h * sizeof(float));
  }
  cpu::RmsNorm(out->hidden.data(), weights_.final_norm.data(), out->hidden.data(), n, h,
               dims_.eps);
  out->logits.resize(n * vocab);
  Project(out->hidden.data(), target_->weights().LmHead(), out->logits.data(), n);
  out->tokens.resize(n);
  if (!head_.has_value()) {
    cpu::ArgmaxRows(out->logits.data(), n, vocab, out->tokens.data());
    return Status::Ok();
  }
  anchors_.clear();
  for (const DraftRequest& r : requests) anchors_.push_back(r.anchor);
  head_->Refine(anchors_, candidates, out->hidden, out->logits, out->tokens);
  return Status::Ok();
}

}  // namespace dscale
