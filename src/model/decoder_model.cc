#include "model/decoder_model.h"

#include <memory>
#include <set>
#include <span>
#include <string>

#include "core/log.h"
#include "io/safetensors.h"
#include "model/decoder_forward.h"

namespace dscale {
namespace {

// Says once, at load, how many of the checkpoint's tensors the text model does not read (a
// multimodal Qwen3.5 checkpoint's vision tower and multi-token-prediction layers).
void NoteUnreadTensors(const DecoderConfig& config, const Checkpoint& checkpoint) {
  std::set<std::string> read;
  for (const auto& [name, shape] : DecoderTensorShapes(config)) read.insert(name);
  int64_t vision = 0, mtp = 0, other = 0;
  for (const std::string& name : checkpoint.TensorNames()) {
    if (read.count(name) != 0) continue;
    if (name.starts_with("model.visual.")) {
      ++vision;
    } else if (name.starts_with("mtp.")) {
      ++mtp;
    } else {
      ++other;
    }
  }
  if (vision + mtp + other == 0) return;
  DSCALE_LOG(kInfo) << checkpoint.dir() << ": " << vision + mtp + other
                    << " tensors left unread by the text model (" << vision
                    << " of the vision tower, " << mtp << " multi-token prediction, " << other
                    << " other)";
}

}  // namespace

Result<DecoderModel> DecoderModel::Load(const std::string& dir, WeightsMode weights_mode,
                                        ActivationModes activations) {
  DSCALE_ASSIGN_OR_RETURN(DecoderConfig config, LoadCheckpointConfig(dir));
  DSCALE_ASSIGN_OR_RETURN(Checkpoint opened, Checkpoint::Open(dir));
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened));
  NoteUnreadTensors(config, *checkpoint);
  const WeightsLoad how{
      .mode = weights_mode,
      .int8_activations = activations.int8,
      .drop_resident = [&checkpoint](const std::string& name) { checkpoint->DropResident(name); }};
  DSCALE_ASSIGN_OR_RETURN(DecoderWeights weights,
                          LoadDecoderWeights(config, CheckpointTensorReader(checkpoint), how));
  DecoderModel model(std::move(config), std::move(weights));
  model.set_activations(activations);
  return model;
}

DecoderModel::DecoderModel(DecoderConfig config, DecoderWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)), dims_(LayerDims::From(config_)) {
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.num_hidden_layers);
}

namespace {

// One request's linear-attention state sizes (kv/recurrent_state.h); empty without such layers.
RecurrentStateShape RecurrentShapeOf(const DecoderConfig& c) {
  RecurrentStateShape shape;
  if (!c.HasLinearAttentionLayers()) return shape;
  int32_t next = 0;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    shape.linear_index.push_back(c.IsLinearAttentionLayer(layer) ? next++ : -1);
  }
  const GatedDeltaNetConfig& l = c.hybrid.linear;
  shape.conv_values = (l.conv_kernel - 1) * l.conv_dim();
  shape.delta_values = l.value_heads * l.key_head_dim * l.value_head_dim;
  shape.input_values = l.conv_dim() + 2 * l.value_heads;
  return shape;
}

}  // namespace

KvCacheShape DecoderModel::KvShape(int32_t page_size, int32_t num_pages) const {
  KvCacheShape shape{.num_layers = static_cast<int32_t>(config_.num_hidden_layers),
                     .kv_heads = static_cast<int32_t>(config_.num_key_value_heads),
                     .head_dim = static_cast<int32_t>(config_.head_dim),
                     .page_size = page_size,
                     .num_pages = num_pages,
                     .recurrent = RecurrentShapeOf(config_)};
  if (config_.HasLinearAttentionLayers()) {
    // K/V only for the attention layers: a linear one keeps its recurrent state instead.
    shape.num_layers = 0;
    for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
      shape.attention_index.push_back(config_.IsLinearAttentionLayer(layer) ? -1
                                                                            : shape.num_layers++);
    }
  }
  return shape;
}

Status DecoderModel::Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) {
  CheckForward(config_, batch, cache);
  const std::span<const int32_t> logit_rows = batch.logit_rows();
  const auto num_logit_rows = static_cast<int32_t>(logit_rows.size());
  out->features.assign(
      static_cast<size_t>(batch.rows()) * batch.capture_layers.size() * config_.hidden_size, 0.0f);
  out->logits.resize(static_cast<size_t>(num_logit_rows) * config_.vocab_size);
  static constexpr int32_t kNoRow = 0;  // never null: null would mean every row
  // kv/recurrent_state.h: a sequence still pending keeps the positions before this span, then
  // the span runs on a working copy of its committed state (in place where it is always kept).
  RecurrentStates& recurrent = cache.recurrent();
  const bool hybrid = !recurrent.shape().empty();
  if (hybrid) {
    for (const StepSpan& span : batch.spans()) {
      if (recurrent.pending_rows(span.seq) > 0) CommitSequenceState(cache, span.seq, span.ctx_len);
      DSCALE_CHECK_MSG(recurrent.position(span.seq) == span.ctx_len,
                       "a span of a hybrid target must start at its recurrent state's position");
      recurrent.BeginSpan(span.seq, span.q_len, span.always_kept);
    }
  }
  CpuOps ops{.activations = activations_, .recurrent = hybrid ? &recurrent : nullptr};
  scratch_.experts_run = 0;
  scratch_.occupancy = {};
  RunDecoderForward(ops, weights_, dims_, config_.vocab_size, ViewOf(batch), batch.capture_layers,
                    cache.store(), scratch_,
                    {.logits = out->logits.data(),
                     .features = out->features.data(),
                     .logit_rows = num_logit_rows > 0 ? logit_rows.data() : &kNoRow,
                     .num_logit_rows = num_logit_rows});
  out->experts_run = scratch_.experts_run;
  out->expert_occupancy = scratch_.occupancy;
  return Status::Ok();
}

void DecoderModel::CommitSequenceState(PagedKvCache& cache, int32_t seq, int32_t length) {
  RecurrentStates& states = cache.recurrent();
  if (states.shape().empty()) return;
  const int32_t from = states.position(seq), pending = states.pending_rows(seq);
  const int32_t keep = length - from;
  DSCALE_CHECK_MSG(keep >= 0 && keep <= pending,
                   "a committed length lies within the last forward's span");
  if (pending == 0) return;
  if (keep == pending) {
    states.AdoptWorking(seq);
    return;
  }
  const LinearDims& l = dims_.linear;
  const int64_t width = states.shape().input_values;
  float* mixed = CpuOps::Buffer(scratch_.conv, int64_t{keep} * l.conv_dim());
  float* o = CpuOps::Buffer(scratch_.attn, int64_t{keep} * l.value_width());
  for (int32_t layer = 0; layer < static_cast<int32_t>(weights_.layers.size()); ++layer) {
    const GatedDeltaNetWeights& w = weights_.layers[static_cast<size_t>(layer)].linear;
    if (w.empty() || keep == 0) continue;
    const float* inputs = states.Inputs(seq, layer);
    float* delta = states.Delta(seq, layer);
    CpuOps::RecurrentRows(w, l, inputs, width, inputs + l.conv_dim(), keep, states.Conv(seq, layer),
                          delta, delta, mixed, o);
  }
  states.FinishReplay(seq, keep);
}

}  // namespace dscale
