#pragma once
// Benchmark cells on an in-process engine: prompts encoded once with the Qwen3 chat template
// (thinking disabled), manifests turned into request lists with matched seeds, and one engine
// per cell whose max running requests is the cell's concurrency.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "bench/manifest.h"
#include "bench/modes.h"
#include "bench/request_loop.h"
#include "budget/sps_table.h"
#include "budget/verify_budget.h"
#include "core/status.h"
#include "dvl/predictor.h"
#include "engine/engine.h"
#include "io/tokenizer/tokenizer.h"
#include "model/drafter.h"
#include "model/target_model.h"

namespace dscale::bench {

// Each text as one user turn (after a system turn `system`, when not empty) through the chat
// template (thinking disabled), encoded.
Result<std::vector<std::vector<int32_t>>> EncodeChatPrompts(const Tokenizer& tokenizer,
                                                            std::span<const std::string> texts,
                                                            const std::string& system = "");

// The shared-prefix workload's system turn: numbered house rules, deterministic, of about
// `tokens` tokens of `tokenizer` (within one rule's length above).
Result<std::string> SharedSystemPrompt(const Tokenizer& tokenizer, int32_t tokens);

// A dataset's warm-up and measured requests. Request i of the manifest (warm-up first) gets
// sampling seed `seed + i`, so every mode samples with the same seeds.
struct CellRequests {
  std::vector<LoopRequest> warmup;
  std::vector<LoopRequest> measured;
  // When each measured request arrives (an open loop, PoissonArrivals); empty: a closed loop.
  // Warm-up runs closed either way.
  std::vector<double> arrivals;
  int32_t longest_prompt = 0;
};
CellRequests ManifestRequests(const Manifest& manifest,
                              std::span<const std::vector<int32_t>> prompts, uint64_t seed);

// One drafter the modes may draft with: the backend that runs it beside the target, and what the
// policies read besides its drafts.
struct ModeModels {
  StepBackend* backend = nullptr;  // null: the modes drafting with it cannot run
  const dvl::Predictor* predictor = nullptr;  // trained on its drafts; null: dscale cannot run
  // Its confidence head's calibration (dspark over a DSpark drafter); null: none or uncalibrated.
  const budget::ConfidenceCalibration* confidence_calibration = nullptr;
};

struct InProcessModels {
  // --drafter's (its backend's drafter() null: only the none mode can run).
  ModeModels main;
  ModeModels domino;  // --drafter with its Domino head (the domino modes)
  ModeModels dspark;  // --dspark-drafter (the dspark-drafter modes)
  budget::VerifyBudget verify_budget;           // dscale modes without their own
  const budget::SpsTable* sps_table = nullptr;  // null: the dspark modes cannot run
  KvDtype kv_dtype = KvDtype::kBf16;            // the engines' host KV caches
  bool prefix_cache = false;                    // the engines cache prompt pages
  bool mixed_prefill = true;                    // EngineConfig::mixed_prefill
  int32_t prompt_wait_steps = EngineConfig{}.prompt_wait_steps;  // EngineConfig's
  DraftSampling draft_sampling = DraftSampling::kArgmax;  // the engines' (EngineConfig's)

  const ModeModels& For(ModeDrafter drafter) const {
    return drafter == ModeDrafter::kDomino ? domino
           : drafter == ModeDrafter::kDSpark ? dspark
                                             : main;
  }
};

// Whether every runnable mode has what its policy needs (CheckPolicyInputs, named by the mode):
// checked once, before the first cell runs.
Status CheckInProcessModes(const InProcessModels& models, std::span<const BenchMode> modes);

// Warm-up loop, then the measured loop (open where `requests` has arrival times), on a fresh
// engine with `concurrency` running at most; metrics cover the measured loop.
// `params` gives max_tokens, temperature and stop ids. `trace` (may be null) gets both loops'
// steps.
Result<RunMetrics> RunInProcessCell(const InProcessModels& models, const BenchMode& mode,
                                    const CellRequests& requests, int32_t concurrency,
                                    const GenerationParams& params,
                                    const std::function<void()>& on_done,
                                    StepTrace* trace = nullptr);

}  // namespace dscale::bench
