#pragma once
// Small helpers shared by the subcommands.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/step_trace.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_int8.h"
#include "kv/kv_dtype.h"
#include "model/decoder_weights.h"
#include "model/domino_head.h"
#include "model/draft_vocab.h"
#include "spec/draft_distribution.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace dscale::cli {

// "1,2,3" -> {1, 2, 3}. Errors name `flag` and the offending item.
Result<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& flag);

// Prints "dscale <command>: <message>" to stderr and returns exit code 1.
int ReportError(const std::string& command, const Status& status);

// --threads N: the threads every CPU kernel uses — one OpenMP pool, which the OpenMP build of
// OpenBLAS shares (default: OMP_NUM_THREADS, else one per core). Applied while parsing, before
// any model loads.
void AddThreadsOption(CLI::App* cmd);

// --weights as-stored|int8|int4: how the target's projections are held (WeightsMode, into
// `weights`; default as-stored). Another value is a usage error naming the accepted ones.
void AddWeightsOption(CLI::App* cmd, WeightsMode* weights);
// --drafter-weights as-stored|int8|int4: how the drafter's projections are held
// (DFlashDrafter::Load; default as-stored).
void AddDrafterWeightsOption(CLI::App* cmd, WeightsMode* weights);

// --activations bf16|f32: how the CPU backend's BF16 projections (the target's and the
// drafter's) take their activations (cpu::Bf16Activations, into `activations`): each row rounded
// to BF16 once and multiplied with BF16 dot products, or as f32. The default is
// DefaultActivations(), the CPU's cpu::PreferredBf16Activations(). The CUDA backend's GEMMs take
// BF16 activations either way.
cpu::Bf16Activations DefaultActivations();
void AddActivationsOption(CLI::App* cmd, cpu::Bf16Activations* activations);

// --int8-activations int8|f32: how the target's int8 and 4-bit projections (`--weights int8|int4`)
// take their
// activations (cpu::Int8Activations, into `activations`): each row quantised per 32 inputs and
// multiplied with int8 dot products (AMX or VNNI where the CPU has them), or as f32. It changes
// nothing without --weights int8 or int4. The default is kDefaultInt8Activations: int8, which costs
// a decode row what f32 does and a 16-row verification about half (docs/BENCHMARKS.md, "Int8
// activations on the CPU").
inline constexpr cpu::Int8Activations kDefaultInt8Activations = cpu::Int8Activations::kInt8;
void AddInt8ActivationsOption(CLI::App* cmd, cpu::Int8Activations* activations);

// --drafter-head none|domino: whether the drafter's Domino head (declared by its config.json,
// docs/DOMINO.md) corrects the backbone's drafts (DrafterHead, into `head`; default none).
void AddDrafterHeadOption(CLI::App* cmd, DrafterHead* head);

// --draft-vocab auto|full|subset: whether the drafter drafts over the reduced vocabulary its
// folder's draft_vocab.json lists (model/draft_vocab.h) — auto: when the folder has one; full:
// never; subset: always, an error without one. The default is kDefaultDraftVocab.
inline constexpr DraftVocabChoice kDefaultDraftVocab = DraftVocabChoice::kAuto;
void AddDraftVocabOption(CLI::App* cmd, DraftVocabChoice* choice);

// --draft-sampling argmax|distribution: how requests at temperature > 0 draft and are verified
// (EngineConfig::draft_sampling, into `mode`; default argmax).
void AddDraftSamplingOption(CLI::App* cmd, DraftSampling* mode);

// --device cpu|cuda: which step backend runs the models (backend/backend.h), into `device`.
void AddDeviceOption(CLI::App* cmd, std::string* device);

// --kv-dtype bf16|f32: how the host KV caches (the target's and the drafter's) store K and V
// into `dtype`; bf16 (the default) takes half of f32's memory and attention bandwidth.
void AddKvDtypeOption(CLI::App* cmd, KvDtype* dtype);
// --no-mixed-prefill: clears *mixed (EngineConfig::mixed_prefill).
void AddMixedPrefillFlag(CLI::App* cmd, bool* mixed);
// --prompt-wait-steps N (EngineConfig::prompt_wait_steps).
void AddPromptWaitOption(CLI::App* cmd, int32_t* steps);
// --step-trace FILE: one JSON line per decode step (engine/step_trace.h).
void AddStepTraceOption(CLI::App* cmd, std::string* path);
// The trace at `path`, created; null for an empty path (no --step-trace).
Result<std::unique_ptr<StepTrace>> OpenStepTrace(const std::string& path);

// A whole number of at least `min`, refused with "must be at least MIN, got TEXT" (CLI11's own
// PositiveNumber names its upper bound, the largest double, in 300 digits).
CLI::Validator AtLeast(int64_t min);
// A whole number in [min, max], refused with "must be at least MIN, got TEXT" or "must be at most
// MAX, got TEXT".
CLI::Validator InRange(int64_t min, int64_t max);

// The KV capacity a batch command runs with: `flag` (--kv-tokens) when positive, else what
// `concurrency` of `prompts` at once need with `max_tokens` outputs and drafting blocks of
// `block` positions (engine/kv_budget.h), so memory follows the requests.
int64_t KvTokensForPrompts(int64_t flag, const std::vector<std::vector<int32_t>>& prompts,
                           int32_t concurrency, int32_t max_tokens, int32_t block);

}  // namespace dscale::cli
