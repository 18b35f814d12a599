#include "model/dflash_drafter.h"

#include <algorithm>
#include <set>

#include "core/log.h"
#include "io/safetensors.h"
#include "model/dflash_forward.h"
#include "model/quantize_weights.h"
#include "model/resident_weights.h"

namespace dscale {
namespace {

constexpr const char* kFcName = "fc.weight";
constexpr const char* kHiddenNormName = "hidden_norm.weight";
constexpr const char* kFinalNormName = "norm.weight";

// Says once, at load, which of the checkpoint's tensors the drafter does not read: a DSpark
// drafter's frozen copies of its target's embedding and LM head (dscale reads the target's own).
void NoteUnreadTensors(const Checkpoint& checkpoint, const std::string& prefix,
                       const TensorShapes& read_shapes) {
  std::set<std::string> read;
  for (const auto& [name, shape] : read_shapes) read.insert(prefix + name);
  std::string unread;
  int64_t count = 0;
  for (const std::string& name : checkpoint.TensorNames()) {
    if (read.count(name) != 0) continue;
    if (count++ < 4) unread += (unread.empty() ? "" : ", ") + name;
  }
  if (count == 0) return;
  DSCALE_LOG(kInfo) << checkpoint.dir() << ": " << count << " drafter tensors left unread ("
                    << unread << (count > 4 ? ", …" : "")
                    << "); the drafter reads the target's embedding and LM head";
}

// What a DSpark drafter refuses at load: a Domino head and a draft vocabulary.
Status CheckDSparkOptions(const std::string& dir, DrafterHead head, DraftVocabChoice vocab,
                          bool has_subset) {
  if (head == DrafterHead::kDomino) {
    return InvalidArgument("--drafter-head domino: " + dir + " is a " + kDSparkArchitecture +
                           " drafter, which has heads of its own (no Domino head)");
  }
  if (vocab == DraftVocabChoice::kSubset || has_subset) {
    return InvalidArgument(dir + "/" + kDraftVocabFileName + ": a " + kDSparkArchitecture +
                           " drafter drafts over the whole vocabulary (its Markov head's rows are "
                           "the vocabulary's); use --draft-vocab full to ignore the file");
  }
  return Status::Ok();
}

}  // namespace

std::string DFlashTensorPrefix(const Checkpoint& checkpoint) {
  if (checkpoint.Find(kFcName) == nullptr &&
      checkpoint.Find(std::string(kTargetPrefix) + kFcName) != nullptr) {
    return kTargetPrefix;
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
    DSCALE_ASSIGN_OR_RETURN(DecoderLayerWeights lw, LoadDecoderLayer(c.draft, "", layer, read));
    w.layers.push_back(std::move(lw));
  }
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix final_norm, read(kFinalNormName, {h}));
  w.final_norm = final_norm.ToF32();
  return w;
}

bool UsesInt8DraftHead(cpu::Int8Activations activations) {
  return cpu::PreferredInt8Layout(activations) == cpu::QuantLayout::kPanels;
}

Result<DFlashDrafter> DFlashDrafter::Load(const std::string& dir, const DecoderModel& target,
                                          DrafterHead head, DraftVocabChoice vocab,
                                          WeightsMode weights_mode) {
  const std::string config_path = dir + "/config.json";
  DSCALE_ASSIGN_OR_RETURN(DFlashConfig config, LoadDFlashConfig(config_path, target.config()));
  if (head == DrafterHead::kDomino && !config.is_dspark() && !config.domino.has_value()) {
    return InvalidArgument(config_path +
                           ": field \"domino_config\": missing (--drafter-head domino needs a "
                           "drafter that declares a Domino head; docs/DOMINO.md)");
  }
  std::optional<DraftVocab> subset;
  if (vocab != DraftVocabChoice::kFull) {
    DSCALE_ASSIGN_OR_RETURN(subset, LoadDraftVocab(dir, target.config().vocab_size));
    if (vocab == DraftVocabChoice::kSubset && !subset.has_value() && !config.is_dspark()) {
      return NotFound(dir + "/" + kDraftVocabFileName +
                      ": missing (--draft-vocab subset needs a drafter folder with a draft "
                      "vocabulary; dscale draft-vocab makes one)");
    }
  }
  if (config.is_dspark()) {
    DSCALE_RETURN_IF_ERROR(CheckDSparkOptions(dir, head, vocab, subset.has_value()));
  }
  DSCALE_ASSIGN_OR_RETURN(Checkpoint opened, Checkpoint::Open(dir));
  const std::string prefix = DFlashTensorPrefix(opened);
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened));
  const TensorReader read = CheckpointTensorReader(checkpoint, prefix);
  const DecoderConfig& t = target.config();
  DSCALE_ASSIGN_OR_RETURN(DFlashWeights weights, LoadDFlashWeights(config, t.hidden_size, read));
  const bool quantized = IsQuantized(weights_mode);
  if (quantized) {
    // The drafter multiplies as the target does (its activation modes).
    const cpu::Int8Activations activations = target.activations().int8;
    weights.fc = QuantizeInt8(weights.fc, activations);
    for (DecoderLayerWeights& layer : weights.layers) {
      QuantizeLayer(&layer, weights_mode, activations);
    }
  } else if (weights_mode == WeightsMode::kAsStored) {
    CopyToHugePages(&weights.fc);
    for (DecoderLayerWeights& layer : weights.layers) CopyLayerToHugePages(&layer);
  }
  TensorShapes read_shapes = DFlashTensorShapes(config, t.hidden_size);
  DSparkHeadWeights dspark;
  if (config.is_dspark()) {
    DSCALE_ASSIGN_OR_RETURN(
        dspark, LoadDSparkHeadWeights(*config.dspark, t.hidden_size, t.vocab_size, read));
    for (auto& entry : DSparkHeadTensorShapes(*config.dspark, t.hidden_size, t.vocab_size)) {
      read_shapes.push_back(std::move(entry));
    }
  }
  NoteUnreadTensors(*checkpoint, prefix, read_shapes);
  std::optional<DominoHeadWeights> head_weights;
  if (head == DrafterHead::kDomino) {
    DSCALE_ASSIGN_OR_RETURN(head_weights,
                            LoadDominoHeadFile(dir, *config.domino, t.hidden_size, t.vocab_size));
  }
  DFlashDrafter drafter(config, std::move(weights), target, std::move(dspark));
  if (head_weights.has_value()) {
    drafter.AttachHead(
        DominoHead(*config.domino, std::move(*head_weights), target.weights().embed));
  }
  if (subset.has_value()) drafter.RestrictVocab(std::move(*subset));
  // A quantised drafter's subset rows are int8; its whole vocabulary's head an int8 copy where
  // UsesInt8DraftHead.
  const auto int8 = [](const WeightMatrix::Block& b) { return b.format == WeightFormat::kInt8; };
  const bool int8_head =
      drafter.draft_vocab() != nullptr || UsesInt8DraftHead(target.activations().int8);
  if (quantized && int8_head && !std::ranges::all_of(drafter.lm_head().blocks(), int8)) {
    drafter.draft_lm_head_ = QuantizeInt8(drafter.lm_head(), target.activations().int8);
  }
  return drafter;
}

void DFlashDrafter::AttachHead(DominoHead head) {
  DSCALE_CHECK_MSG(!config_.is_dspark(), "a DSpark drafter takes no Domino head");
  DSCALE_CHECK(head.weights().gru_input.cols() == config_.draft.hidden_size);
  head_.emplace(std::move(head));
  if (draft_vocab_.has_value()) head_->RestrictVocab(draft_vocab_->token_ids);
}

void DFlashDrafter::RestrictVocab(DraftVocab vocab) {
  DSCALE_CHECK_MSG(!draft_vocab_.has_value(), "the draft vocabulary is restricted once");
  DSCALE_CHECK_MSG(!config_.is_dspark(), "a DSpark drafter drafts over the whole vocabulary");
  DSCALE_CHECK(vocab.target_vocab_size == target_->config().vocab_size);
  draft_lm_head_ = target_->weights().LmHead().SelectRows(vocab.token_ids);
  if (head_.has_value()) head_->RestrictVocab(vocab.token_ids);
  draft_vocab_.emplace(std::move(vocab));
}

int64_t DFlashDrafter::draft_vocab_size() const {
  return draft_vocab_.has_value() ? draft_vocab_->size() : target_->config().vocab_size;
}

DFlashDrafter::DFlashDrafter(DFlashConfig config, DFlashWeights weights, const DecoderModel& target,
                             DSparkHeadWeights dspark)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      target_(&target),
      dims_(LayerDims::From(config_.draft)) {
  DSCALE_CHECK(config_.draft.hidden_size == target.config().hidden_size);
  if (config_.is_dspark()) {
    dspark_head_.emplace(*config_.dspark, std::move(dspark), config_.draft.hidden_size,
                         target.config().vocab_size);
  }
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.draft.num_hidden_layers);
  for (const DecoderLayerWeights& w : weights_.layers) {
    context_kv_.push_back(w.qkv.RowRange(dims_.q_dim(), 2 * dims_.kv_dim()));
  }
  if (!config_.IsPlainLayout()) {
    for (int64_t layer = 0; layer < config_.draft.num_hidden_layers; ++layer) {
      layer_attention_.push_back(config_.LayerAttention(layer));
    }
  }
}

DraftLayout DFlashDrafter::layout() const {
  return {.layers = layer_attention_,
          .embedding_scale = static_cast<float>(config_.input_embedding_scale)};
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
  const auto rows = static_cast<int32_t>(context.positions.size());
  DSCALE_CHECK(context.slots.size() == context.positions.size());
  DSCALE_CHECK(static_cast<int64_t>(context.features.size()) == int64_t{rows} * feature_width());
  const BatchView view{
      .rows = rows, .positions = context.positions.data(), .kv_slots = context.slots.data()};
  CpuOps ops{.activations = target_->activations()};
  RunDFlashContext(ops, weights_, context_kv_, dims_, feature_width(), view,
                   context.features.data(), *store_, scratch_);
}

Status DFlashDrafter::Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                            int tile_rows, DraftOutput* out) {
  DSCALE_CHECK_MSG(store_.has_value(), "Bind the drafter to a KV cache first");
  DSCALE_CHECK(store_->num_slots() == cache.num_slots());
  const DraftBlock block = config_.Block();
  const int64_t vocab = target_->config().vocab_size;
  StageDraftBlocks(requests, cache, static_cast<int32_t>(config_.mask_token_id), block.input_rows,
                   vocab, blocks_);
  blocks_.tile_rows = tile_rows;
  const bool sequential = head_.has_value() || dspark_head_.has_value();
  // A head walks and corrects whole blocks; the plain drafter scores what the requests read.
  const int32_t candidates =
      sequential ? block.candidates() : CandidatesAsked(requests, block.candidates());
  const auto n = static_cast<int64_t>(requests.size()) * candidates;
  out->candidates = candidates;
  out->hidden.resize(n * dims_.hidden);
  const int64_t draft_vocab = draft_vocab_size();
  out->logits.resize(n * draft_vocab);
  out->tokens.resize(n);
  const bool confident = dspark_head_.has_value() && dspark_head_->config().confidence_head;
  out->confidence.resize(confident ? n : 0);
  const DecoderWeights& target = target_->weights();
  CpuOps ops{.activations = target_->activations()};
  RunDFlashDraft(ops, weights_, target.embed, lm_head(), vocab, draft_vocab, dims_, block,
                 ViewOf(blocks_), layout(), *store_, scratch_,
                 {.tokens = sequential ? nullptr : out->tokens.data(),
                  .logits = out->logits.data(),
                  .hidden = out->hidden.data(),
                  .candidates = candidates});
  out->column_ids = draft_vocab_.has_value() ? std::span<const int32_t>(draft_vocab_->token_ids)
                                             : std::span<const int32_t>();
  choices_.clear();
  bool sampled = false;
  for (const DraftRequest& r : requests) {
    choices_.push_back(DraftChoiceFor(r.sampling, r.ctx_len));
    sampled = sampled || choices_.back().temperature > 0.0f;
  }
  if (!sequential) {
    // Sampled requests draw their columns in place of the argmax's.
    for (size_t q = 0; sampled && q < requests.size(); ++q) {
      if (choices_[q].temperature <= 0.0f) continue;
      for (int32_t k = 0; k < candidates; ++k) {
        const int64_t row = static_cast<int64_t>(q) * candidates + k;
        out->tokens[row] =
            choices_[q].Column(out->logits.data() + row * draft_vocab, draft_vocab, k, &draw_);
      }
    }
    // Those are subset columns; the engine and the target speak target ids.
    if (draft_vocab_.has_value()) {
      for (int32_t& token : out->tokens)
        token = draft_vocab_->token_ids[static_cast<size_t>(token)];
    }
    return Status::Ok();
  }
  anchors_.clear();
  for (const DraftRequest& r : requests) anchors_.push_back(r.anchor);
  if (dspark_head_.has_value()) {
    dspark_head_->Walk(anchors_, candidates, out->hidden, out->logits, out->tokens,
                       out->confidence, choices_);
  } else {
    head_->Refine(anchors_, candidates, out->hidden, out->logits, out->tokens, choices_);
  }
  return Status::Ok();
}

}  // namespace dscale
