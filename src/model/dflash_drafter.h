#pragma once
// The DFlash block-diffusion drafter on the CPU backend, and DeepSpec's DSpark drafter, which is
// the same backbone with another block rule and heads of its own.
//
// Context: for every committed token, the target's residual streams after target_layer_ids
// (concatenated, [K·H_target]) go through fc → hidden_norm, and each draft layer's own k/v
// projections (+ k_norm, RoPE at the token's absolute position) into a persistent draft KV
// store, at the same slot the target uses for that token.
// Draft step: the block [anchor, MASK × (block−1)] at positions s .. s+block−1 (s = committed
// length) is embedded with the target's embedding, runs through the draft layers with
// non-causal attention over the request's context plus the whole block (newer drafters: causal
// and sliding-window layers, and scaled embeddings, as their config says; io/dflash_config.h),
// the drafter's final norm, and the target's LM head on rows 1 .. block−1: block−1
// candidates, greedy, or drawn from the draft logits under --draft-sampling distribution. With a
// Domino head (model/domino_head.h) those logits are then corrected position by position from
// the candidates proposed before each one, and the candidates are chosen from the corrected ones.
// With a reduced draft vocabulary (model/draft_vocab.h) the LM head is a compact copy of the
// subset's rows, the draft logits have one column per subset token, and the candidates are
// mapped back to target ids; the target verifies as ever, so what is committed does not change.
// A DSpark drafter (config.dspark, io/dflash_config.h) stages B = block_size rows [anchor,
// MASK × (B−1)] and takes all B of them through the final norm and LM head (row j proposes the
// token at s + j + 1): B candidates, verified in blocks of W = B + 1 rows; then its Markov head
// corrects the logits and proposes the candidates one after another, and its confidence head
// scores them (model/dspark_head.h). Neither a Domino head nor a draft vocabulary goes with it.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/dflash_config.h"
#include "kv/paged_kv_cache.h"
#include "model/cpu_ops.h"
#include "model/decoder_layer.h"
#include "model/decoder_model.h"
#include "model/dflash_forward.h"
#include "model/domino_head.h"
#include "model/draft_vocab.h"
#include "model/drafter.h"
#include "model/dspark_head.h"

namespace dscale {

struct DFlashWeights {
  WeightMatrix fc;                 // [hidden, K · target_hidden]
  std::vector<float> hidden_norm;  // [hidden]
  std::vector<DecoderLayerWeights> layers;
  std::vector<float> final_norm;  // [hidden] ("norm.weight")
};

// (name, shape) of every tensor a drafter checkpoint holds, without a prefix.
TensorShapes DFlashTensorShapes(const DFlashConfig& config, int64_t target_hidden);
// The prefix of a drafter checkpoint's tensor names: "" as z-lab writes them, or "model." as some
// exports do.
std::string DFlashTensorPrefix(const Checkpoint& checkpoint);
Result<DFlashWeights> LoadDFlashWeights(const DFlashConfig& config, int64_t target_hidden,
                                        const TensorReader& read);

// Whether a drafter with quantised weights (`--drafter-weights int8|int4`) scores the whole
// vocabulary with an int8 copy of a target LM head that is not int8: where int8 products with
// `activations` run in panels (cpu::PreferredInt8Layout: AVX512-VNNI without AMX, int8
// activations), whose 16 rows a request multiply about twice as fast as BF16 ones. Elsewhere
// they would not (AMX's int8 tiles trail its BF16 ones at many rows), and the drafter scores with
// the target's head. Drafts need not be the target's bits: the target verifies every one.
bool UsesInt8DraftHead(cpu::Int8Activations activations);

class DFlashDrafter : public Drafter {
 public:
  // Loads `dir`/config.json and its safetensors (names with or without a "model." prefix) and
  // validates them against `target`, which must outlive the drafter (its embedding and LM head
  // are shared).
  // With DrafterHead::kDomino the config must declare a head ("domino_config"), read from its
  // file in `dir`; with kNone a declared head is not loaded. `vocab` says whether the folder's
  // draft_vocab.json restricts the drafts (kSubset without one is an error naming the file).
  // A DSpark drafter's heads are read from its checkpoint; it refuses kDomino, and a draft
  // vocabulary (kSubset, or kAuto with a draft_vocab.json in `dir`), naming the flag or file.
  // `weights` (`--drafter-weights`): int8 or int4 quantise the drafter's projections at load as
  // QuantizeLayer does a target's, its fc and a draft vocabulary's LM head rows to int8 in either
  // mode (over the whole vocabulary it shares the target's head as the target holds it). The
  // drafts may change; what is committed does not (the target verifies every token).
  static Result<DFlashDrafter> Load(const std::string& dir, const DecoderModel& target,
                                    DrafterHead head = DrafterHead::kNone,
                                    DraftVocabChoice vocab = DraftVocabChoice::kFull,
                                    WeightsMode weights = WeightsMode::kAsStored);
  // `dspark`: a DSpark drafter's head weights (what config.dspark declares; ignored otherwise).
  DFlashDrafter(DFlashConfig config, DFlashWeights weights, const DecoderModel& target,
                DSparkHeadWeights dspark = {});

  // Runs `head` on every draft from now on (its embedding must be the target's). Not on a DSpark
  // drafter.
  void AttachHead(DominoHead head);
  const DominoHead* head() const { return head_.has_value() ? &*head_ : nullptr; }
  // Drafts over `vocab`'s tokens from now on (made for the target's vocabulary): gathers the
  // target LM head's rows of the subset once, as stored (f32, BF16 or int8), and the head's
  // correction rows likewise. Once; not on a DSpark drafter.
  void RestrictVocab(DraftVocab vocab);
  // The subset drafted over, or null for the target's whole vocabulary.
  const DraftVocab* draft_vocab() const {
    return draft_vocab_.has_value() ? &*draft_vocab_ : nullptr;
  }
  // Columns of DraftOutput::logits: the subset's size, or the target's vocabulary.
  int64_t draft_vocab_size() const;
  // The LM head the drafts are scored with: the subset's rows (int8 where the drafter's weights
  // are quantised) or the whole vocabulary's: the target's as it holds it, or an int8 copy where
  // the drafter's weights are quantised and UsesInt8DraftHead.
  const WeightMatrix& lm_head() const {
    return draft_lm_head_.empty() ? target_->weights().LmHead() : draft_lm_head_;
  }

  const DFlashConfig& config() const { return config_; }
  const DFlashWeights& weights() const { return weights_; }
  // A DSpark drafter's heads, or null.
  const DSparkHead* dspark_head() const {
    return dspark_head_.has_value() ? &*dspark_head_ : nullptr;
  }
  // A DSpark drafter's confidence head ("enable_confidence_head").
  bool has_confidence_head() const override {
    return config_.is_dspark() && config_.dspark->confidence_head;
  }
  bool samples_drafts() const override { return true; }
  // A Domino head, or a DSpark drafter's Markov head.
  bool conditions_on_candidates() const override {
    return head_.has_value() || (config_.is_dspark() && config_.dspark->has_markov_head());
  }
  // W, the verify block: DraftBlock::verify_rows() (config.block_size for DFlash, + 1 for DSpark).
  int32_t block_size() const override { return config_.Block().verify_rows(); }
  const std::vector<int32_t>& feature_layers() const override { return config_.target_layer_ids; }
  // How the draft layers attend and the block is scaled (the config's layout).
  DraftLayout layout() const;
  // Width of the feature rows AppendContext takes: K · target hidden.
  int64_t feature_width() const;

  // Creates the draft KV store, slot-compatible with `cache`.
  void Bind(const PagedKvCache& cache) override;
  int64_t KvBytesPerPosition(KvDtype dtype) const override;
  // The draft KV store (null before Bind), for inspection.
  const KvStore* context_store() const { return store_.has_value() ? &*store_ : nullptr; }

  // Projects committed rows' target features into the draft KV store at their slots, roped at
  // their positions.
  void AppendContext(const ContextRows& rows) override;

  // One drafting step over a StepBatch of the blocks (one span of DraftBlock::input_rows rows per
  // request). The block's transient K/V are written at the slots of positions ctx_len ..
  // ctx_len + input_rows − 1 (the verification that follows overwrites them). Candidates
  // (W − 1 per request) are chosen from the draft logits (the corrected ones with a Domino or
  // Markov head; `hidden` stays the backbone's) — the argmax, or a draw for a request with
  // DraftRequest::sampling (model/draft_choice.h) — as target ids; the logits have
  // draft_vocab_size() columns (column_ids maps a subset's); `confidence` holds a DSpark
  // confidence head's logits (else empty).
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override;

 private:
  DFlashConfig config_;
  DFlashWeights weights_;
  const DecoderModel* target_;
  LayerDims dims_;
  // Per draft layer, the k and v rows of its stacked [q; k; v] matrix (views, no copy): what
  // AppendContext projects the context through.
  std::vector<WeightMatrix> context_kv_;
  // Each layer's attention where the config's layout is not the original one (else empty).
  std::vector<DraftAttention> layer_attention_;
  std::optional<KvStore> store_;  // set by Bind
  std::optional<DominoHead> head_;
  std::optional<DSparkHead> dspark_head_;  // set iff config_.is_dspark()
  std::optional<DraftVocab> draft_vocab_;
  // [subset or vocabulary, hidden]: the target LM head's subset rows, or an int8 copy of its rows
  // for a quantised drafter; empty: the target's own (lm_head()).
  WeightMatrix draft_lm_head_;
  std::vector<int32_t> anchors_;  // the head's input, one per drafted request
  std::vector<DraftChoice> choices_;  // how each drafted request chooses its candidates
  std::vector<double> draw_;          // Q while a choice draws
  // Scratch, reused across calls.
  StepBatch blocks_;  // [anchor, MASK × (input_rows − 1)] per request, non-causal
  LayerScratch scratch_;
};

}  // namespace dscale
